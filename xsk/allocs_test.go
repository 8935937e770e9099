package xsk

import "testing"

// TestZeroAllocsPerBurst proves the data path allocates nothing: a full
// cycle (generator transmit and reap; receive, release half, forward the
// other half without a copy, transmit copies, reap, wait, statistics) runs
// with zero allocations while frames really flow.
func TestZeroAllocsPerBurst(t *testing.T) {
	p := newPair(t, SocketConfig{RXSize: 256, TXSize: 256, FillSize: 256, CompletionSize: 256})
	frames := make([][]byte, MaxBurst)
	for i := range frames {
		frames[i] = udpFrame(64, uint16(5000+i), 0x44440000+uint32(i))
	}
	var descs [MaxBurst]Desc
	received := 0
	cycle := func() {
		p.gen.Complete()
		p.gen.Transmit(frames)
		n := p.rx.Receive(descs[:])
		received += n
		p.rx.Release(descs[:n/2])
		p.rx.TransmitDescs(descs[n/2 : n])
		p.rx.Transmit(frames[:4])
		p.rx.Complete()
		p.rx.Wait(0)
		_, _ = p.rx.Stats()
		_ = p.rx.Counters()
	}
	for range 10 {
		cycle() // warm up
	}
	if a := testing.AllocsPerRun(200, cycle); a != 0 {
		t.Fatalf("%v allocations per burst cycle, want 0", a)
	}
	if received == 0 {
		t.Fatal("no frames flowed: the measurement proves nothing")
	}
	c := p.rx.Counters()
	if c.FreeRejected != 0 || c.CompletionsLost != 0 || c.KickErrors != 0 {
		t.Fatalf("counters %+v", c)
	}
	t.Logf("received %d frames during the cycles; rx counters %+v", received, c)
}
