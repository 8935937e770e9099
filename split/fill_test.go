package split_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/split"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Tests of the split ring's one-pass receive path (fill.go): what a Fill
// places is what Pop then Push would have given the driver, and what it
// does not take is left for Pop as it was.

// fillEnv is a split ring of size over a driver, with buffers in region 1.
type fillEnv struct {
	t   *testing.T
	m   *drivertest.Mem
	d   *drivertest.SplitDriver
	r   *split.Ring
	buf uint64 // region 1's start
}

func newFillEnv(t *testing.T, size uint16) *fillEnv {
	m := newMem(t, 1<<20, 1<<20)
	d := drivertest.NewSplitDriver(m, 0, size)
	r, err := split.New(d.Config(featAll))
	if err != nil {
		t.Fatal(err)
	}
	return &fillEnv{t: t, m: m, d: d, r: r, buf: m.Regions[1].GuestAddr}
}

// post adds one writable buffer of ln bytes at addr and returns its head.
func (e *fillEnv) post(addr uint64, ln uint32) uint16 {
	e.t.Helper()
	h, err := e.d.AddChain([]drivertest.SplitBuf{{Addr: addr, Len: ln, Write: true}}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.d.Publish()
	return h
}

// wantFilled checks that the driver reaps frames 0.. of j in order, in
// the buffers of heads at addrs, each after its header.
func (e *fillEnv) wantFilled(j *virtq.FillJob, heads []uint16, addrs []uint64) {
	e.t.Helper()
	for i := range heads {
		u, ok, err := e.d.Reap()
		if !ok || err != nil {
			e.t.Fatalf("used %d: %v, %v", i, ok, err)
		}
		src := j.Src[i]
		if u.ID != heads[i] || u.Len != uint32(virtq.FillHeadLen+len(src)) {
			e.t.Fatalf("used %d: head %d length %d, want %d, %d", i, u.ID, u.Len, heads[i], virtq.FillHeadLen+len(src))
		}
		got := e.m.Bytes(addrs[i], uint64(u.Len))
		if binary.LittleEndian.Uint64(got) != j.Head[i].Lo || binary.LittleEndian.Uint32(got[8:]) != j.Head[i].Hi || !bytes.Equal(got[virtq.FillHeadLen:], src) {
			e.t.Fatalf("used %d: header or frame differs", i)
		}
	}
	if _, ok, _ := e.d.Reap(); ok {
		e.t.Fatal("more used elements than frames")
	}
}

// TestSplitFillRounds: rounds of Fills over a ring of 8, some with more
// frames than buffers, round the ring many times, every third round popped
// and pushed instead: every frame arrives whole and in order.
func TestSplitFillRounds(t *testing.T) {
	e := newFillEnv(t, 8)
	next := 0
	for round := 0; round < 40; round++ {
		m := 1 + round%8
		var heads []uint16
		var addrs []uint64
		for i := 0; i < m; i++ {
			a := e.buf + uint64(next%64)*256
			next++
			heads = append(heads, e.post(a, 256))
			addrs = append(addrs, a)
		}
		if round%3 == 2 {
			var b virtq.Burst
			n, err := e.r.Pop(&b, 32)
			if n != m || err != nil {
				t.Fatalf("round %d: popped %d, %v", round, n, err)
			}
			used := make([]virtq.Used, n)
			for i := range used {
				used[i] = virtq.Used{ID: b.Chains[i].ID}
			}
			if err := e.r.Push(used); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < m; i++ {
				if _, ok, err := e.d.Reap(); !ok || err != nil {
					t.Fatalf("round %d: reap: %v, %v", round, ok, err)
				}
			}
			continue
		}
		j := drivertest.FillJob(m+round%3, func(i int) int { return 1 + (round*37+i*13)%(256-virtq.FillHeadLen) })
		if n, err := e.r.Fill(j); n != m || err != nil {
			t.Fatalf("round %d: Fill placed %d (%v) of %d frames into %d buffers", round, n, err, j.N, m)
		}
		if round == 0 && !e.r.NeedNotify() {
			t.Fatal("no interrupt asked for after the first Fill")
		}
		e.wantFilled(j, heads, addrs)
		if e.r.InFlight() != 0 {
			t.Fatalf("round %d: %d in flight after a Fill", round, e.r.InFlight())
		}
	}
}

// TestSplitFillStops: two buffers Fill takes, then one it must not: Fill
// places two frames and leaves the third to Pop, which takes it (or fails
// the ring for what is wrong with it).
func TestSplitFillStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(e *fillEnv) // the third entry
		want error
	}{
		{"chain of two", func(e *fillEnv) {
			if _, err := e.d.AddChain([]drivertest.SplitBuf{{Addr: e.buf, Len: 64, Write: true}, {Addr: e.buf + 64, Len: 64, Write: true}}, nil); err != nil {
				e.t.Fatal(err)
			}
		}, nil},
		{"indirect", func(e *fillEnv) {
			if _, err := e.d.AddChain(nil, []drivertest.SplitBuf{{Addr: e.buf, Len: 256, Write: true}}); err != nil {
				e.t.Fatal(err)
			}
		}, nil},
		{"read-only", func(e *fillEnv) {
			if _, err := e.d.AddChain([]drivertest.SplitBuf{{Addr: e.buf, Len: 256}}, nil); err != nil {
				e.t.Fatal(err)
			}
		}, nil},
		{"too short for header and frame", func(e *fillEnv) { e.post(e.buf, virtq.FillHeadLen+99) }, nil},
		{"head out of range", func(e *fillEnv) { e.d.WriteAvail(e.d.AvailIdx(), 16) }, virtq.ErrBadID},
		{"outside guest memory", func(e *fillEnv) {
			e.d.WriteDesc(15, e.buf+(1<<20)-8, 256, drivertest.SplitFWrite, 0)
			e.d.WriteAvail(e.d.AvailIdx(), 15)
		}, virtq.ErrBadAddress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFillEnv(t, 16)
			addrs := []uint64{e.buf + 4096, e.buf + 8192}
			heads := []uint16{e.post(addrs[0], 256), e.post(addrs[1], 256)}
			tc.add(e)
			e.d.PublishIdx(heads2idx(e))
			j := drivertest.FillJob(4, func(int) int { return 100 })
			if n, err := e.r.Fill(j); n != 2 || err != nil {
				t.Fatalf("Fill placed %d (%v), want 2", n, err)
			}
			e.wantFilled(j, heads, addrs)
			var b virtq.Burst
			n, err := e.r.Pop(&b, 32)
			if !errors.Is(err, tc.want) || (tc.want == nil && n != 1) {
				t.Fatalf("Pop after Fill: %d, %v; want 1 chain or %v", n, err, tc.want)
			}
		})
	}
}

