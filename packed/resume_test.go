package packed_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// resumer is a ring driven by one device that then dies, and the driver
// model that keeps going: the test of a back-end restart at ring level.
// Every chain the driver adds gets a serial number; devices must pop the
// serials in order, each once, except that chains the dead device had in
// flight are popped again, first.
type resumer struct {
	*env
	rx     bool              // chains are writable and the device writes them (an RX ring)
	serial map[uint16]int    // id -> serial of the chain the driver made available under it
	next   int               // next serial to add
	popped int               // serials below this were popped
	held   []virtq.Used      // popped and not pushed
	lens   map[uint16]uint32 // id -> bytes the device wrote
}

func newResumer(t *testing.T, size uint16, features uint64, rx bool) *resumer {
	return &resumer{env: newEnv(t, size, features, 1<<20), rx: rx, serial: map[uint16]int{}, lens: map[uint16]uint32{}}
}

// add makes chains of the given descriptor counts available.
func (r *resumer) add(descs ...int) {
	r.t.Helper()
	for _, n := range descs {
		bufs := make([]drivertest.PackedBuf, n)
		for j := range bufs {
			bufs[j] = drivertest.PackedBuf{Addr: r.bufBase + uint64(r.next%512)*256 + uint64(j)*32, Len: 32, Write: r.rx}
		}
		id, err := r.d.Add(bufs)
		if err != nil {
			r.t.Fatalf("add chain %d (%d descriptors): %v", r.next, n, err)
		}
		r.serial[id] = r.next
		r.next++
	}
}

// pop pops up to max chains and checks they come in serial order.
func (r *resumer) pop(max int) int {
	r.t.Helper()
	n := r.env.pop(max)
	for i := 0; i < n; i++ {
		c := r.b.Chains[i]
		if s := r.serial[c.ID]; s != r.popped {
			r.t.Fatalf("popped chain %d (id %d), want %d", s, c.ID, r.popped)
		}
		r.popped++
		wl := c.WriteLen
		for _, seg := range r.b.Writable(i) {
			for k := range seg {
				seg[k] = byte(c.ID)
			}
		}
		r.held = append(r.held, virtq.Used{ID: c.ID, Descs: c.Descs, Len: wl})
	}
	return n
}

// push uses the oldest k held chains, in order.
func (r *resumer) push(k int) {
	r.t.Helper()
	if err := r.r.Push(r.held[:k]); err != nil {
		r.t.Fatalf("push: %v", err)
	}
	for _, u := range r.held[:k] {
		r.lens[u.ID] = u.Len
	}
	r.held = append(r.held[:0], r.held[k:]...)
}

// reap takes back what the devices used and checks it.
func (r *resumer) reap() int {
	r.t.Helper()
	cs, err := r.d.Reap(nil)
	if err != nil {
		r.t.Fatalf("reap: %v", err)
	}
	for _, c := range cs {
		want, ok := r.lens[c.ID]
		if !ok || c.Len != want {
			r.t.Fatalf("reaped id %d (chain %d) with length %d; pushed: %v %d", c.ID, r.serial[c.ID], c.Len, ok, want)
		}
		delete(r.lens, c.ID)
	}
	return len(cs)
}

// crash drops the device with whatever it holds and builds the next one
// from base through Resume, which must say where the driver expects the
// next used descriptor.
func (r *resumer) crash(base uint32) {
	r.t.Helper()
	if r.popped -= len(r.held); r.popped < 0 {
		r.t.Fatal("more held than popped")
	}
	r.held = r.held[:0]
	want := r.deviceUsed()
	cfg := r.cfg
	cfg.Base = base
	got, err := resumeBase(cfg)
	if err != nil || got>>16 != want || got&0xffff != want {
		r.t.Fatalf("resume from %#x: %#x, %v; the device stopped at %#x", base, got, err, want)
	}
	cfg.Base = got
	if r.r, err = packed.New(cfg); err != nil {
		r.t.Fatal(err)
	}
}

