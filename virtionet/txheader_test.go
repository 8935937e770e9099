package virtionet

import (
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtq"
)

// TestTxHeaderUnreadWithoutOffloads: from a guest that negotiated no
// offload the switch takes each frame without reading its virtio-net
// header, which the guest writes again for its next frame (shortWay). The
// headers here sit at the end of a page no one may read, each frame at the
// start of the next page: a read of one faults, and the test fails.
func TestTxHeaderUnreadWithoutOffloads(t *testing.T) {
	page := uint64(os.Getpagesize())
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			g := newGuest(t, k, 64, 0)
			q := NewTxQueue(g.ring, QueueConfig{Index: 1, Features: featV1})
			var sent [][]byte
			var locked [][]byte
			for i := 0; i < 8; i++ {
				a := g.m.Alloc(1, 2*page, page) + page - HeaderLen
				fr := bytes.Repeat([]byte{byte(i + 1)}, 60)
				copy(g.m.Bytes(a+HeaderLen, 60), fr)
				g.add([]buf{{Addr: a, Len: HeaderLen + 60}})
				sent = append(sent, fr)
				locked = append(locked, g.m.Bytes(a+HeaderLen-page, page))
			}
			for _, p := range locked {
				if err := unix.Mprotect(p, unix.PROT_NONE); err != nil {
					t.Fatal(err)
				}
			}
			defer func() {
				for _, p := range locked {
					_ = unix.Mprotect(p, unix.PROT_READ|unix.PROT_WRITE)
				}
			}()
			n, err := receiveNoFault(q)
			if err != nil || n != len(sent) {
				t.Fatalf("Receive = %d, %v; want %d frames", n, err, len(sent))
			}
			f := q.Frames()
			for i := range sent {
				if got := gather(f, i); !bytes.Equal(got, sent[i]) {
					t.Fatalf("frame %d: %x, want %x", i, got, sent[i])
				}
			}
		})
	}
}

// receiveNoFault is q.Receive with a memory fault turned into an error.
func receiveNoFault(q *TxQueue) (n int, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fault: %v", r)
		}
	}()
	return q.Receive(virtq.MaxBurst)
}
