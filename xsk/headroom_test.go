package xsk

import (
	"errors"
	"testing"

	"github.com/xvswitch/xvswitch/test/require"
	"golang.org/x/sys/unix"
)

// validate refuses exactly the headrooms the kernel refuses, so a bad
// configuration fails with xsk's message rather than a bare EINVAL.
func TestHeadroomLimit(t *testing.T) {
	for _, chunk := range []uint32{2048, 4096} {
		max := chunk - MinTailroom
		if got := MaxHeadroom(chunk); got != max {
			t.Errorf("MaxHeadroom(%d) = %d, want %d", chunk, got, max)
		}
		ok := UMEMConfig{FrameSize: chunk, Headroom: max}
		if err := ok.validate(); err != nil {
			t.Errorf("headroom %d in %d-byte chunks: %v, want accepted", max, chunk, err)
		}
		bad := UMEMConfig{FrameSize: chunk, Headroom: max + 1}
		if err := bad.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("headroom %d in %d-byte chunks: %v, want ErrConfig", max+1, chunk, err)
		}
	}
}

// The kernel's own limit is where validate puts it: register (which skips
// validate) succeeds at MaxHeadroom and gets EINVAL one byte above. If a
// kernel moves the limit, this fails and MinTailroom must follow.
func TestHeadroomLimitMatchesKernel(t *testing.T) {
	require.Root(t)
	for _, chunk := range []uint32{2048, 4096} {
		for _, h := range []uint32{MaxHeadroom(chunk), MaxHeadroom(chunk) + 1} {
			cfg := UMEMConfig{FrameSize: chunk, NumFrames: 64, Headroom: h}
			u, err := registerAnon(t, cfg)
			if want := h <= MaxHeadroom(chunk); want != (err == nil) {
				t.Errorf("kernel with headroom %d in %d-byte chunks: %v (xsk's limit %d)", h, chunk, err, MaxHeadroom(chunk))
			}
			if u != nil {
				u.Close()
			}
		}
	}
}

// registerAnon is NewUMEM without validate: anonymous memory registered
// with cfg as it is.
func registerAnon(t *testing.T, cfg UMEMConfig) (*UMEM, error) {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, int(cfg.NumFrames*cfg.FrameSize), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	u, err := register(mem, cfg)
	if err != nil {
		_ = unix.Munmap(mem)
		return nil, err
	}
	u.ownsMem = true
	return u, nil
}
