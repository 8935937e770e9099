package drivertest

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/xvswitch/xvswitch/virtq"
)

// FillJob returns a job of n frames for a Filler, frame i of lens(i)
// bytes, each with bytes and a header of its own.
func FillJob(n int, lens func(i int) int) *virtq.FillJob {
	j := &virtq.FillJob{N: n}
	for i := 0; i < n; i++ {
		f := make([]byte, lens(i))
		for k := range f {
			f[k] = byte(i*31 + k)
		}
		j.Src[i] = f
		j.Head[i] = virtq.FillHead{Lo: uint64(i+1) * 0x0101010101010101, Hi: uint32(i) + 7}
	}
	return j
}

// CheckFillAsPops checks what a Fill of job did (placed n frames into the
// buffers ids, or failed with ferr) against pop, which pops one chain at a
// time from a twin of the ring in the state before the Fill, over guest
// memory as it was before it: every frame Fill placed must have gone into
// the chain pop gives at its place, one writable buffer of that id long
// enough for header and frame; a Fill that failed the ring must have found
// an id pop refuses (ErrBadID). rings is the memory of the ring itself:
// where a header Fill wrote lies on it (a hostile driver's buffer over its
// own descriptors), what Fill read after it differs from what pop reads,
// and the comparison stops there.
func CheckFillAsPops(t testing.TB, job *virtq.FillJob, n int, ids []uint16, ferr error, pop func() (int, *virtq.Burst, error), rings []byte) {
	t.Helper()
	lo := uintptr(unsafe.Pointer(&rings[0]))
	hi := lo + uintptr(len(rings))
	for i := 0; i < job.N; i++ {
		k, b, err := pop()
		if err != nil {
			if ferr != nil && errors.Is(err, virtq.ErrBadID) {
				return
			}
			if i < n || ferr != nil {
				t.Fatalf("chain %d: popped one by one: %v; Fill placed %d (%v)", i, err, n, ferr)
			}
			return
		}
		if k == 0 {
			if i < n || ferr != nil {
				t.Fatalf("chain %d: ring empty one by one; Fill placed %d (%v)", i, n, ferr)
			}
			return
		}
		if i >= n && ferr == nil {
			return
		}
		c, w := b.Chains[0], b.Writable(0)
		if i < n && (c.Descs != 1 || c.ReadLen != 0 || len(w) != 1 || c.WriteLen < uint32(virtq.FillHeadLen+len(job.Src[i])) || c.ID != ids[i]) {
			t.Fatalf("chain %d: Fill used id %d for a %d-byte frame; one by one: %+v", i, ids[i], len(job.Src[i]), c)
		}
		if len(w) == 1 {
			if p := uintptr(unsafe.Pointer(&w[0][0])); p < hi && p+virtq.FillHeadLen > lo {
				return // Fill's header of this buffer went onto the ring
			}
		}
	}
	if ferr != nil {
		t.Fatalf("Fill failed the ring (%v); one by one, %d chains pop", ferr, job.N)
	}
}