// pushTorn pushes the oldest k held chains as a device killed in the
// middle of that Push leaves them: every used descriptor written but the
// first one's flags, which keep what the driver wrote (its lap's avail
// bits); its id and length are as the device left them. It returns that
// descriptor's slot.
func (r *resumer) pushTorn(k int) uint32 {
	r.t.Helper()
	idx, wrap := r.r.State()>>16&0x7fff, r.r.State()>>31 != 0
	r.push(k)
	avail := uint16(drivertest.PackedUsed)
	if wrap {
		avail = drivertest.PackedAvail
	}
	binary.LittleEndian.PutUint16(r.d.Desc()[idx*16+14:], avail)
	return idx
}

// deviceUsed is where the current device writes its next used descriptor.
func (r *resumer) deviceUsed() uint32 { return r.r.State() >> 16 }

// drain pops and pushes everything and reaps it.
func (r *resumer) drain() {
	r.t.Helper()
	for r.pop(virtq.MaxBurst) > 0 {
		r.push(len(r.held))
	}
	r.push(len(r.held))
	r.reap()
	if r.popped != r.next || r.d.InFlight() != 0 {
		r.t.Fatalf("drained: %d of %d chains popped, %d in flight at the driver", r.popped, r.next, r.d.InFlight())
	}
}

// traffic runs laps of chains of 1 to 3 descriptors through the ring.
func (r *resumer) traffic(laps int) {
	r.t.Helper()
	longest := min(3, int(r.cfg.Size))
	for used := 0; used < laps*int(r.cfg.Size); {
		for k := 0; r.d.FreeSlots() >= longest && k < 5; k++ {
			r.add(1 + r.next%longest)
		}
		r.pop(4)
		r.push(len(r.held))
		used += r.reapSlots()
	}
}

func (r *resumer) reapSlots() int {
	before := r.d.FreeSlots()
	r.reap()
	return r.d.FreeSlots() - before
}

// TestResumeWhereTheDeviceStopped: a device dies in the states a crash
// leaves a ring in, and the next one, given the stale base QEMU sends (a
// fresh ring's), resumes exactly where the driver expects it: no chain
// skipped, none used twice, the dead device's chains in flight popped
// again first, on transmit rings (readable chains) and receive rings
// (writable ones, which the device overwrites with used descriptors
// carrying lengths), with and without IN_ORDER, after several laps.
func TestResumeWhereTheDeviceStopped(t *testing.T) {
	for _, rx := range []bool{false, true} {
		for _, f := range []uint64{0, fInOrder} {
			name := fmt.Sprintf("rx=%v/inorder=%v", rx, f != 0)
			t.Run(name+"/driver-behind", func(t *testing.T) {
				// The device used chains the driver has not reaped.
				r := newResumer(t, 16, f, rx)
				r.traffic(5)
				r.add(2, 1, 3)
				r.pop(3)
				r.push(3)
				r.crash(packed.InitialState)
				r.add(1, 1)
				r.drain()
			})
			t.Run(name+"/in-flight", func(t *testing.T) {
				// The device dies holding chains it popped (and, on RX,
				// wrote); the next one pops them again.
				r := newResumer(t, 16, f, rx)
				r.traffic(3)
				r.add(3, 1, 2, 1)
				r.pop(4)
				r.push(1)
				r.reap()
				r.crash(packed.InitialState)
				r.drain()
			})
			t.Run(name+"/ring-full", func(t *testing.T) {
				// The driver fills every free slot while nobody serves the
				// ring: the whole ring is waiting.
				r := newResumer(t, 16, f, rx)
				r.traffic(4)
				r.add(2)
				r.pop(1)
				r.push(1)
				r.reap()
				for r.d.FreeSlots() > 0 {
					r.add(1)
				}
				r.crash(packed.InitialState)
				r.drain()
			})
			t.Run(name+"/chain-being-written", func(t *testing.T) {
				// The driver has written the rest of a chain but not its
				// head when the device looks.
				r := newResumer(t, 16, f, rx)
				r.traffic(3)
				r.add(1, 2)
				r.pop(2)
				r.push(2)
				r.reap()
				r.add(1)
				undo := r.halfWrite(3)
				r.crash(packed.InitialState)
				undo()
				r.add(3)
				r.drain()
			})
			t.Run(name+"/wraps-while-waiting", func(t *testing.T) {
				// A stale base from a later lap than the ring's first, as
				// left by an earlier GET_VRING_BASE.
				r := newResumer(t, 7, f, rx)
				r.traffic(2)
				stale := r.r.State()
				r.traffic(3)
				r.add(3, 2)
				r.pop(1)
				r.crash(stale)
				r.traffic(2)
				r.drain()
			})
		}
	}
}