// heads2idx is the avail index that publishes everything added, and the
// raw entry a case wrote at the driver's next index.
func heads2idx(e *fillEnv) uint16 {
	idx := e.d.AvailIdx()
	if binary.LittleEndian.Uint16(e.d.Avail[4+2*int(idx&(e.d.Size-1)):]) != 0 {
		return idx + 1
	}
	return idx
}

// TestSplitFillDuplicateHead: a head given twice in one run fails the
// ring with ErrBadID before anything is placed, as Pop fails it; the same
// heads in two Fills are two uses.
func TestSplitFillDuplicateHead(t *testing.T) {
	e := newFillEnv(t, 8)
	h := e.post(e.buf, 256)
	e.post(e.buf+256, 256)
	e.d.WriteAvail(2, h)
	e.d.PublishIdx(3)
	if n, err := e.r.Fill(drivertest.FillJob(3, func(int) int { return 20 })); n != 0 || !errors.Is(err, virtq.ErrBadID) {
		t.Fatalf("Fill: %d, %v; want ErrBadID", n, err)
	}
	if e.d.UsedIdx() != 0 {
		t.Fatalf("used index %d after a failed Fill", e.d.UsedIdx())
	}
	var b virtq.Burst
	if _, err := e.r.Pop(&b, 32); !errors.Is(err, virtq.ErrBroken) {
		t.Fatalf("Pop after a failed Fill: %v", err)
	}
	e = newFillEnv(t, 8)
	for round := 0; round < 6; round++ {
		heads := []uint16{e.post(e.buf, 64), e.post(e.buf+64, 64)}
		j := drivertest.FillJob(2, func(int) int { return 20 })
		if n, err := e.r.Fill(j); n != 2 || err != nil {
			t.Fatalf("round %d: Fill: %d, %v", round, n, err)
		}
		e.wantFilled(j, heads, []uint64{e.buf, e.buf + 64})
	}
}

// TestSplitFillOff: a transmit ring, writes being logged, a broken ring:
// Fill places nothing and moves nothing.
func TestSplitFillOff(t *testing.T) {
	j := drivertest.FillJob(1, func(int) int { return 20 })
	check := func(name string, e *fillEnv) {
		t.Helper()
		st := e.r.State()
		if n, err := e.r.Fill(j); n != 0 || err != nil || e.r.State() != st || e.d.UsedIdx() != 0 {
			t.Fatalf("%s: Fill placed %d (%v)", name, n, err)
		}
	}
	e := newFillEnv(t, 8)
	cfg := e.d.Config(featAll)
	cfg.ReadOnly = true
	var err error
	if e.r, err = split.New(cfg); err != nil {
		t.Fatal(err)
	}
	e.post(e.buf, 256)
	check("transmit ring", e)

	e = newFillEnv(t, 8)
	cfg = e.d.Config(featAll)
	cfg.Mem = drivertest.NewLog(e.m).Logged(e.m)
	if e.r, err = split.New(cfg); err != nil {
		t.Fatal(err)
	}
	e.post(e.buf, 256)
	check("logged", e)

	e = newFillEnv(t, 8)
	e.d.PublishIdx(9)
	var b virtq.Burst
	if _, err := e.r.Pop(&b, 32); !errors.Is(err, virtq.ErrBadIndex) {
		t.Fatal(err)
	}
	check("broken", e)
}

// TestHostileFillFirst: every hostile case of TestHostile, with a Fill
// before the Pop: the ring fails with the case's error either way.
func TestHostileFillFirst(t *testing.T) {
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			h, r := newHostileRing(t, tc.size, tc.features)
			if bad := tc.setup(h); bad >= 0 {
				h.d.WriteAvail(0, uint16(bad))
				h.d.PublishIdx(1)
			}
			if tc.name == "head already in flight" {
				h.popHeadFirst(t, r)
			}
			_, err := r.Fill(drivertest.FillJob(virtq.MaxBurst, func(int) int { return 1 }))
			if err == nil {
				var b virtq.Burst
				_, err = r.Pop(&b, virtq.MaxBurst)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Fill then Pop: %v, want %v", err, tc.want)
			}
		})
	}
}
