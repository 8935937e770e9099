package virtionet

import (
	"math/rand"
	"testing"

	"golang.org/x/sys/unix"
)

// straddling returns n bytes of a two-page memfd mapping holding b, from
// 50 bytes before the second page, and a func that truncates the file to
// its first page: the bytes' first line stays, their second page faults.
func straddling(t *testing.T, b []byte) ([]byte, func()) {
	t.Helper()
	page := unix.Getpagesize()
	fd, err := unix.MemfdCreate("virtionet-straddling", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(2*page)); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	s := m[page-50 : page-50+len(b)]
	copy(s, b)
	return s, func() {
		if err := unix.Ftruncate(fd, int64(page)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRxEagerAfterRunningDry: a Deliver that runs out of buffers makes
// the queue's Fills eager (the guest is behind) for the next
// eagerDelivers Delivers, each later dry one starts the count again, and
// after that many that found buffers for all their frames the Fills batch
// again; the frames arrive the same either way.
func TestRxEagerAfterRunningDry(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g, q := rxCase(t, k, 0, featMrg, 0)
			rng := rand.New(rand.NewSource(11))
			var want [][]byte
			passed, bytes, dry := 0, 0, 0
			deliver := func(posted, frames, wantN int, wantEager bool) {
				t.Helper()
				for i := 0; i < posted; i++ {
					g.post(2048)
				}
				fs := make([][]byte, frames)
				for i := range fs {
					fs[i] = frame(rng, 60+i)
				}
				if n, err := q.Deliver(framesOf(fs...)); n != wantN || err != nil {
					t.Fatalf("Deliver = %d, %v; want %d", n, err, wantN)
				}
				if q.fill.Eager != wantEager {
					t.Fatalf("Fill eager %v, want %v (%d Delivers left)", q.fill.Eager, wantEager, q.eagerLeft)
				}
				want = append(want, fs[:wantN]...)
				passed, bytes, dry = passed+wantN, bytes+bytesOf(fs[:wantN]), dry+frames-wantN
				if len(want) > 64 {
					checkReceived(t, g, true, want)
					want = want[:0]
				}
			}
			deliver(8, 8, 8, false)
			deliver(3, 6, 3, false) // runs dry: the guest is behind
			for i := 0; i < 50; i++ {
				deliver(4, 4, 4, true)
			}
			deliver(0, 2, 0, true) // dry again: the count starts over
			for i := 0; i < eagerDelivers; i++ {
				deliver(4, 4, 4, true)
			}
			deliver(4, 4, 4, false)
			checkReceived(t, g, true, want)
			checkStats(t, q.Snapshot(), passed, bytes, map[DropReason]int{DropNoRxBuffers: dry})
		})
	}
}

// TestRxFaultInEagerFill: an eager Fill (the guest was behind) on the
// packed ring publishes its first lines of used descriptors (slots 1-3,
// then 4-7), then faults copying the frame after (its second page is
// gone: another guest's memory, truncated). The frames published before
// the fault count as delivered and are in the guest's ring, the
// interrupted one and the rest as memory_fault, and the next burst goes
// into the buffers the fault left. A Fill that is not eager, and the split
// ring's (never eager), publish nothing before the same fault.
func TestRxFaultInEagerFill(t *testing.T) {
	for _, k := range kinds {
		for _, eager := range []bool{true, false} {
			t.Run(k.String()+"/"+map[bool]string{true: "eager", false: "batched"}[eager], func(t *testing.T) { faultInEagerFill(t, k, eager) })
		}
	}
}

// faultInEagerFill is TestRxFaultInEagerFill on ring kind k.
func faultInEagerFill(t *testing.T, k ringKind, eager bool) {
	g, q := rxCase(t, k, 0, featMrg, 0)
	rng := rand.New(rand.NewSource(12))
	first := []byte(nil)
	passed, bytes, dry := 0, 0, 0
	if eager {
		// One buffer for two frames: the ring runs dry, the
		// guest is behind, and the used position is 1.
		g.post(2048)
		first = frame(rng, 80)
		if n, err := q.Deliver(framesOf(first, frame(rng, 80))); n != 1 || err != nil || q.eagerLeft == 0 {
			t.Fatalf("Deliver = %d, %v, eager for %d Delivers", n, err, q.eagerLeft)
		}
		passed, bytes, dry = 1, len(first), 1
	}
	for i := 0; i < 12; i++ {
		g.post(2048)
	}
	fs := make([][]byte, 10)
	for i := range fs {
		fs[i] = frame(rng, 100)
	}
	var truncate func()
	fs[8], truncate = straddling(t, fs[8])
	truncate()
	if r := deliverFault(q, framesOf(fs...)); !isMemoryFault(r) {
		t.Fatalf("Deliver unwound with %v, want a memory fault", r)
	}
	published := 0
	if eager && k == kindPacked {
		published = 7 // slots 1-3 and 4-7: frames 0-6
	}
	passed += published
	bytes += bytesOf(fs[:published])
	checkStats(t, q.Snapshot(), passed, bytes, map[DropReason]int{DropNoRxBuffers: dry, DropMemoryFault: 10 - published})

	// The queue goes on: the next burst lands after what was
	// published, in the buffers the fault left.
	g0, g1 := frame(rng, 200), frame(rng, 300)
	if n, err := q.Deliver(framesOf(g0, g1)); n != 2 || err != nil {
		t.Fatalf("Deliver after the fault = %d, %v", n, err)
	}
	var want [][]byte
	if first != nil {
		want = append(want, first)
	}
	want = append(want, fs[:published]...)
	checkReceived(t, g, true, append(want, g0, g1))
	checkStats(t, q.Snapshot(), passed+2, bytes+len(g0)+len(g1), map[DropReason]int{DropNoRxBuffers: dry, DropMemoryFault: 10 - published})
}

func bytesOf(fs [][]byte) int {
	n := 0
	for _, f := range fs {
		n += len(f)
	}
	return n
}

// TestRxFaultAfterEagerFill: an eager Fill delivers the burst's first
// frames whole, then the general path faults on the next frame (its
// second segment is in truncated memory). The frames the Fill delivered
// count once, as delivered; the interrupted frame counts as memory_fault.
func TestRxFaultAfterEagerFill(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g, q := rxCase(t, k, 0, featMrg, MaxFrameLen(9000))
			rng := rand.New(rand.NewSource(13))
			g.post(2048)
			first := frame(rng, 80)
			if n, err := q.Deliver(framesOf(first, frame(rng, 80))); n != 1 || err != nil || q.eagerLeft == 0 {
				t.Fatalf("Deliver = %d, %v, eager for %d Delivers", n, err, q.eagerLeft)
			}
			for i := 0; i < 8; i++ {
				g.post(2048)
			}
			f0, f1, f2 := frame(rng, 100), frame(rng, 120), frame(rng, 3000)
			tail, truncate := doomed(t, f2[2500:])
			f := framesOf(f0, f1)
			f.Add([][]byte{f2[:2500], tail})
			truncate()
			if r := deliverFault(q, f); !isMemoryFault(r) {
				t.Fatalf("Deliver unwound with %v, want a memory fault", r)
			}
			checkStats(t, q.Snapshot(), 3, len(first)+len(f0)+len(f1), map[DropReason]int{DropNoRxBuffers: 1, DropMemoryFault: 1})
			checkReceived(t, g, true, [][]byte{first, f0, f1})
		})
	}
}
