// Package qemu boots QEMU guests (TCG) with virtio-net NICs for
// integration tests: vhost-user NICs on a back-end under test (xvswitch's,
// or DPDK's), a cached Debian kernel and busybox initramfs, a script of
// pings, TCP transfers and shell commands the guest runs, and its reports
// parsed into results. It also holds the reference topology, a guest on
// DPDK testpmd's vhost-user back-end (test/testpmd). No production package
// imports it.
package qemu

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/require"
)

// The QEMU guest harness, file by file:
//   image.go      the cached guest: Debian 6.1 kernel (vmlinux, PVH) and a
//                 busybox initramfs with the virtio-net modules (EnsureGuest)
//   kernel.go     the kernel .deb: found or downloaded, then unpacked
//   cpio.go       the initramfs archive format
//   config.go     what a test asks for: NICs and commands (GuestConfig)
//   script.go     the config as the guest's /xvs/run.sh
//   guest/init, guest/lib.sh   the guest side: /init and the helpers run.sh calls
//   guest.go      QEMU's command line, start, timeout, kill (StartGuest)
//   results.go    the guest's reports parsed (GuestRun, HasFeature)
//   reference.go  the reference topology on DPDK's vhost-user back-end
// A run's own script is a small archive appended to the cached initramfs,
// so the image is built once and every run still gets its own commands.

// Guest is a running QEMU guest (TCG, no KVM here). Its kernel console goes
// to one serial port and its reports to another; both are files in the
// test's temporary directory. QEMU is killed when the run's timeout passes
// and, at the latest, when the test ends.
type Guest struct {
	t       testing.TB
	cfg     GuestConfig
	macs    []string
	cmd     *exec.Cmd
	console string // file: kernel console (ttyS0)
	reports string // file: XVS- lines (ttyS1)
	qmp     string // QMP socket, with GuestConfig.Monitor
	initrd  string // the run's initrd, which a migration target boots too
	qemuOut bytes.Buffer
	start   time.Time

	once     sync.Once
	exited   chan struct{}
	exitErr  error
	timedOut bool
	run      *GuestRun
}

// StartGuest boots a guest with cfg and returns at once; Wait collects the
// outcome. A vhost-user NIC in client mode (the default) needs its back-end
// listening before this is called, unless the NIC sets Reconnect.
func StartGuest(t testing.TB, cfg GuestConfig) *Guest {
	t.Helper()
	require.Commands(t, "qemu-system-x86_64")
	if err := cfg.validate(); err != nil {
		t.Fatalf("guest config: %v", err)
	}
	img := EnsureGuest(t)
	dir := t.TempDir()
	macs := guestMACs(cfg.NICs)
	initrd := filepath.Join(dir, "initrd.img")
	if err := writeRunInitrd(initrd, img, guestScript(&cfg, macs), cfg.Files); err != nil {
		t.Fatalf("guest initrd: %v", err)
	}
	return startQEMU(t, cfg, macs, img.Kernel, initrd, dir)
}

// startQEMU starts QEMU for cfg with its serial files and QMP socket in
// dir.
func startQEMU(t testing.TB, cfg GuestConfig, macs []string, kernel, initrd, dir string) *Guest {
	t.Helper()
	g := &Guest{
		t: t, cfg: cfg, macs: macs, initrd: initrd,
		console: filepath.Join(dir, "console.log"),
		reports: filepath.Join(dir, "reports.log"),
		exited:  make(chan struct{}),
	}
	args := qemuArgs(&cfg, g.macs, kernel, initrd, g.console, g.reports)
	if cfg.Monitor {
		g.qmp = filepath.Join(dir, "qmp.sock")
	}
	args = append(args, MonitorArgs(cfg, g.qmp)...)
	t.Logf("guest: qemu-system-x86_64 %s", strings.Join(args, " "))
	g.cmd = exec.Command("qemu-system-x86_64", args...)
	g.cmd.Stdout = &g.qemuOut
	g.cmd.Stderr = &g.qemuOut
	g.start = time.Now()
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 90 * time.Second
	}
	go func() {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		done := make(chan error, 1)
		go func() { done <- g.cmd.Wait() }()
		select {
		case err := <-done:
			g.exitErr = err
		case <-timer.C:
			g.timedOut = true
			_ = g.cmd.Process.Kill()
			g.exitErr = <-done
		}
		close(g.exited)
	}()
	t.Cleanup(func() {
		g.Stop()
		if t.Failed() {
			g.logOutput()
		}
	})
	return g
}