// halfWrite writes, after the driver's next slot, the descriptors of a
// chain of n as a driver does before it exposes the head, and returns a
// func that puts back what was there.
func (r *resumer) halfWrite(n int) func() {
	idx, wrap := r.d.NextAvail()
	desc := r.d.Desc()
	saved := append([]byte(nil), desc...)
	for k := 1; k < n; k++ {
		if idx++; idx == r.cfg.Size {
			idx, wrap = 0, !wrap
		}
		flags := uint16(drivertest.PackedUsed)
		if wrap {
			flags = drivertest.PackedAvail
		}
		if k < n-1 {
			flags |= drivertest.PackedNext
		}
		binary.LittleEndian.PutUint16(desc[int(idx)*16+14:], flags)
	}
	return func() { copy(desc, saved) }
}

// TestResumeKeepsAnExactBase: a base that agrees with the descriptors is
// kept as is, avail half included (a front-end's GET_VRING_BASE of a ring
// stopped with chains in flight), and a fresh ring resumes at its start.
func TestResumeKeepsAnExactBase(t *testing.T) {
	r := newResumer(t, 16, 0, false)
	cfg := r.cfg
	for _, base := range []uint32{packed.InitialState, 0} {
		cfg.Base = base
		if got, err := resumeBase(cfg); err != nil || got != packed.InitialState {
			t.Fatalf("fresh ring, base %#x: %#x, %v", base, got, err)
		}
	}
	r.traffic(3)
	r.add(1, 2, 1)
	r.pop(2)
	cfg.Base = r.r.State()
	if got, err := resumeBase(cfg); err != nil || got != cfg.Base {
		t.Fatalf("base %#x with chains in flight came back as %#x, %v", cfg.Base, got, err)
	}
	// An index beyond the ring is New's to refuse.
	cfg.Base = 16 | 1<<15 | 3<<16
	if got, err := resumeBase(cfg); err != nil || got != cfg.Base {
		t.Fatalf("bad base %#x came back as %#x, %v", cfg.Base, got, err)
	}
}

// TestResumeCannotTell: rings the rules of resume.go do not describe make
// Resume say so and keep the front-end's base.
func TestResumeCannotTell(t *testing.T) {
	cases := []struct {
		name     string
		features uint64
		prep     func(r *resumer)
		flags    func(desc []byte)
	}{
		{"skipped-slots-unmarked", 0, func(r *resumer) {
			// A previous device that left the rest of its chains as the
			// driver wrote them: available-looking slots among used ones.
			r.add(3, 1, 1)
			r.pop(3)
			r.push(3)
			r.reap()
		}, func(desc []byte) {
			for _, s := range []int{1, 2} {
				binary.LittleEndian.PutUint16(desc[s*16+14:], drivertest.PackedAvail|drivertest.PackedNext)
			}
		}},
		{"torn-publish-in-order", fInOrder, func(r *resumer) {
			// A device that died between a batch's later used
			// descriptors and its first, under IN_ORDER: the first
			// carries the run's last id, which the slot does not hold.
			r.add(1, 1, 1, 1)
			r.pop(4)
			r.push(4)
		}, func(desc []byte) {
			binary.LittleEndian.PutUint16(desc[0*16+14:], drivertest.PackedAvail)
		}},
		{"torn-publish-first-chain-of-two", 0, func(r *resumer) {
			// The batch's first chain took two slots: the second's NEXT
			// flag is gone (Push marked it used), so where its chain
			// ends is not known.
			r.add(2, 1, 1)
			r.pop(3)
			r.push(3)
		}, func(desc []byte) {
			binary.LittleEndian.PutUint16(desc[0*16+14:], drivertest.PackedAvail|drivertest.PackedNext)
		}},
		{"used-ahead-of-the-driver", 0, func(r *resumer) {
			r.add(1, 1)
		}, func(desc []byte) {
			binary.LittleEndian.PutUint16(desc[9*16+14:], 0) // used in the previous lap: fine
			binary.LittleEndian.PutUint16(desc[5*16+14:], drivertest.PackedAvail|drivertest.PackedUsed)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newResumer(t, 16, tc.features, false)
			tc.prep(r)
			tc.flags(r.d.Desc())
			cfg := r.cfg
			cfg.Base = 5 | 5<<16
			got, err := resumeBase(cfg)
			if !errors.Is(err, packed.ErrPositionUnknown) || got != cfg.Base {
				t.Fatalf("Resume = %#x, %v; want the base back and ErrPositionUnknown", got, err)
			}
		})
	}
}

