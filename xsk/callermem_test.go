package xsk

import (
	"bytes"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/require"

	"golang.org/x/sys/unix"
)

// TestCallerMemoryUnaligned registers caller memory (two memfds mapped back
// to back, like a VM's regions) as an unaligned UMEM with headroom:
//   - received frames land at fill address + 256 + headroom, intact;
//   - a frame at an odd address, crossing a frame boundary and the seam
//     between the two memfds, is sent with TransmitDescs, arrives intact in
//     the namespace, and completes back to the stash (completions matched in
//     order, although the kernel clears bit 0 of the address it returns).
func TestCallerMemoryUnaligned(t *testing.T) {
	require.Root(t)
	const half = 1 << 20
	mem := mapTwoMemfds(t, half)
	u, err := NewUMEMFromMemory(mem, UMEMConfig{FrameSize: 2048, Unaligned: true, Headroom: 64})
	if err != nil {
		t.Fatal(err)
	}
	p := newPairOn(t, u, SocketConfig{RXSize: 64, TXSize: 64, FillSize: 64, CompletionSize: 64, Frames: 1024})
	s := p.rx

	// RX into caller memory.
	frames := make([][]byte, 8)
	for i := range frames {
		frames[i] = udpFrame(60, uint16(4000+i), 0x66660000+uint32(i))
	}
	if n, err := p.gen.Transmit(frames); err != nil || n != len(frames) {
		t.Fatalf("generator: %d %v", n, err)
	}
	var descs [MaxBurst]Desc
	got := 0
	for deadline := time.Now().Add(5 * time.Second); got < len(frames) && time.Now().Before(deadline); {
		n := s.Receive(descs[:])
		for _, d := range descs[:n] {
			f := s.Frame(d)
			if len(f) != 60 || f[42] != 0x66 {
				continue
			}
			if d.Addr%2048 != 256+64 {
				t.Fatalf("frame at %#x: want offset 320 (256 + headroom 64) in its chunk", d.Addr)
			}
			i := int(f[45])
			if !bytes.Equal(f, frames[i]) {
				t.Fatalf("frame %d corrupted", i)
			}
			got++
		}
		s.Release(descs[:n])
		if n == 0 {
			s.Wait(10 * time.Millisecond)
		}
	}
	if got != len(frames) {
		t.Fatalf("received %d of %d into caller memory", got, len(frames))
	}

	// TX from an odd address across the memfd seam: take frames 511 and
	// 512 (the seam is at 1 MiB) so nobody else uses the bytes.
	var held []uint64
	var f511 uint64
	for {
		a, ok := s.AllocFrame()
		if !ok {
			t.Fatal("frame 511 never came out of the stash")
		}
		held = append(held, a)
		if a == 511*2048 {
			f511 = a
			break
		}
	}
	f512, ok := s.AllocFrame()
	if !ok || f512 != 512*2048 {
		t.Fatalf("next frame %#x, want %#x", f512, 512*2048)
	}
	for _, a := range held[:len(held)-1] {
		s.FreeFrame(a)
	}
	addr := uint64(half - 13)
	frame := udpFrame(60, 4999, 0x66669999)
	copy(mem[addr:], frame)

	pfd := packetSocketIn(t, p)

	before := s.FreeFrames()
	if n, err := s.TransmitDescs([]Desc{{Addr: addr, Len: 60}}); err != nil || n != 1 {
		t.Fatalf("TransmitDescs: %d %v", n, err)
	}
	buf := make([]byte, 2048)
	for {
		n, err := unix.Read(pfd, buf)
		if err != nil {
			t.Fatalf("nothing arrived in the namespace: %v", err)
		}
		if n >= 60 && bytes.Equal(buf[:60], frame) {
			break
		}
	}
	for deadline := time.Now().Add(5 * time.Second); s.TXOutstanding() > 0 && time.Now().Before(deadline); {
		s.Complete()
		s.Wait(10 * time.Millisecond)
	}
	if s.TXOutstanding() != 0 {
		t.Fatal("odd-address frame never completed")
	}
	if s.FreeFrames() != before+1 {
		t.Fatalf("stash %d after completion, want %d (frame 511 back)", s.FreeFrames(), before+1)
	}
	if !s.FreeFrame(f512) || s.FreeFrame(f511) {
		t.Fatal("frame 512 should have been held, frame 511 already returned by the completion")
	}
	if c := s.Counters(); c.FreeRejected != 1 || c.CompletionsLost != 0 {
		t.Fatalf("counters %+v (want exactly the one deliberate double free rejected)", c)
	}
	st, _ := s.Stats()
	if st.TXInvalidDescs != 0 {
		t.Fatalf("kernel refused the descriptor: %+v", st)
	}
}

// packetSocketIn is an AF_PACKET socket on the pair's namespace end
// receiving IPv4 frames, with a 5 s receive timeout; closed at the end.
func packetSocketIn(t *testing.T, p *pair) int {
	t.Helper()
	var pfd int
	err := p.v.NS.Do(func() error {
		ifi, err := interfaceIndex(p.v.Inner)
		if err != nil {
			return err
		}
		pfd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		return unix.Bind(pfd, &unix.SockaddrLinklayer{Ifindex: ifi, Protocol: htons(unix.ETH_P_IP)})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(pfd) })
	if err := unix.SetsockoptTimeval(pfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5}); err != nil {
		t.Fatal(err)
	}
	return pfd
}
