package vhosttest

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// Buf is one buffer of a chain a test makes available itself: a guest
// address, a length, and whether the device may write it.
type Buf = drivertest.PackedBuf

// Completion is a used buffer the guest reaped: the chain's id and the
// bytes the device wrote.
type Completion struct {
	ID  uint16
	Len uint32
}

// Ring is the guest's side of one vring: a drivertest driver model of
// either kind behind the two things the tests do with it, chains in and
// completions out. It also remembers which pool buffers each chain of Send
// and PostRx holds, to take them back when the chain completes.
type Ring struct {
	p *drivertest.PackedDriver
	s *drivertest.SplitDriver
	g *guest

	owned   map[uint16][]uint64 // chain id -> pool buffers it holds
	partial *partialRx          // a merged RX frame still missing buffers
	empty   int                 // RX buffers given back with length 0 (EmptyRx)
	base    uint32              // the SET_VRING_BASE it was last set up with
}

// NewRing lays out a ring of size descriptors of either kind in region 0
// of the guest's memory (after NewMemory). SetupRing hands it to the
// device.
func (f *FrontEnd) NewRing(packed bool, size uint16) *Ring {
	f.t.Helper()
	g := f.guestAlive()
	r := &Ring{g: g, owned: map[uint16][]uint64{}}
	if packed {
		r.p = drivertest.NewPackedDriver(g.mem, 0, size)
	} else {
		r.s = drivertest.NewSplitDriver(g.mem, 0, size)
	}
	return r
}

// Packed is the packed driver model (nil for a split ring), for tests that
// set its options (InOrder, ScrambleIDs) or read its counters.
func (r *Ring) Packed() *drivertest.PackedDriver { return r.p }

// Split is the split driver model (nil for a packed ring).
func (r *Ring) Split() *drivertest.SplitDriver { return r.s }

// Config is the ring as the device is told about it.
func (r *Ring) Config() virtq.Config {
	if r.p != nil {
		return r.p.Config(0)
	}
	return r.s.Config(0)
}

// Add makes a chain of buffers available (published at once) and returns
// its id. The buffers are the caller's: nothing frees them on completion.
func (r *Ring) Add(bufs ...Buf) (uint16, error) {
	if r.g.dead != nil {
		return 0, r.g.dead
	}
	if r.p != nil {
		return r.p.Add(bufs)
	}
	sb := make([]drivertest.SplitBuf, len(bufs))
	for i, b := range bufs {
		sb[i] = drivertest.SplitBuf(b)
	}
	id, err := r.s.AddChain(sb, nil)
	if err == nil {
		r.s.Publish()
	}
	return id, err
}

// Reap returns the chains the device has completed since the last Reap, in
// the order it used them, and takes back the pool buffers of those Send and
// PostRx made. The driver model checks the device's side of the ring rules
// and says what it broke.
func (r *Ring) Reap() ([]Completion, error) {
	cs, bufs, err := r.reap()
	for _, b := range bufs {
		r.g.release(b)
	}
	return cs, err
}

// reap is Reap that hands the completed chains' pool buffers to the
// caller (Receive reads them first), in completion order.
func (r *Ring) reap() ([]Completion, [][]uint64, error) {
	if r.g.dead != nil {
		return nil, nil, r.g.dead
	}
	var cs []Completion
	var err error
	if r.p != nil {
		var pcs []drivertest.PackedCompletion
		pcs, err = r.p.Reap(nil)
		for _, c := range pcs {
			cs = append(cs, Completion{c.ID, c.Len})
		}
	} else {
		for {
			u, ok, rerr := r.s.Reap()
			if rerr != nil || !ok {
				err = rerr
				break
			}
			cs = append(cs, Completion{u.ID, u.Len})
		}
	}
	bufs := make([][]uint64, len(cs))
	for i, c := range cs {
		bufs[i] = r.owned[c.ID]
		delete(r.owned, c.ID)
	}
	return cs, bufs, err
}

// SetupRing sends what QEMU sends to start vring i over r: SET_VRING_NUM,
// _BASE, _ADDR, _KICK and _CALL with new eventfds, and SET_VRING_ENABLE 1
// if enable. Send, PostRx and Receive then find r by its queue pair.
func (f *FrontEnd) SetupRing(i int, r *Ring, enable bool) {
	f.t.Helper()
	f.SetupRingAt(i, r, enable, r.Config().Base)
}

// SetupRingAt is SetupRing with SET_VRING_BASE carrying base instead of a
// fresh ring's state.
func (f *FrontEnd) SetupRingAt(i int, r *Ring, enable bool, base uint32) {
	f.t.Helper()
	cfg := r.Config()
	cfg.Base = base
	for len(f.rings) <= i {
		f.rings = append(f.rings, nil)
		f.kickFDs = append(f.kickFDs, -1)
		f.callFDs = append(f.callFDs, -1)
	}
	f.rings[i] = r
	r.base = base
	idx := uint32(i)
	f.request(ReqSetVringNum, VringState(idx, uint32(cfg.Size)))
	f.request(ReqSetVringBase, VringState(idx, cfg.Base))
	f.request(ReqSetVringAddr, VringAddr(idx, cfg.Desc, cfg.Device, cfg.Driver))
	f.NewKick(i)
	f.NewCall(i)
	if enable {
		f.request(ReqSetVringEnable, VringState(idx, 1))
	}
}

// NewKick gives vring i a new kick eventfd (SET_VRING_KICK) and closes
// the old one, as QEMU does when it restarts a ring.
func (f *FrontEnd) NewKick(i int) {
	f.t.Helper()
	f.kickFDs[i] = f.replaceFD(ReqSetVringKick, i, f.kickFDs[i])
}

// NewCall gives vring i a new call eventfd (SET_VRING_CALL) and closes the
// old one.
func (f *FrontEnd) NewCall(i int) {
	f.t.Helper()
	f.callFDs[i] = f.replaceFD(ReqSetVringCall, i, f.callFDs[i])
}

func (f *FrontEnd) replaceFD(req Request, i, old int) int {
	f.t.Helper()
	fd := EventFD(f.t)
	f.request(req, U64(uint64(i)), fd)
	if old >= 0 {
		_ = unix.Close(old)
	}
	return fd
}

// RxRing is the guest's receive ring of queue pair p (vring 2p).
func (f *FrontEnd) RxRing(p int) *Ring { return f.rings[2*p] }

// TxRing is the guest's transmit ring of queue pair p (vring 2p+1).
func (f *FrontEnd) TxRing(p int) *Ring { return f.rings[2*p+1] }

// Kick signals vring i's kick eventfd: the guest says it added buffers.
func (f *FrontEnd) Kick(i int) {
	_, _ = unix.Write(f.kickFDs[i], U64(1))
}

// WaitCall waits up to timeout (zero: not at all) for the device to signal
// vring i's call eventfd, and returns the count it read and cleared: the
// interrupts since the last read, or 0.
func (f *FrontEnd) WaitCall(i int, timeout time.Duration) uint64 {
	fd := f.callFDs[i]
	if timeout > 0 {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, _ = unix.Poll(pfd, int(timeout.Milliseconds()))
	}
	var b [8]byte
	if n, err := unix.Read(fd, b[:]); err != nil || n != 8 {
		return 0
	}
	return le.Uint64(b[:])
}