// TestResumeCompletesTornBatch: a device killed in the middle of a Push,
// after the batch's later used descriptors and before its first one's
// flags (written last, to release the batch). The next device completes
// the first descriptor as the dead one would have and goes on after the
// batch: the driver reaps the whole batch with the lengths pushed, then
// the ring carries on. CI's restart test once left a guest's transmit
// ring stopped for good this way (the base then came from QEMU, stale).
func TestResumeCompletesTornBatch(t *testing.T) {
	for _, rx := range []bool{false, true} {
		for _, laps := range []int{0, 3} {
			t.Run(fmt.Sprintf("rx=%v/laps=%d", rx, laps), func(t *testing.T) {
				r := newResumer(t, 16, 0, rx)
				r.traffic(laps)
				r.add(1, 1, 1, 1, 1)
				r.pop(5)
				r.pushTorn(4)
				r.crash(packed.InitialState)
				if n := r.reap(); n != 4 {
					t.Fatalf("reaped %d chains of the torn batch, want 4", n)
				}
				r.traffic(2)
				r.drain()
			})
		}
	}
}

// FuzzResume: whatever the descriptors hold, on a transmit ring or a
// receive ring, Resume returns a base New takes (or the one it was given),
// never touches memory beyond the ring, and writes nothing to a ring it
// cannot tell.
func FuzzResume(f *testing.F) {
	f.Add(uint16(16), uint32(packed.InitialState), false, bytes.Repeat([]byte{0x80, 0, 0x80, 0x80}, 8))
	f.Add(uint16(3), uint32(0), true, []byte{0, 0x80, 1, 0x81, 0x7f})
	f.Add(uint16(1), uint32(0x8000), false, []byte{0x80})
	f.Add(uint16(8), uint32(0x50005), true, []byte{0, 0x80, 0, 0x80, 0, 0x80, 0, 0x80, 0, 0x80, 0, 0xc0, 0, 0xc0, 0, 0x80})
	f.Fuzz(func(t *testing.T, size uint16, base uint32, readOnly bool, flags []byte) {
		size = 1 + size%64
		e := newEnv(t, size, 0, 4096)
		desc := e.d.Desc()
		for i := 0; i < int(size) && 2*i+1 < len(flags); i++ {
			desc[i*16+14], desc[i*16+15] = flags[2*i], flags[2*i+1]
		}
		cfg := e.cfg
		cfg.ReadOnly = readOnly
		// Indexes up to size: one past the end must come back as is.
		a, u := base&0x7fff%(uint32(size)+1), base>>16&0x7fff%(uint32(size)+1)
		cfg.Base = a | u<<16 | base&(1<<15|1<<31)
		before := append([]byte(nil), desc...)
		res, err := packed.Resume(cfg)
		if err != nil {
			if res.Base != cfg.Base || !bytes.Equal(before, desc) {
				t.Fatalf("Resume = %+v, %v: could not tell, and changed the base or the ring", res, err)
			}
			return
		}
		if got := res.Base; got != cfg.Base {
			if got&0xffff != got>>16 || got&0x7fff >= uint32(size) {
				t.Fatalf("Resume = %#x on a ring of %d", got, size)
			}
		}
		cfg.Base = res.Base
		if _, err := packed.New(cfg); err != nil && a < uint32(size) && u < uint32(size) {
			t.Fatalf("New refused Resume's %#x: %v", res.Base, err)
		}
	})
}

