package bpf

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

func TestAttachNoInterface(t *testing.T) {
	require.Root(t)
	if _, err := Attach("xvsnosuchif0", Options{}); !errors.Is(err, ErrInterface) {
		t.Fatalf("Attach to a missing interface: %v, want ErrInterface", err)
	}
}

// Native XDP on veth; a bridge has no driver hook: auto mode falls back to
// generic with a warning, driver mode refuses.
func TestXDPModes(t *testing.T) {
	t.Parallel()
	require.Root(t)
	require.Commands(t, "ip")
	l := newLab(t, Policy{})
	if l.S.XDPMode() != XDPDriver {
		t.Errorf("veth attached in %s mode, want driver", l.S.XDPMode())
	}
	if strings.Contains(l.Log.String(), "generic") {
		t.Errorf("veth: unexpected fallback:\n%s", l.Log)
	}

	br := netns.UniqueName("xvb")
	netns.MustRun(t, "ip", "link", "add", br, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", br).Run() })
	netns.MustRun(t, "ip", "link", "set", br, "up")

	if s, err := Attach(br, Options{XDPMode: XDPDriver}); !errors.Is(err, ErrAttach) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("driver mode on a bridge: %v, want ErrAttach", err)
	}
	// The failed attempt leaves no pins behind.
	if _, err := os.Stat(PinRoot + "/" + br); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin dir after failed Attach: %v", err)
	}

	log, buf := newLogger()
	s, err := Attach(br, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.XDPMode() != XDPGeneric {
		t.Errorf("bridge attached in %s mode, want generic", s.XDPMode())
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "generic mode") {
		t.Errorf("no warning about the fallback:\n%s", buf)
	}
	out := netns.MustRun(t, "ip", "link", "show", "dev", br)
	if !strings.Contains(out, "xdpgeneric") {
		t.Errorf("ip link show %s does not show xdpgeneric:\n%s", br, out)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out := netns.MustRun(t, "ip", "link", "show", "dev", br); strings.Contains(out, "xdp") {
		t.Errorf("still attached after Close:\n%s", out)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.SetPolicy(Policy{}); !errors.Is(err, ErrClosed) {
		t.Errorf("SetPolicy after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Counters(); !errors.Is(err, ErrClosed) {
		t.Errorf("Counters after Close: %v, want ErrClosed", err)
	}
}

// A program someone else attached (not through a pinned xvswitch link) is
// not ours to replace.
func TestAttachForeignProgram(t *testing.T) {
	t.Parallel()
	require.Root(t)
	require.Commands(t, "ip")
	v := netns.NewVeth(t, netns.VethOptions{})
	if out, err := exec.Command("ip", "link", "set", "dev", v.Outer, "xdp", "obj", "steer_bpfel.o", "sec", "xdp").CombinedOutput(); err != nil {
		require.SkipOrFail(t, fmt.Sprintf("iproute2 cannot load the object here: %v\n%s", err, out))
	}
	if s, err := Attach(v.Outer, Options{}); !errors.Is(err, ErrBusy) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("Attach over a foreign program: %v, want ErrBusy", err)
	}
	if _, err := os.Stat(PinRoot + "/" + v.Outer); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin dir after refused Attach: %v", err)
	}
	if out := netns.MustRun(t, "ip", "link", "show", "dev", v.Outer); !strings.Contains(out, "xdp") {
		t.Errorf("foreign program was detached:\n%s", out)
	}
}

func TestMACMap(t *testing.T) {
	t.Parallel()
	l := newLab(t, Policy{Mode: ModeMAC})
	a, b := randomVMMAC(), randomVMMAC()
	for _, m := range []net.HardwareAddr{a, b} {
		if err := l.S.AddMAC(m, 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.S.AddMAC(b, 4); err != nil { // re-add updates the port
		t.Fatal(err)
	}
	got, err := l.S.MACs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[a.String()] != 3 || got[b.String()] != 4 {
		t.Fatalf("MACs() = %v, want %s:3 %s:4", got, a, b)
	}
	if err := l.S.RemoveMAC(a); err != nil {
		t.Fatal(err)
	}
	if err := l.S.RemoveMAC(a); !errors.Is(err, ErrMACNotFound) {
		t.Fatalf("second RemoveMAC: %v, want ErrMACNotFound", err)
	}
	bc, _ := net.ParseMAC("ff:ff:ff:ff:ff:ff")
	if err := l.S.AddMAC(bc, 1); !errors.Is(err, ErrMAC) {
		t.Fatalf("AddMAC(broadcast): %v, want ErrMAC", err)
	}
	// Fill the map: the next new MAC reports ErrMACMapFull.
	for i := len(got) - 1; i < MaxMACs; i++ {
		m := net.HardwareAddr{0x02, 0xee, byte(i >> 16), byte(i >> 8), byte(i), 1}
		if err := l.S.AddMAC(m, uint32(i)); err != nil {
			t.Fatalf("MAC %d of %d: %v", i, MaxMACs, err)
		}
	}
	if err := l.S.AddMAC(net.HardwareAddr{0x02, 0xef, 0, 0, 0, 1}, 0); !errors.Is(err, ErrMACMapFull) {
		t.Fatalf("AddMAC to a full map: %v, want ErrMACMapFull", err)
	}
	if err := l.S.AddMAC(b, 5); err != nil { // updating an existing one still works
		t.Fatalf("update in a full map: %v", err)
	}
}

func TestSocketSlots(t *testing.T) {
	t.Parallel()
	l := newLab(t, Policy{Mode: ModeAll})
	if err := l.S.SetSocket(MaxQueues, 3); !errors.Is(err, ErrQueue) {
		t.Errorf("SetSocket(MaxQueues): %v, want ErrQueue", err)
	}
	if err := l.S.RemoveSocket(0); !errors.Is(err, ErrNoSocket) {
		t.Errorf("RemoveSocket of an empty slot: %v, want ErrNoSocket", err)
	}
	// Only AF_XDP sockets go in an XSKMAP.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := l.S.SetSocket(0, fd); !errors.Is(err, ErrSocket) {
		t.Errorf("SetSocket(UDP socket): %v, want ErrSocket", err)
	}
	if _, ok := l.S.Socket(0); ok || len(l.S.Sockets()) != 0 {
		t.Errorf("a refused socket was recorded: %v", l.S.Sockets())
	}
}

// Where /sys/fs/bpf is not a bpffs (a fresh container, a minimal image),
// Attach mounts one. Played in a private mount namespace on a throwaway
// thread, with a tmpfs hiding the real bpffs.
func TestMountBPFFS(t *testing.T) {
	require.Root(t)
	// The process's own namespace gets one the usual way first, so the
	// check at the end can tell a leak from a mount made here.
	if err := ensureBPFFS(slog.Default()); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with its namespace
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return err
			}
			if err := unix.Mount("tmpfs", BPFFS, "tmpfs", 0, ""); err != nil {
				return err
			}
			if isBPFFS(BPFFS) {
				return errors.New("tmpfs over /sys/fs/bpf still looks like bpffs")
			}
			log, buf := newLogger()
			if err := ensureBPFFS(log); err != nil {
				return err
			}
			if !isBPFFS(BPFFS) {
				return errors.New("ensureBPFFS did not mount bpffs")
			}
			if !strings.Contains(buf.String(), "mounted bpffs") {
				return errors.New("mount not logged: " + buf.String())
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
			require.SkipOrFail(t, "cannot make a private mount namespace here: "+err.Error())
		}
		t.Fatal(err)
	}
	if !isBPFFS(BPFFS) {
		t.Fatal("the test's mounts leaked into the process's namespace")
	}
}