// Stop kills QEMU if it still runs and waits for it to exit.
func (g *Guest) Stop() {
	select {
	case <-g.exited:
	default:
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
}

// Wait blocks until QEMU exits (the guest powered off, or the timeout
// killed it) and returns what the guest reported. Judge a run by the
// returned results, never by QEMU's exit status: QEMU exits 0 even when its
// back-end went away mid-run.
func (g *Guest) Wait() *GuestRun {
	<-g.exited
	g.once.Do(func() {
		rep, _ := os.ReadFile(g.reports)
		con, _ := os.ReadFile(g.console)
		r := parseReports(string(rep), g.cfg.Commands)
		r.Console = string(con)
		r.Reports = string(rep)
		r.QEMUOutput = g.qemuOut.String()
		r.Duration = time.Since(g.start)
		r.TimedOut = g.timedOut
		r.ExitErr = g.exitErr
		g.run = r
	})
	return g.run
}

// WaitReady waits until the guest reports "XVS-READY name=<name>" (a
// GuestTCPReceive listening) or QEMU exits or timeout passes.
func (g *Guest) WaitReady(name string, timeout time.Duration) bool {
	want := "XVS-READY name=" + name + " "
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(g.reports); err == nil && bytes.Contains(b, []byte(want)) {
			return true
		}
		select {
		case <-g.exited:
			b, _ := os.ReadFile(g.reports)
			return bytes.Contains(b, []byte(want))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false
}

// MAC returns the MAC address of NIC i (configured or generated).
func (g *Guest) MAC(i int) string { return g.macs[i] }

func (g *Guest) logOutput() {
	r := g.Wait()
	g.t.Logf("guest console (%s):\n%s", g.console, r.Console)
	g.t.Logf("guest reports:\n%s", r.Reports)
	if r.QEMUOutput != "" {
		g.t.Logf("qemu output:\n%s", r.QEMUOutput)
	}
}

// guestMACs returns each NIC's MAC: its own, or a random locally
// administered one (52:54:00 is QEMU's prefix) ending in the NIC's index.
func guestMACs(nics []GuestNIC) []string {
	var r [2]byte
	_, _ = rand.Read(r[:])
	macs := make([]string, len(nics))
	for i, n := range nics {
		if n.MAC != "" {
			macs[i] = strings.ToLower(n.MAC)
		} else {
			macs[i] = fmt.Sprintf("52:54:00:%02x:%02x:%02x", r[0], r[1], i)
		}
	}
	return macs
}

// qemuArgs builds QEMU's command line. The recipe and its reasons are in
// docs/testing-peers.md ("QEMU guests").
func qemuArgs(c *GuestConfig, macs []string, kernel, initrd, console, reports string) []string {
	mem := c.MemoryMB
	if mem <= 0 {
		mem = 256
	}
	size := fmt.Sprintf("%dM", mem)
	if c.MemoryKB > 0 {
		size = fmt.Sprintf("%dK", c.MemoryKB)
	}
	cpus := c.CPUs
	if cpus <= 0 {
		cpus = 1
		for _, n := range c.NICs {
			cpus = max(cpus, n.Queues)
		}
	}
	kargs := kernelArgs(c)
	args := []string{
		"-nodefaults", "-nographic", "-no-reboot", "-accel", "tcg",
		"-m", size, "-smp", fmt.Sprint(cpus),
		// vhost-user back-ends map guest memory: it must be a shared fd.
		"-object", memoryBackend(c, size),
		"-numa", "node,memdev=mem",
		"-kernel", kernel, "-initrd", initrd, "-append", strings.Join(kargs, " "),
		"-serial", "file:" + console, "-serial", "file:" + reports,
	}
	for i, n := range c.NICs {
		netdev := fmt.Sprintf("n%d", i)
		if n.Socket != "" {
			// A comma in an option value is written as two.
			ch := "path=" + strings.ReplaceAll(n.Socket, ",", ",,")
			if n.Server {
				ch += ",server=on,wait=off"
			} else if n.Reconnect > 0 {
				ch += fmt.Sprintf(",reconnect=%d", n.Reconnect)
			}
			args = append(args, "-chardev", fmt.Sprintf("socket,id=c%d,%s", i, ch))
			nd := fmt.Sprintf("vhost-user,id=%s,chardev=c%d", netdev, i)
			if n.Queues > 1 {
				nd += fmt.Sprintf(",queues=%d", n.Queues)
			}
			args = append(args, "-netdev", nd)
		} else {
			args = append(args, "-netdev", fmt.Sprintf("%s,id=%s", n.Netdev, netdev))
		}
		dev := []string{"virtio-net-pci", "netdev=" + netdev, "mac=" + macs[i],
			// The slot fixes the PCI order; the guest still finds NICs by MAC.
			fmt.Sprintf("addr=0x%x", 0x10+i),
			"disable-legacy=on",
			// No iPXE option ROM: nothing boots from the network, and under TCG
			// each ROM costs boot time.
			"romfile=",
			// Without vectors=0, QEMU 7.2 under TCG segfaults when the guest
			// starts a vhost-user device (msix_set_vector_notifiers).
			"vectors=0",
		}
		if n.Packed {
			dev = append(dev, "packed=on")
		} else {
			dev = append(dev, "packed=off")
		}
		for _, p := range []struct {
			name string
			v    Toggle
		}{{"mrg_rxbuf", n.MrgRxbuf}, {"indirect_desc", n.IndirectDesc}, {"event_idx", n.EventIdx}} {
			if s := p.v.qemu(); s != "" {
				dev = append(dev, p.name+"="+s)
			}
		}
		if n.MTU > 0 {
			dev = append(dev, fmt.Sprintf("host_mtu=%d", n.MTU))
		}
		if n.Queues > 1 {
			dev = append(dev, "mq=on")
		}
		dev = append(dev, n.DeviceOpts...)
		args = append(args, "-device", strings.Join(dev, ","))
	}
	return append(args, c.QEMUArgs...)
}

// writeRunInitrd writes the run's initrd: the cached image followed by an
// archive with lib.sh and run.sh (the kernel unpacks concatenated archives
// in order).
func writeRunInitrd(path string, img *GuestImage, script string, files map[string]string) error {
	base, err := os.ReadFile(img.Initrd)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.Write(base)
	// Compressed too: the kernel aligns an uncompressed archive's headers
	// to where the previous compressed one ended, which no padding here
	// can know portably; a compressed archive needs no alignment.
	zw := gzip.NewWriter(&buf)
	cw := newCPIOWriter(zw)
	cw.Dir("xvs")
	cw.File("xvs/lib.sh", 0o644, guestLib)
	cw.File("xvs/run.sh", 0o644, []byte(script))
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := os.ReadFile(files[name])
		if err != nil {
			return err
		}
		cw.File("xvs/"+name, 0o755, body)
	}
	if err := cw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
