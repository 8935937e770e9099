package vswitch

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/xsk"
)

// openContiguous opens a socketless vhost device that maps its memory
// table as one range (vhost.Config.Contiguous) with a switch area of area
// bytes.
func openContiguous(t *testing.T, area uint64) *vhost.Device {
	t.Helper()
	d, err := vhost.Open(vhost.Config{Name: t.Name(), Contiguous: true, SwitchArea: area,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// sendFromRange registers l's range as one unaligned AF_XDP UMEM, binds a
// TX socket on a new veth, and sends frame, which the caller put at range
// offset off, by that offset: it must arrive byte for byte at the veth's
// far end, and complete, with no descriptor refused by the kernel.
func sendFromRange(t *testing.T, l *vhost.MemoryLayout, off uint64, frame []byte) {
	t.Helper()
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
	// TX only: the socket's own frames (its allocator's) come from the
	// start of the range, the switch's area; the frame sent is elsewhere.
	s, err := u.Bind(outer.Index, 0, xsk.SocketConfig{NoRX: true, TXSize: 64, CompletionSize: 64, Frames: 64, Mode: xsk.ModeCopy})
	if err != nil {
		t.Fatal(err)
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
			t.Fatalf("the frame at range offset %#x never arrived at the veth's far end: %v", off, err)
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

// TestGuestMemoryAsUMEM: the range a vhost device maps its guest's memory
// table into with vhost.Config.Contiguous (switch area, then the regions
// back to back, here at a file offset that is not page aligned) is
// accepted by the kernel as one AF_XDP UMEM: it registers, a socket binds
// on a veth, and a frame the guest wrote in its buffer region, sent by its
// offset in the range, arrives byte for byte at the far end of the veth.
// That is the zero-copy TX path in miniature (docs/zerocopy-kernel.md).
func TestGuestMemoryAsUMEM(t *testing.T) {
	require.Root(t)
	require.Commands(t, "ip")
	d := openContiguous(t, 1<<20)
	fe := vhosttest.Connect(t, d)
	fe.Start(vhosttest.Options{Packed: true, MmapOffset: 0x800})
	l := d.MemoryLayout()
	if l == nil {
		t.Fatal("no memory layout")
	}
	// The guest writes a frame into its buffer region (region 1), a
	// virtio-net header past a buffer's start.
	r := fe.Mem().Regions[1]
	gpa := r.GuestAddr + 0x3000 + 12
	frame := ethFrame(0x02_00_00_00_00_99, 0x02_00_00_00_00_11, "from guest memory, without a copy by the switch")
	copy(fe.Mem().Bytes(gpa, uint64(len(frame))), frame)
	off, ok := l.Offset(gpa, uint64(len(frame)))
	if !ok {
		t.Fatalf("guest address %#x not in the layout %+v", gpa, l.Regions())
	}
	sendFromRange(t, l, off, frame)
}

// TestGuestHugeMemoryAsUMEM: a range with a hugetlbfs region behind a
// region of 4 KiB pages (so with a gap of switch memory in front of the
// huge page) registers as a UMEM too, and a frame in the huge page is
// sent from it. Registration pins the huge page, so one must be free:
// nr_hugepages is raised by what is missing and restored afterwards.
func TestGuestHugeMemoryAsUMEM(t *testing.T) {
	require.Root(t)
	require.Commands(t, "ip")
	const huge = 2 << 20
	hfd, err := unix.MemfdCreate("vswitch-umem-huge", unix.MFD_CLOEXEC|unix.MFD_HUGETLB)
	if err != nil {
		require.SkipOrFail(t, fmt.Sprintf("no hugetlb memfd here: %v", err))
	}
	defer unix.Close(hfd)
	var sf unix.Statfs_t
	if err := unix.Fstatfs(hfd, &sf); err != nil || sf.Bsize != huge {
		t.Skipf("huge page size %d (%v), the test wants %d", sf.Bsize, err, huge)
	}
	if err := unix.Ftruncate(hfd, huge); err != nil {
		t.Fatal(err)
	}
	if why := freeHugePage(t); why != "" {
		require.SkipOrFail(t, why)
	}
	const small = 1<<20 + 4096
	sfd := vhosttest.MemFD(t, small)
	defer unix.Close(sfd)
	d := openContiguous(t, 4096)
	fe := vhosttest.Connect(t, d)
	fe.Negotiate(vhosttest.DefaultFeatures, vhosttest.ProtocolQEMU)
	fe.MustAck(vhosttest.ReqSetMemTable, vhosttest.MemTable(
		vhosttest.Region{GuestAddr: 1 << 30, Size: small, UserAddr: 1 << 40},
		vhosttest.Region{GuestAddr: 2 << 30, Size: huge, UserAddr: 2 << 40},
	), sfd, hfd)
	l := d.MemoryLayout()
	if l == nil || l.Base()%huge != 0 || len(l.Regions()) != 2 || l.Regions()[1].Offset != huge {
		t.Fatalf("layout %+v", l)
	}
	frame := ethFrame(0x02_00_00_00_00_98, 0x02_00_00_00_00_12, "from a huge page of guest memory")
	off, ok := l.Offset(2<<30+0x1234, uint64(len(frame)))
	if !ok {
		t.Fatal("the huge region is not in the layout")
	}
	copy(l.Range()[off:], frame)
	sendFromRange(t, l, off, frame)
}

// freeHugePage makes one 2 MiB huge page free, raising nr_hugepages if
// none is and restoring it when the test ends, or says why it cannot.
func freeHugePage(t *testing.T) string {
	const nrPath = "/proc/sys/vm/nr_hugepages"
	const freePath = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
	read := func(p string) uint64 {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0
		}
		n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	if read(freePath) >= 1 {
		return ""
	}
	nr := read(nrPath)
	if err := os.WriteFile(nrPath, []byte(strconv.FormatUint(nr+1, 10)), 0); err != nil {
		return "cannot raise " + nrPath + ": " + err.Error()
	}
	t.Cleanup(func() {
		if err := os.WriteFile(nrPath, []byte(strconv.FormatUint(nr, 10)), 0); err != nil {
			t.Errorf("restoring %s to %d: %v", nrPath, nr, err)
		}
	})
	if read(freePath) < 1 {
		return "the kernel found no memory for a huge page"
	}
	return ""
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
