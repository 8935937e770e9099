package virtionet

// The other side of BenchmarkRxCrossCore: a guest driver on another CPU.

import (
	"encoding/binary"
	"runtime"
	"sync/atomic"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/test/hostprobe"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// crossDriver is the minimal guest of BenchmarkRxCrossCore: it gives every
// buffer the device used straight back, as a polling DPDK guest does, and
// keeps no other state (the driver models' bookkeeping would make the
// guest the bottleneck). It bypasses the model after the buffers are
// posted, so the model's view of the ring goes stale. Like DPDK's virtio
// PMD it reads num_buffers from the header of every buffer it receives,
// so that the header's line is in its cache when the device comes round
// to the buffer again, as it is with a real guest. With readsFrames it
// also reads every line of what it received, as a guest that consumes
// the frames (a kernel copying them to a socket) does, so that its rate
// shows what the lines cost it where the device left them.
type crossDriver struct {
	seen        uint64 // the num_buffers and frame bytes read, summed so the loads stay
	readsFrames bool
	g           *guest
	active      atomic.Bool
	quit        atomic.Bool
	running     atomic.Bool
	wake        chan struct{}
	done        chan struct{}
}

func newCrossDriver(g *guest, readsFrames bool) *crossDriver {
	return &crossDriver{g: g, readsFrames: readsFrames, wake: make(chan struct{}), done: make(chan struct{})}
}

// consume reads one byte of every line of the used bytes of buffer b,
// when the driver reads its frames.
func (d *crossDriver) consume(b []byte, used uint32) {
	if !d.readsFrames {
		return
	}
	for o := 0; o < int(used) && o < len(b); o += guestmem.CacheLine {
		d.seen += uint64(b[o])
	}
}

func (d *crossDriver) resume() {
	d.active.Store(true)
	d.wake <- struct{}{}
}

// pause returns once the driver stopped touching the ring.
func (d *crossDriver) pause() {
	d.active.Store(false)
	for d.running.Load() {
		runtime.Gosched()
	}
}

func (d *crossDriver) stop() {
	d.quit.Store(true)
	close(d.wake)
	<-d.done
}

func (d *crossDriver) run() {
	defer close(d.done)
	runtime.LockOSThread()        // never unlocked: the thread ends with the goroutine
	_, _ = hostprobe.PinThread(0) // the benchmark's own pin proved it works
	var step func() bool
	if d.g.kind == kindPacked {
		step = d.packedStep()
	} else {
		step = d.splitStep()
	}
	for range d.wake {
		if d.quit.Load() {
			return
		}
		d.running.Store(true)
		for d.active.Load() {
			step()
		}
		d.running.Store(false)
	}
}

// packedStep returns one round of the packed driver: reap the used
// descriptors from the next used slot on (up to a burst) and write each
// buffer back as available at the next avail slot, the first one's flags
// last.
func (d *crossDriver) packedStep() func() bool {
	pk := d.g.pk
	desc := pk.Desc()
	size := int(pk.Size)
	addrOf := make([]uint64, size) // buffer address by id
	bufOf := make([][]byte, size)  // its bytes, the virtio-net header first
	for s := 0; s < size; s++ {
		w := binary.LittleEndian.Uint32(desc[s*16+12:])
		if w>>16&drivertest.PackedAvail != 0 {
			addrOf[uint16(w)] = binary.LittleEndian.Uint64(desc[s*16:])
			bufOf[uint16(w)] = d.g.m.Bytes(addrOf[uint16(w)], crossBufLen)
		}
	}
	nu, uw := pk.NextUsed()
	na, aw := pk.NextAvail()
	used, avail := int(nu), int(na)
	return func() bool {
		first, firstWord := -1, uint32(0)
		n := 0
		for ; n < virtq.MaxBurst; n++ {
			w := guestmem.LoadAcquire32(desc, used*16+12)
			fl := uint16(w >> 16)
			if (fl&drivertest.PackedAvail != 0) != uw || (fl&drivertest.PackedUsed != 0) != uw {
				break
			}
			id := uint16(w)
			d.seen += uint64(bufOf[id][numBuffersOff])
			d.consume(bufOf[id], binary.LittleEndian.Uint32(desc[used*16+8:]))
			if used++; used == size {
				used, uw = 0, !uw
			}
			off := avail * 16
			binary.LittleEndian.PutUint64(desc[off:], addrOf[id])
			binary.LittleEndian.PutUint32(desc[off+8:], crossBufLen)
			flags := uint32(drivertest.PackedWrite)
			if aw {
				flags |= drivertest.PackedAvail
			} else {
				flags |= drivertest.PackedUsed
			}
			word := uint32(id) | flags<<16
			if first < 0 {
				first, firstWord = off, word
			} else {
				binary.LittleEndian.PutUint32(desc[off+12:], word)
			}
			if avail++; avail == size {
				avail, aw = 0, !aw
			}
		}
		if first >= 0 {
			guestmem.StoreRelease32(desc, first+12, firstWord)
		}
		return n > 0
	}
}

// splitStep returns one round of the split driver: every head the device
// used goes back into the avail ring, its descriptor rewritten as a guest
// refilling it would, then the avail index is published once.
func (d *crossDriver) splitStep() func() bool {
	sp := d.g.sp
	mask := sp.Size - 1
	lastUsed, availIdx := uint16(0), sp.AvailIdx()
	addrOf := make([]uint64, sp.Size)
	bufOf := make([][]byte, sp.Size)
	for h := range addrOf {
		addrOf[h] = binary.LittleEndian.Uint64(sp.Desc[16*h:])
		if addrOf[h] != 0 {
			bufOf[h] = d.g.m.Bytes(addrOf[h], crossBufLen)
		}
	}
	return func() bool {
		now := sp.UsedIdx()
		if now == lastUsed {
			return false
		}
		for ; lastUsed != now; lastUsed++ {
			e := sp.Used[4+8*int(lastUsed&mask):]
			head := uint16(binary.LittleEndian.Uint32(e))
			d.seen += uint64(bufOf[head][numBuffersOff])
			d.consume(bufOf[head], binary.LittleEndian.Uint32(e[4:]))
			sp.WriteDesc(head, addrOf[head], crossBufLen, drivertest.SplitFWrite, 0)
			sp.WriteAvail(availIdx, head)
			availIdx++
		}
		sp.PublishIdx(availIdx)
		return true
	}
}
