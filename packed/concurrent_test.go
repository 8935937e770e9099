package packed_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// TestConcurrentDriver runs the driver model and the device in two
// goroutines over the same ring, as a guest and the switch do: the only
// synchronisation between them is the ring itself (acquire/release on
// descriptor flags). The driver sends numbered frames and offers receive
// buffers; the device checks every frame and writes a reply into the next
// receive buffer. Every frame and every reply must arrive, in order, intact.
// Under -race this also checks the ordering the ring relies on.
func TestConcurrentDriver(t *testing.T) {
	for _, f := range []uint64{fIndirect, fIndirect | fInOrder} {
		runConcurrent(t, f)
	}
}

func runConcurrent(t *testing.T, features uint64) {
	const (
		size    = 64
		frames  = 5000
		frameSz = 64
	)
	e := newEnv(t, size, features, 4<<20)
	e.d.SetDriverEvent(drivertest.PackedEventDisable, 0) // polling, no interrupts
	inOrder := features&fInOrder != 0
	// Buffers by id: frameSz bytes each, as a transmit chain of header+data
	// (direct, 2 descriptors) or a receive buffer (indirect when odd seq).
	bufAt := func(id uint16) uint64 { return e.bufBase + uint64(id)*2*frameSz }
	frame := func(seq uint32) []byte {
		b := make([]byte, frameSz)
		binary.LittleEndian.PutUint32(b, seq)
		for i := 4; i < frameSz; i++ {
			b[i] = byte(seq) + byte(i)
		}
		return b
	}
	done := make(chan error, 1)
	// The driver: alternates a transmit chain (frame seq) and a receive
	// buffer; reaps and checks replies.
	go func() {
		var sent, got uint32
		kind := make(map[uint16]uint32) // id -> seq (transmit) or 1<<31|seq (receive)
		var reaped []drivertest.PackedCompletion
		for got < frames {
			for sent < frames && e.d.FreeSlots() >= 3 && e.d.InFlight() < size-1 {
				id, _ := e.d.PeekID()
				a := bufAt(id)
				copy(e.m.Bytes(a, frameSz), frame(sent))
				tx := []drivertest.PackedBuf{{Addr: a, Len: 4}, {Addr: a + 4, Len: frameSz - 4}}
				if _, err := e.d.Add(tx); err != nil {
					done <- err
					return
				}
				kind[id] = sent
				id, _ = e.d.PeekID()
				rx := []drivertest.PackedBuf{{Addr: bufAt(id), Len: frameSz, Write: true}}
				var err error
				if sent%2 == 1 {
					_, err = e.d.AddIndirect(rx)
				} else {
					_, err = e.d.Add(rx)
				}
				if err != nil {
					done <- err
					return
				}
				kind[id] = 1<<31 | sent
				sent++
			}
			var err error
			reaped, err = e.d.Reap(reaped[:0])
			if err != nil {
				done <- err
				return
			}
			for _, c := range reaped {
				k := kind[c.ID]
				delete(kind, c.ID)
				if k&(1<<31) == 0 {
					continue // a transmitted frame came back
				}
				seq := k &^ (1 << 31)
				if seq != got || c.Len != frameSz {
					done <- fmt.Errorf("reply %d: got seq %d len %d", got, seq, c.Len)
					return
				}
				if want := frame(^seq); !bytes.Equal(e.m.Bytes(bufAt(c.ID), frameSz), want) {
					done <- fmt.Errorf("reply %d corrupt", seq)
					return
				}
				got++
			}
			if len(reaped) == 0 {
				runtime.Gosched()
			}
		}
		done <- nil
	}()
	// The device: pops, checks transmit frames, answers each into the
	// receive buffer that follows it.
	var seq uint32
	var used []virtq.Used
	var pendingTx []virtq.Used
	for seq < frames {
		n, err := e.r.Pop(&e.b, virtq.MaxBurst)
		if err != nil {
			t.Fatal(err)
		}
		used = used[:0]
		for i := 0; i < n; i++ {
			c := e.b.Chains[i]
			if c.WriteLen == 0 {
				if got := concat(e.b.Readable(i)); !bytes.Equal(got, frame(seq)) {
					t.Fatalf("frame %d: device read %x", seq, got)
				}
				pendingTx = append(pendingTx, virtq.Used{ID: c.ID, Descs: c.Descs})
				continue
			}
			rest := frame(^seq)
			for _, s := range e.b.Writable(i) {
				rest = rest[copy(s, rest):]
			}
			used = append(used, pendingTx...)
			pendingTx = pendingTx[:0]
			used = append(used, virtq.Used{ID: c.ID, Descs: c.Descs, Len: frameSz})
			seq++
		}
		if !inOrder {
			// Complete transmits after the receive that follows them.
			for i := 0; i+1 < len(used); i += 2 {
				used[i], used[i+1] = used[i+1], used[i]
			}
		}
		if err := e.r.Push(used); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("features %#x: driver: %v", features, err)
	}
	if e.r.InFlight() != 0 {
		t.Fatalf("%d still in flight", e.r.InFlight())
	}
}
