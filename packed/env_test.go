package packed_test

import (
	"math/rand"
	"testing"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Feature words for tests.
const (
	fIndirect = uint64(1) << virtq.FeatureIndirectDesc
	fEventIdx = uint64(1) << virtq.FeatureEventIdx
	fInOrder  = uint64(1) << virtq.FeatureInOrder
)

// env is a packed ring with its driver model in fake guest memory: region 0
// holds the ring and indirect tables, region 1 the buffers.
type env struct {
	t   testing.TB
	m   *drivertest.Mem
	d   *drivertest.PackedDriver
	r   *packed.Ring
	cfg virtq.Config
	b   virtq.Burst
	// bufBase is the guest address of region 1.
	bufBase uint64
	bufSize uint64
}

func newEnv(t testing.TB, size uint16, features uint64, bufBytes uint64) *env {
	t.Helper()
	// Ring plus room for indirect tables of up to 16 entries per id, and
	// for hostile tests' extra tables.
	ringBytes := uint64(size)*16*(1+16) + 1<<20
	m, err := drivertest.NewMem(ringBytes, bufBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return newEnvMem(t, m, size, features)
}

func newEnvMem(t testing.TB, m *drivertest.Mem, size uint16, features uint64) *env {
	t.Helper()
	e := &env{t: t, m: m, bufBase: m.Regions[len(m.Regions)-1].GuestAddr, bufSize: m.Regions[len(m.Regions)-1].Size}
	e.d = drivertest.NewPackedDriver(m, 0, size)
	e.d.InOrder = features&fInOrder != 0
	e.cfg = e.d.Config(features)
	r, err := packed.New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.r = r
	return e
}

// restore replaces the ring by a new one started from the old one's state,
// as a vhost-user back-end does across GET/SET_VRING_BASE.
func (e *env) restore() {
	e.t.Helper()
	cfg := e.cfg
	cfg.Base = e.r.State()
	r, err := packed.New(cfg)
	if err != nil {
		e.t.Fatalf("restore from %#x: %v", cfg.Base, err)
	}
	e.r = r
}

// readOnly replaces the ring by a fresh ReadOnly one over the same
// driver (a transmit queue's: WRITE flags ignored).
func (e *env) readOnly() {
	e.t.Helper()
	e.cfg.ReadOnly = true
	r, err := packed.New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.r = r
}

// addInTwoRegions adds 8 single buffers of 256 bytes, writable or not,
// alternately in the buffer region and the ring's, and returns their ids
// and guest addresses.
func (e *env) addInTwoRegions(write bool) ([]uint16, []uint64) {
	e.t.Helper()
	other := e.m.Regions[0].GuestAddr + e.m.Regions[0].Size - 4096 // the ring's region
	var ids []uint16
	var addrs []uint64
	for i := 0; i < 8; i++ {
		a := e.bufBase + uint64(i)*256
		if i%2 == 1 {
			a = other - uint64(i)*256
		}
		ids = append(ids, mustAdd(e, []drivertest.PackedBuf{{Addr: a, Len: 256, Write: write}}))
		addrs = append(addrs, a)
	}
	return ids, addrs
}

// pop pops up to max chains and fails the test on error.
func (e *env) pop(max int) int {
	e.t.Helper()
	n, err := e.r.Pop(&e.b, max)
	if err != nil {
		e.t.Fatalf("Pop: %v", err)
	}
	return n
}

// concat joins segments.
func concat(segs [][]byte) []byte {
	var out []byte
	for _, s := range segs {
		out = append(out, s...)
	}
	return out
}

// state encodes ring positions as GET_VRING_BASE does.
func state(avail uint16, availWrap bool, used uint16, usedWrap bool) uint32 {
	return uint32(drivertest.PackedOffWrap(avail, availWrap)) | uint32(drivertest.PackedOffWrap(used, usedWrap))<<16
}

// resumeAfterCrash replaces the ring by a new one, as a back-end does that
// takes over from one that died: it is given a stale base (the fresh
// ring's, as QEMU sends, or any other) and must resume where the driver
// expects the next used descriptor, which is where the old device stopped
// (the driver reaped everything pushed). Every stale base must give the
// same answer.
func (e *env) resumeAfterCrash(rng *rand.Rand) {
	e.t.Helper()
	nu, nuw := e.d.NextUsed()
	want := state(nu, nuw, nu, nuw)
	stale := []uint32{packed.InitialState, 0, e.r.State()}
	for i := 0; i < 3; i++ {
		a, u := uint16(rng.Intn(int(e.cfg.Size))), uint16(rng.Intn(int(e.cfg.Size)))
		stale = append(stale, state(a, rng.Intn(2) == 0, u, rng.Intn(2) == 0))
	}
	for _, b := range stale {
		if b>>16 == want>>16 {
			continue // not stale where it matters
		}
		cfg := e.cfg
		cfg.Base = b
		got, err := resumeBase(cfg)
		if err != nil || got != want {
			e.t.Fatalf("resume from stale base %#x: %#x, %v; the driver's next used slot says %#x", b, got, err, want)
		}
	}
	cfg := e.cfg
	cfg.Base = want
	if got, err := resumeBase(cfg); err != nil || got != want {
		e.t.Fatalf("resume from the right base %#x: %#x, %v", want, got, err)
	}
	r, err := packed.New(cfg)
	if err != nil {
		e.t.Fatalf("new ring at %#x: %v", want, err)
	}
	e.r = r
}
