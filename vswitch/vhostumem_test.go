package vswitch

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/xsk"
)

// TestGuestMemoryAsUMEM: the range a vhost device maps its guest's memory
// table into with vhost.Config.Contiguous (switch area, then the regions
// back to back) is accepted by the kernel as one AF_XDP UMEM: it
// registers, a socket binds on a veth, and a frame the guest wrote in its
// buffer region, sent by its offset in the range, arrives byte for byte
// at the far end of the veth. That is the zero-copy TX path in miniature
// (docs/zerocopy-kernel.md).
func TestGuestMemoryAsUMEM(t *testing.T) {
	require.Root(t)
	require.Commands(t, "ip")
	d, err := vhost.Open(vhost.Config{Name: "umem", Contiguous: true, SwitchArea: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	fe := vhosttest.Connect(t, d)
	fe.Start(vhosttest.Options{Packed: true, MmapOffset: 0x800})
	l := d.MemoryLayout()
	if l == nil {
		t.Fatal("no memory layout")
	}
	u, err := xsk.NewUMEMFromMemory(l.Range(), xsk.UMEMConfig{FrameSize: 2048, Unaligned: true})
	if err != nil {
		t.Fatalf("registering the guest's range of %d bytes at %#x: %v", l.Len(), l.Base(), err)
	}
	t.Cleanup(func() { _ = u.Close() })
	v := netns.NewVeth(t, netns.VethOptions{})
	outer, err := net.InterfaceByName(v.Outer)
	if err != nil {
		t.Fatal(err)
	}
	// TX only: its frames (the allocator's) come from the start of the
	// range, the switch's area; the frame sent is the guest's.
	s, err := u.Bind(outer.Index, 0, xsk.SocketConfig{NoRX: true, TXSize: 64, CompletionSize: 64, Frames: 64, Mode: xsk.ModeCopy})
	if err != nil {
		t.Fatal(err)
	}

	// The guest writes a frame into its buffer region (region 1), at an
	// address a virtio-net header past a buffer's start.
	r := fe.Mem().Regions[1]
	gpa := r.GuestAddr + 0x3000 + 12
	frame := ethFrame(0x02_00_00_00_00_99, 0x02_00_00_00_00_11, "from guest memory, without a copy by the switch")
	copy(fe.Mem().Bytes(gpa, uint64(len(frame))), frame)
	off, ok := l.Offset(gpa, uint64(len(frame)))
	if !ok {
		t.Fatalf("guest address %#x not in the layout %+v", gpa, l.Regions())
	}

	var pfd int
	err = v.NS.Do(func() error {
		ifi, err := net.InterfaceByName(v.Inner)
		if err != nil {
			return err
		}
		pfd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		return unix.Bind(pfd, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(unix.ETH_P_ALL)})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	if err := unix.SetsockoptTimeval(pfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.TransmitDescs([]xsk.Desc{{Addr: off, Len: uint32(len(frame))}}); err != nil || n != 1 {
		t.Fatalf("TransmitDescs at range offset %#x: %d, %v", off, n, err)
	}
	buf := make([]byte, 2048)
	for {
		n, err := unix.Read(pfd, buf)
		if err != nil {
			t.Fatalf("the guest's frame never arrived at the veth's far end: %v", err)
		}
		if bytes.Equal(buf[:n], frame) {
			break
		}
	}
	for deadline := time.Now().Add(5 * time.Second); s.TXOutstanding() > 0 && time.Now().Before(deadline); {
		_, _ = s.Complete()
		time.Sleep(time.Millisecond)
	}
	if s.TXOutstanding() != 0 {
		t.Fatal("the frame never completed")
	}
	if st, err := s.Stats(); err != nil || st.TXInvalidDescs != 0 {
		t.Fatalf("kernel statistics %+v, %v", st, err)
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
