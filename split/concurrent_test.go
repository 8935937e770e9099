package split_test

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestConcurrentDriver runs the driver and the device in two goroutines, as
// a guest and the switch run on two CPUs: only the avail and used index
// stores and loads order them. Every chain carries a sequence number the
// device must read and answer (times three) in the writable buffer; the
// driver checks every answer. (Notification fields are left out: the
// driver model's plain accesses to them would be data races in Go's
// model, though not on the ring.)
func TestConcurrentDriver(t *testing.T) {
	const (
		chains = 20000
		start  = 65536 - 500
	)
	m := newMem(t, 4<<20, 4<<20)
	d := drivertest.NewSplitDriverAt(m, 0, 64, start, 4)
	h := newHarness(t, m, d, featAll, 0, 1)
	r := h.r

	done := make(chan error, 1)
	go func() { // the device
		var b virtq.Burst
		var used [virtq.MaxBurst]virtq.Used
		for served := 0; served < chains; {
			n, err := r.Pop(&b, virtq.MaxBurst)
			if err != nil {
				done <- err
				return
			}
			if n == 0 {
				runtime.Gosched()
				continue
			}
			for i := 0; i < n; i++ {
				var in [8]byte
				k := 0
				for _, s := range b.Readable(i) {
					k += copy(in[k:], s)
				}
				seq := binary.LittleEndian.Uint64(in[:])
				w := b.Writable(i)[0]
				binary.LittleEndian.PutUint64(w, seq*3)
				used[n-1-i] = virtq.Used{ID: b.Chains[i].ID, Len: 8} // reversed: out of order
			}
			if err := r.Push(used[:n]); err != nil {
				done <- err
				return
			}
			served += n
		}
		done <- nil
	}()

	// The driver: one data slot per descriptor pair, reused after reaping.
	bufs := make([]uint64, 64)
	for i := range bufs {
		bufs[i] = m.Alloc(1, 16, 16)
	}
	seqOf := map[uint16]uint64{}
	slotOf := map[uint16]int{}
	var freeSlots []int
	for i := range bufs {
		freeSlots = append(freeSlots, i)
	}
	next, reaped := uint64(1), 0
	for reaped < chains {
		for next <= chains && len(freeSlots) > 0 && d.FreeDescs() >= 2 {
			s := freeSlots[len(freeSlots)-1]
			freeSlots = freeSlots[:len(freeSlots)-1]
			binary.LittleEndian.PutUint64(m.Bytes(bufs[s], 8), next)
			head, err := d.AddChain([]drivertest.SplitBuf{{Addr: bufs[s], Len: 8}, {Addr: bufs[s] + 8, Len: 8, Write: true}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			seqOf[head], slotOf[head] = next, s
			next++
			d.Publish()
		}
		u, ok, err := d.Reap()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("device: %v", err)
				}
				done <- nil
			default:
			}
			runtime.Gosched()
			continue
		}
		s := slotOf[u.ID]
		got := binary.LittleEndian.Uint64(m.Bytes(bufs[s]+8, 8))
		if u.Len != 8 || got != 3*seqOf[u.ID] {
			t.Fatalf("chain %d (seq %d): len %d, answer %d, want 8 and %d", u.ID, seqOf[u.ID], u.Len, got, 3*seqOf[u.ID])
		}
		freeSlots = append(freeSlots, s)
		reaped++
	}
	if err := <-done; err != nil {
		t.Fatalf("device: %v", err)
	}
	if r.InFlight() != 0 || r.State() != (start+chains)%65536 {
		t.Fatalf("InFlight %d, State %d", r.InFlight(), r.State())
	}
}
