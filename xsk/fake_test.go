package xsk

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeSocket assembles a Socket over fake rings and an unregistered UMEM,
// so the burst logic can be tested without root; the test plays the
// kernel through the ring words directly. It poses as a zero-copy socket
// with need_wakeup and no flags set, so it never makes a syscall.
func fakeSocket(t testing.TB, ucfg UMEMConfig, cfg SocketConfig) *Socket {
	t.Helper()
	ucfg.setDefaults()
	if err := ucfg.validate(); err != nil {
		t.Fatal(err)
	}
	cfg.setDefaults()
	mem, err := unix.Mmap(-1, 0, int(ucfg.NumFrames*ucfg.FrameSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	u := &UMEM{cfg: ucfg, mem: mem, nframes: uint64(ucfg.NumFrames), fd: -1}
	s := &Socket{umem: u, fd: -1, cfg: cfg, zeroCopy: true, wakeup: true, frameCap: ucfg.FrameSize}
	if s.fill, err = newAddrRing(mapFake(t, cfg.FillSize, 8), fakeLayout, cfg.FillSize); err != nil {
		t.Fatal(err)
	}
	if s.comp, err = newAddrRing(mapFake(t, cfg.CompletionSize, 8), fakeLayout, cfg.CompletionSize); err != nil {
		t.Fatal(err)
	}
	if !cfg.NoRX {
		if s.rx, err = newDescRing(mapFake(t, cfg.RXSize, descSize), fakeLayout, cfg.RXSize); err != nil {
			t.Fatal(err)
		}
	}
	if !cfg.NoTX {
		if s.tx, err = newDescRing(mapFake(t, cfg.TXSize, descSize), fakeLayout, cfg.TXSize); err != nil {
			t.Fatal(err)
		}
		if !cfg.CallerTX {
			s.fifo = newTXFIFO(cfg.TXSize + cfg.CompletionSize)
		}
	}
	first, err := u.claim(uint64(cfg.Frames))
	if err != nil {
		t.Fatal(err)
	}
	s.alloc = newFrameAlloc(uint64(ucfg.FrameSize), first, uint64(cfg.Frames))
	s.Refill()
	return s
}

// kernelTakeFill consumes up to n fill entries, as the kernel would.
func kernelTakeFill(s *Socket, n int) []uint64 {
	var out []uint64
	c := s.fill.consumer.Load()
	p := s.fill.producer.Load()
	for ; c != p && len(out) < n; c++ {
		out = append(out, s.fill.slots[c&s.fill.mask])
	}
	s.fill.consumer.Store(c)
	return out
}

// kernelRX publishes RX descriptors.
func kernelRX(s *Socket, descs ...unix.XDPDesc) {
	p := s.rx.producer.Load()
	for _, d := range descs {
		s.rx.slots[p&s.rx.mask] = d
		p++
	}
	s.rx.producer.Store(p)
}

// kernelTX consumes every TX descriptor and returns them.
func kernelTX(s *Socket) []unix.XDPDesc {
	var out []unix.XDPDesc
	c := s.tx.consumer.Load()
	for p := s.tx.producer.Load(); c != p; c++ {
		out = append(out, s.tx.slots[c&s.tx.mask])
	}
	s.tx.consumer.Store(c)
	return out
}

// kernelComplete publishes completions carrying the given addresses.
func kernelComplete(s *Socket, addrs ...uint64) {
	p := s.comp.producer.Load()
	for _, a := range addrs {
		s.comp.slots[p&s.comp.mask] = a
		p++
	}
	s.comp.producer.Store(p)
}

func TestFakeRXPath(t *testing.T) {
	s := fakeSocket(t, UMEMConfig{FrameSize: 2048, NumFrames: 64, Unaligned: true, Headroom: 32},
		SocketConfig{NoTX: true, RXSize: 16, FillSize: 16, Frames: 40})
	if s.FreeFrames() != 40-16 {
		t.Fatalf("stash %d after the first refill, want 24", s.FreeFrames())
	}
	fills := kernelTakeFill(s, 4)
	off := uint64(256 + 32)
	kernelRX(s,
		unix.XDPDesc{Addr: fills[0] | off<<48, Len: 60},        // unaligned encoding
		unix.XDPDesc{Addr: fills[1] + off, Len: 1500},          // plain address
		unix.XDPDesc{Addr: 64 * 2048, Len: 60},                 // outside the UMEM
		unix.XDPDesc{Addr: fills[2] + off, Len: 2048*64 + 100}, // runs off the UMEM
		unix.XDPDesc{Addr: fills[3] + off, Len: 0},             // empty
	)
	if !s.RXReady() || s.FillNeedsWakeup() {
		t.Fatal("RXReady false with 5 descriptors published, or wakeup flag invented")
	}
	s.fill.flags.Store(unix.XDP_RING_NEED_WAKEUP)
	if !s.FillNeedsWakeup() {
		t.Fatal("fill need_wakeup not seen")
	}
	s.fill.flags.Store(0)
	var descs [MaxBurst]Desc
	n := s.Receive(descs[:])
	if s.RXReady() {
		t.Fatal("RXReady true after taking everything")
	}
	if n != 2 || descs[0] != (Desc{fills[0] + off, 60}) || descs[1] != (Desc{fills[1] + off, 1500}) {
		t.Fatalf("received %d: %+v", n, descs[:n])
	}
	c := s.Counters()
	if c.RXBadDescs != 3 || c.RXFrames != 2 {
		t.Fatalf("counters %+v", c)
	}
	if s.rx.consumer.Load() != 5 {
		t.Fatalf("RX ring not released: consumer %d", s.rx.consumer.Load())
	}
	if f := s.Frame(descs[1]); len(f) != 1500 || cap(f) != 1500 {
		t.Fatalf("Frame: len %d cap %d", len(f), cap(f))
	}
	if s.Frame(Desc{Addr: 64*2048 - 10, Len: 11}) != nil {
		t.Fatal("Frame beyond the UMEM")
	}
	// Frames 2 and 3 were recycled (identifiable), frame 0 and 1 are the
	// caller's; the 4 consumed fill slots were refilled at Receive.
	s.Release(descs[:n])
	if s.FreeFrames()+16 != 40 {
		t.Fatalf("stash %d + fill 16 != 40 frames", s.FreeFrames())
	}
	s.Release(descs[:1]) // double release
	if s.Counters().FreeRejected != 1 {
		t.Fatal("double release not rejected")
	}
}

func TestFakeTXPath(t *testing.T) {
	s := fakeSocket(t, UMEMConfig{FrameSize: 2048, NumFrames: 64},
		SocketConfig{NoRX: true, TXSize: 8, CompletionSize: 8, Frames: 12})
	if got := s.TXReserve(5); got != 5 {
		t.Fatalf("reserve 5: %d", got)
	}
	for i, l := range []int{60, 0, 70, 5000, 80} {
		if l > 0 && l <= 2048 {
			copy(s.TXBuffer(i), []byte{byte(l)})
		}
		s.TXSetLen(i, l)
	}
	if _, err := s.Transmit([][]byte{{1}}); !errors.Is(err, ErrTXOpen) {
		t.Fatalf("Transmit with a reservation open: %v", err)
	}
	sent, err := s.TXSubmit(5)
	if err != nil || sent != 3 {
		t.Fatalf("submit: %d %v", sent, err)
	}
	got := kernelTX(s)
	if len(got) != 3 || got[0].Len != 60 || got[1].Len != 70 || got[2].Len != 80 {
		t.Fatalf("kernel saw %+v", got)
	}
	mem := s.umem.mem
	if mem[got[0].Addr] != 60 || mem[got[1].Addr] != 70 || mem[got[2].Addr] != 80 {
		t.Fatal("frame contents not where the descriptors point")
	}
	if c := s.Counters(); c.TXTooLong != 1 || c.TXSubmitted != 3 || s.FreeFrames() != 12-3 || s.TXOutstanding() != 3 {
		t.Fatalf("counters %+v, stash %d, outstanding %d", c, s.FreeFrames(), s.TXOutstanding())
	}
	// Completions carry meaningless addresses: matching is by order.
	kernelComplete(s, 1, 3)
	if n, _ := s.Complete(); n != 2 || s.TXOutstanding() != 1 || s.FreeFrames() != 11 {
		t.Fatalf("complete: %d, outstanding %d, stash %d", n, s.TXOutstanding(), s.FreeFrames())
	}
	kernelComplete(s, 5, 7) // one more completion than was submitted
	s.Complete()
	if c := s.Counters(); c.CompletionsLost != 1 || c.TXCompleted != 4 || s.FreeFrames() != 12 {
		t.Fatalf("counters %+v stash %d", c, s.FreeFrames())
	}

	// Limits: 8 TX slots, 12 frames.
	if got := s.TXReserve(20); got != 8 {
		t.Fatalf("reserve 20 on an 8-slot ring: %d", got)
	}
	if s.Counters().TXNoSlots != 12 {
		t.Fatalf("TXNoSlots %d", s.Counters().TXNoSlots)
	}
	for i := range 8 {
		s.TXSetLen(i, 60)
	}
	s.TXSubmit(6) // the last 2 are cancelled
	if s.FreeFrames() != 12-6 || s.tx.producer.Load()-s.tx.consumer.Load() != 6 {
		t.Fatalf("after submitting 6 of 8: stash %d, ring %d", s.FreeFrames(), s.tx.producer.Load()-s.tx.consumer.Load())
	}
	if got := s.TXReserve(4); got != 2 { // ring has 2 free slots
		t.Fatalf("reserve on a ring with 2 free: %d", got)
	}
	s.TXSubmit(0)
	kernelTX(s)
	if got := s.TXReserve(10); got != 6 { // 6 free frames left
		t.Fatalf("reserve with 6 free frames: %d", got)
	}
	if s.Counters().TXNoFrames != 4 {
		t.Fatalf("TXNoFrames %d", s.Counters().TXNoFrames)
	}
	s.TXSubmit(0)

	// Zero-copy forwarding of a frame the caller holds.
	a, _ := s.AllocFrame()
	bad := []Desc{
		{Addr: 1 << 40, Len: 64},      // outside the UMEM
		{Addr: a + 2000, Len: 100},    // crosses a chunk (aligned mode)
		{Addr: a, Len: 0},             // empty
		{Addr: a, Len: 4096},          // longer than a frame
		{Addr: 64*2048 - 10, Len: 20}, // runs off the end
	}
	if n, err := s.TransmitDescs(append([]Desc{{Addr: a + 13, Len: 64}}, bad...)); n != 6 || err != nil {
		t.Fatalf("TransmitDescs: %d %v", n, err)
	}
	if c := s.Counters(); c.TXBadDescs != uint64(len(bad)) {
		t.Fatalf("TXBadDescs %d, want %d", c.TXBadDescs, len(bad))
	}
	if d := kernelTX(s); len(d) != 1 || d[0].Addr != a+13 {
		t.Fatalf("kernel saw %+v", d)
	}
	kernelComplete(s, (a+13)&^1, 0, 0, 0, 0, 0, 0)
	s.Complete()
	if s.FreeFrames() != 12 {
		t.Fatalf("stash %d after all completions, want 12", s.FreeFrames())
	}
}

func unixDesc(addr uint64, n uint32) unix.XDPDesc { return unix.XDPDesc{Addr: addr, Len: n} }
