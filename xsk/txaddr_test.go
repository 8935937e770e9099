package xsk

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/require"

	"golang.org/x/sys/unix"
)

// TestFakeTXAt: caller-owned addresses go on the TX ring as they are;
// completions come back by key, out of order, odd addresses with bit 0
// cleared as 6.18 returns them; room, refused descriptors and the
// order-matched API's refusal on such a socket.
func TestFakeTXAt(t *testing.T) {
	s := fakeSocket(t, UMEMConfig{FrameSize: 2048, NumFrames: 64, Unaligned: true},
		SocketConfig{NoRX: true, CallerTX: true, TXSize: 8, CompletionSize: 4, Frames: 4})
	if s.TXRoom() != 4 {
		t.Fatalf("room %d, want 4 (the completion ring bounds it)", s.TXRoom())
	}
	descs := []Desc{{0x5fcd, 60}, {0x9000, 1500}, {0x1_0001, 64}}
	n, err := s.TransmitAt(descs)
	if n != 3 || err != nil {
		t.Fatalf("TransmitAt: %d %v", n, err)
	}
	got := kernelTX(s)
	if len(got) != 3 || got[0].Addr != 0x5fcd || got[2].Addr != 0x1_0001 || got[1].Len != 1500 {
		t.Fatalf("kernel saw %+v", got)
	}
	if s.TXRoom() != 1 || s.TXAtOutstanding() != 3 {
		t.Fatalf("room %d outstanding %d", s.TXRoom(), s.TXAtOutstanding())
	}
	// Out of order, bit 0 dropped.
	kernelComplete(s, 0x1_0000, 0x5fcc)
	var keys [8]uint64
	if n, _ := s.CompleteAt(keys[:]); n != 2 || keys[0] != CompletionKey(0x1_0001) || keys[1] != CompletionKey(0x5fcd) {
		t.Fatalf("completed %d: %#x", n, keys[:n])
	}
	if s.TXAtOutstanding() != 1 || s.TXRoom() != 3 {
		t.Fatalf("outstanding %d room %d", s.TXAtOutstanding(), s.TXRoom())
	}
	// A refused descriptor stops the burst there; the rest stay the
	// caller's; room limits the rest.
	n, _ = s.TransmitAt([]Desc{{0xa000, 60}, {0xb000, 0}, {0xc000, 60}})
	if n != 1 || s.Counters().TXBadDescs != 1 {
		t.Fatalf("sent %d, bad %d", n, s.Counters().TXBadDescs)
	}
	n, _ = s.TransmitAt([]Desc{{0xd000, 60}, {0xe000, 60}, {0xf000, 60}})
	if n != 2 || s.Counters().TXNoSlots != 1 {
		t.Fatalf("sent %d with room 2, no-slots %d", n, s.Counters().TXNoSlots)
	}
	kernelTX(s)
	kernelComplete(s, 0xd000, 0xa000, 0x9000, 0xe000)
	s.CompleteAt(keys[:])
	kernelComplete(s, 0x42) // one more than sent
	if n, _ := s.CompleteAt(keys[:]); n != 1 || s.TXAtOutstanding() != 0 || s.Counters().CompletionsLost != 1 {
		t.Fatalf("completed %d, outstanding %d, lost %d", n, s.TXAtOutstanding(), s.Counters().CompletionsLost)
	}
	// The order-matched API would be confused by these completions.
	if _, err := s.Transmit([][]byte{{1}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Transmit on a CallerTX socket: %v", err)
	}
	if _, err := s.TransmitDescs([]Desc{{0x5000, 60}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("TransmitDescs on a CallerTX socket: %v", err)
	}
	if n, _ := s.Complete(); n != 0 {
		t.Fatal("Complete reaped a CallerTX socket's completions")
	}
}

func TestTXAtAllocs(t *testing.T) {
	s := fakeSocket(t, UMEMConfig{FrameSize: 2048, NumFrames: 64, Unaligned: true},
		SocketConfig{NoRX: true, CallerTX: true, TXSize: 64, CompletionSize: 64, Frames: 4})
	descs := make([]Desc, 32)
	for i := range descs {
		descs[i] = Desc{uint64(4096 + i*2048 + 13), 60}
	}
	keys := make([]uint64, 32)
	a := testing.AllocsPerRun(100, func() {
		n, _ := s.TransmitAt(descs)
		d := kernelTXInto(s, keys)
		kernelCompleteKeys(s, keys[:d])
		if m, _ := s.CompleteAt(keys); m != n {
			t.Fatalf("sent %d completed %d", n, m)
		}
	})
	if a != 0 {
		t.Fatalf("%v allocations per burst", a)
	}
}

// kernelTXInto consumes the TX ring into addrs without allocating.
func kernelTXInto(s *Socket, addrs []uint64) int {
	c := s.tx.consumer.Load()
	n := 0
	for p := s.tx.producer.Load(); c != p && n < len(addrs); c++ {
		addrs[n] = s.tx.slots[c&s.tx.mask].Addr
		n++
	}
	s.tx.consumer.Store(c)
	return n
}

func kernelCompleteKeys(s *Socket, addrs []uint64) {
	p := s.comp.producer.Load()
	for i := len(addrs) - 1; i >= 0; i-- { // reversed: out of order
		s.comp.slots[p&s.comp.mask] = addrs[i] &^ 1
		p++
	}
	s.comp.producer.Store(p)
}

// TestCallerTXOnVeth sends frames from caller memory by address at odd
// offsets on a real socket: they arrive intact in the namespace and every
// completion comes back as the key of an address sent.
func TestCallerTXOnVeth(t *testing.T) {
	require.Root(t)
	mem := mapTwoMemfds(t, 1<<20)
	u, err := NewUMEMFromMemory(mem, UMEMConfig{FrameSize: 2048, Unaligned: true, Headroom: 64})
	if err != nil {
		t.Fatal(err)
	}
	p := newPairOn(t, u, SocketConfig{NoRX: false, CallerTX: true, RXSize: 64, TXSize: 64, FillSize: 64, CompletionSize: 64, Frames: 256})
	s := p.rx
	pfd := packetSocketIn(t, p)
	sent := map[uint64]bool{}
	var descs []Desc
	frames := map[uint32][]byte{}
	for i := range 8 {
		addr := uint64(1<<20 - 13 + i*4099) // odd and even, across the memfd seam
		f := udpFrame(60, uint16(5000+i), 0x77770000+uint32(i))
		copy(mem[addr:], f)
		frames[0x77770000+uint32(i)] = f
		descs = append(descs, Desc{addr, 60})
		sent[CompletionKey(addr)] = true
	}
	if n, err := s.TransmitAt(descs); n != len(descs) || err != nil {
		t.Fatalf("TransmitAt: %d %v", n, err)
	}
	buf := make([]byte, 2048)
	for arrived := 0; arrived < len(descs); {
		n, err := unix.Read(pfd, buf)
		if err != nil {
			t.Fatalf("%d of %d frames arrived: %v", arrived, len(descs), err)
		}
		if n < 60 {
			continue
		}
		tag := uint32(buf[42])<<24 | uint32(buf[43])<<16 | uint32(buf[44])<<8 | uint32(buf[45])
		if f, ok := frames[tag]; ok && bytes.Equal(buf[:60], f) {
			delete(frames, tag)
			arrived++
		}
	}
	var keys [64]uint64
	for deadline := time.Now().Add(5 * time.Second); s.TXAtOutstanding() > 0 && time.Now().Before(deadline); {
		n, _ := s.CompleteAt(keys[:])
		for _, k := range keys[:n] {
			if !sent[k] {
				t.Fatalf("completion %#x is no key of a sent address", k)
			}
			delete(sent, k)
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if len(sent) != 0 {
		t.Fatalf("%d frames never completed", len(sent))
	}
	if st, _ := s.Stats(); st.TXInvalidDescs != 0 {
		t.Fatalf("kernel refused a descriptor: %+v", st)
	}
}
