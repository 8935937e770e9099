package vhost_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
)

// TestRxBackoffReachesQueues: Config.RxBackoff is the back-off of the
// device's receive queues: after a burst that found the guest without
// buffers, a burst right after it leaves the buffers the guest posted
// since untouched and counts its frames as no_rx_buffers; without it, the
// second burst is delivered.
func TestRxBackoffReachesQueues(t *testing.T) {
	for _, span := range []time.Duration{0, time.Hour} {
		for _, packed := range []bool{true, false} {
			t.Run(fmt.Sprintf("backoff=%v/packed=%v", span, packed), func(t *testing.T) {
				s := startSession(t, vhost.Config{RxBackoff: span}, packed, vhosttest.DefaultFeatures)
				in := [][]byte{frame(60, 1), frame(200, 2)}
				if n := s.deviceDeliver(t, in...); n != 0 {
					t.Fatalf("a guest without buffers took %d frames", n)
				}
				s.f.PostRx(0, 4)
				n := s.deviceDeliver(t, in...)
				want, drops := len(in), uint64(len(in))
				if span > 0 {
					want, drops = 0, uint64(2*len(in))
				}
				if n != want {
					t.Fatalf("second burst: delivered %d, want %d", n, want)
				}
				if got := len(s.f.Receive(0)); got != want {
					t.Fatalf("guest received %d frames, want %d", got, want)
				}
				if st := s.d.RxQueue(0).Stats(); st.Drops[virtionet.DropNoRxBuffers] != drops {
					t.Fatalf("no_rx_buffers %d, want %d", st.Drops[virtionet.DropNoRxBuffers], drops)
				}
			})
		}
	}
}
