package xsk

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"golang.org/x/sys/unix"
)

// TestBindModes: veth refuses forced zero-copy with ErrZeroCopyUnsupported;
// a bind that failed (zero-copy, or a missing interface) leaves the UMEM
// usable; auto mode ends in copy mode with need_wakeup.
func TestBindModes(t *testing.T) {
	require.Root(t)
	v := netns.NewVeth(t, netns.VethOptions{})
	idx := ifindex(t, v.Outer)
	u, err := NewUMEM(UMEMConfig{FrameSize: 2048, NumFrames: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	small := SocketConfig{RXSize: 64, TXSize: 64, FillSize: 64, CompletionSize: 64}
	zc := small
	zc.Mode = ModeZeroCopy
	if _, err := u.Bind(idx, 0, zc); !errors.Is(err, ErrZeroCopyUnsupported) {
		t.Fatalf("forced zero-copy on veth: %v, want ErrZeroCopyUnsupported", err)
	}
	if _, err := u.Bind(1<<20, 0, small); err == nil || !errors.Is(err, unix.ENODEV) {
		t.Fatalf("bind to a missing ifindex: %v, want ENODEV", err)
	}
	if u.UnclaimedFrames() != 1024 {
		t.Fatalf("failed binds kept frames: %d unclaimed", u.UnclaimedFrames())
	}
	s, err := u.Bind(idx, 0, small) // auto
	if err != nil {
		t.Fatalf("auto bind after failed ones: %v", err)
	}
	if s.ZeroCopy() || !s.NeedWakeup() {
		t.Fatalf("auto on veth: zero-copy %v need_wakeup %v, want copy mode with need_wakeup", s.ZeroCopy(), s.NeedWakeup())
	}
	if got := s.FramesOwned(); got != 2*64+64 {
		t.Fatalf("default frames %d, want 2*fill+tx = 192", got)
	}
	if s.TXBudget() != 64 {
		t.Logf("XDP_MAX_TX_SKB_BUDGET not applied (kernel default); budget %d", s.TXBudget())
	}
	// Forced copy on another queue of another veth, sharing the UMEM.
	v2 := netns.NewVeth(t, netns.VethOptions{})
	cp := small
	cp.Mode = ModeCopy
	s2, err := u.Bind(ifindex(t, v2.Outer), 0, cp)
	if err != nil {
		t.Fatalf("shared bind on a second interface: %v", err)
	}
	if s2.ZeroCopy() || !s2.NeedWakeup() {
		t.Fatal("shared socket did not inherit copy mode with need_wakeup")
	}
	if err := u.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := u.Bind(idx, 1, small); !errors.Is(err, ErrClosed) {
		t.Fatalf("bind on closed UMEM: %v", err)
	}
}

// TestBusyPollOptions: as root, SO_PREFER_BUSY_POLL, SO_BUSY_POLL and
// SO_BUSY_POLL_BUDGET are applied, and an idle Receive drives busy polling
// with recvfrom.
func TestBusyPollOptions(t *testing.T) {
	p := newPair(t, SocketConfig{NoTX: true, RXSize: 64, FillSize: 64, BusyPoll: BusyPoll{Usecs: 20, Budget: 16}})
	on, note := p.rx.BusyPolling()
	if !on {
		t.Fatalf("busy polling off as root: %s", note)
	}
	for opt, want := range map[int]int{unix.SO_BUSY_POLL: 20, unix.SO_PREFER_BUSY_POLL: 1} { // SO_BUSY_POLL_BUDGET cannot be read back
		if got, err := unix.GetsockoptInt(p.rx.FD(), unix.SOL_SOCKET, opt); err != nil || got != want {
			t.Fatalf("sockopt %#x = %d (%v), want %d", opt, got, err, want)
		}
	}
	var descs [MaxBurst]Desc
	for range 3 {
		n := p.rx.Receive(descs[:])
		p.rx.Release(descs[:n])
	}
	if c := p.rx.Counters(); c.RXWakeups == 0 || c.KickErrors != 0 {
		t.Fatalf("busy-polling receive made no recvfrom calls or failed: %+v", c)
	}
}

// TestWaitAndStats: an RX-only socket sleeps in Wait until frames arrive;
// the kernel's statistics and our counters balance with what was sent.
func TestWaitAndStats(t *testing.T) {
	p := newPair(t, SocketConfig{NoTX: true, RXSize: 64, FillSize: 64, Frames: 256})
	frames := make([][]byte, 16)
	for i := range frames {
		frames[i] = udpFrame(60, uint16(3000+i), 0x77770000+uint32(i))
	}
	n, err := p.gen.Transmit(frames)
	if err != nil || n != len(frames) {
		t.Fatalf("generator sent %d: %v", n, err)
	}
	ready, err := p.rx.Wait(5 * time.Second) // a bound, not a timing assertion
	if err != nil || !ready {
		t.Fatalf("Wait: ready %v err %v", ready, err)
	}
	var descs [MaxBurst]Desc
	got := 0
	for deadline := time.Now().Add(5 * time.Second); got < len(frames) && time.Now().Before(deadline); {
		k := p.rx.Receive(descs[:])
		for _, d := range descs[:k] {
			if f := p.rx.Frame(d); len(f) == 60 && strings.HasPrefix(string(f[42:44]), "\x77\x77") {
				got++
			}
		}
		p.rx.Release(descs[:k])
		if k == 0 {
			p.rx.Wait(10 * time.Millisecond)
		}
	}
	if got != len(frames) {
		t.Fatalf("received %d of %d", got, len(frames))
	}
	st, err := p.rx.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RXDropped != 0 || st.RXInvalidDescs != 0 || st.RXRingFull != 0 {
		t.Fatalf("kernel counted losses: %+v", st)
	}
	for p.gen.TXOutstanding() > 0 {
		p.gen.Complete()
		p.gen.Wait(10 * time.Millisecond)
	}
	if c := p.gen.Counters(); c.TXSubmitted != 16 || c.TXCompleted != 16 || p.gen.FreeFrames() != p.gen.FramesOwned() {
		t.Fatalf("generator: %+v, %d of %d frames free", c, p.gen.FreeFrames(), p.gen.FramesOwned())
	}
}