// TestResumeDriverMidChain: whatever the ring size, the lap, and the
// length of the chain the driver is writing while the device looks,
// Resume finds the device's position or says it cannot; it never names
// another.
func TestResumeDriverMidChain(t *testing.T) {
	for size := uint16(2); size <= 24; size++ {
		for laps := 1; laps <= 3; laps++ {
			r := newResumer(t, size, 0, false)
			r.traffic(laps)
			r.add(1)
			r.pop(1)
			r.push(1)
			r.reap()
			want := r.deviceUsed()
			for k := 2; k <= r.d.FreeSlots(); k++ {
				undo := r.halfWrite(k)
				cfg := r.cfg
				cfg.Base = packed.InitialState
				got, err := resumeBase(cfg)
				undo()
				switch {
				case errors.Is(err, packed.ErrPositionUnknown):
				case err != nil || got>>16 != want && got != cfg.Base || got == cfg.Base && cfg.Base>>16 != want:
					t.Fatalf("size %d, %d laps, chain of %d half written: Resume = %#x, %v; the device is at %#x", size, laps, k, got, err, want)
				}
			}
		}
	}
}

// TestResumeTornBatchDriverMidChain: a torn batch of every length a ring
// of 3 to 24 allows, with the driver writing a chain of every length the
// free slots allow while the device looks: Resume finds the device's
// position after the batch and completes the batch (the driver reaps it
// whole), or says it cannot tell and leaves the ring as it was; it never
// names another position.
func TestResumeTornBatchDriverMidChain(t *testing.T) {
	completed, unknown := 0, 0
	defer func() { t.Logf("%d torn batches completed, %d cannot tell", completed, unknown) }()
	for size := uint16(3); size <= 24; size++ {
		for laps := 0; laps <= 2; laps++ {
			for batch := 2; batch < int(size); batch++ {
				for k := 0; ; k++ {
					r := newResumer(t, size, 0, false)
					r.traffic(laps)
					if batch > r.d.FreeSlots() {
						break
					}
					for i := 0; i < batch; i++ {
						r.add(1)
					}
					r.pop(batch)
					idx := r.pushTorn(batch)
					want := r.deviceUsed()
					if k >= 2 && k > r.d.FreeSlots() {
						break
					}
					undo := func() {}
					if k >= 2 {
						undo = r.halfWrite(k)
					}
					before := append([]byte(nil), r.d.Desc()...)
					cfg := r.cfg
					cfg.Base = packed.InitialState
					got, err := resumeBase(cfg)
					name := fmt.Sprintf("size %d, %d laps, batch of %d torn, chain of %d half written", size, laps, batch, k)
					switch {
					case errors.Is(err, packed.ErrPositionUnknown):
						if !bytes.Equal(before, r.d.Desc()) {
							t.Fatalf("%s: Resume could not tell, and wrote the ring", name)
						}
						if k == 0 {
							// Without a chain half written the batch
							// is always found.
							t.Fatalf("%s: %v", name, err)
						}
						unknown++
						undo()
						continue
					case err != nil || got>>16 != want || got&0xffff != want:
						t.Fatalf("%s: Resume = %#x, %v; the device is at %#x", name, got, err, want)
					}
					// Take the half-written chain back, keeping what
					// Resume wrote to the torn slot.
					slot := append([]byte(nil), r.d.Desc()[idx*16:idx*16+16]...)
					undo()
					copy(r.d.Desc()[idx*16:], slot)
					if n := r.reap(); n != batch {
						t.Fatalf("%s: reaped %d of the torn batch", name, n)
					}
					completed++
					if k < 2 {
						continue
					}
				}
			}
		}
	}
}
