package vhost_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// TestControlPathMemoryFault: a front-end truncates the memfd behind its
// guest's memory and then sets rings up over it. The device's control
// goroutine touches guest memory twice on the way: building a split ring
// reads its used index, and rebinding a queue no poller rebinds (here a
// second SET_VRING_KICK; no worker polls in this test) resets the ring
// and writes its event suppression (packed) or flags (split). Each must
// break this device with the memory fault as the reason, not kill the
// process. The next front-end on the same device works.
func TestControlPathMemoryFault(t *testing.T) {
	for _, ring := range []struct {
		name   string
		packed bool
	}{{"split: building the ring", false}, {"packed: rebinding the queue", true}} {
		packed := ring.packed
		t.Run(ring.name, func(t *testing.T) {
			d, evs, mu := newDevice(t, vhost.Config{QueuePairs: 1})
			fe := vhosttest.Connect(t, d)
			o := vhosttest.Options{Packed: packed}
			features := vhosttest.DefaultFeatures
			if packed {
				features |= 1 << 34 // VIRTIO_F_RING_PACKED
			}
			fe.Negotiate(features, vhosttest.ProtocolQEMU)
			fe.ShareMemory(4<<20, 1<<20)
			rx := fe.NewRing(o.Packed, 256)
			tx := fe.NewRing(o.Packed, 256)
			fe.TruncateMemory(0)
			// Whatever the device answers from here on, it must not die.
			done := make(chan struct{})
			go func() {
				defer close(done)
				cfg := rx.Config()
				_ = fe.SendMsg(vhosttest.ReqSetVringNum, vhosttest.FlagVersion, vhosttest.VringState(0, uint32(cfg.Size)))
				_ = fe.SendMsg(vhosttest.ReqSetVringBase, vhosttest.FlagVersion, vhosttest.VringState(0, cfg.Base))
				_ = fe.SendMsg(vhosttest.ReqSetVringAddr, vhosttest.FlagVersion, vhosttest.VringAddr(0, cfg.Desc, cfg.Device, cfg.Driver))
				cfg = tx.Config()
				_ = fe.SendMsg(vhosttest.ReqSetVringNum, vhosttest.FlagVersion, vhosttest.VringState(1, uint32(cfg.Size)))
				_ = fe.SendMsg(vhosttest.ReqSetVringBase, vhosttest.FlagVersion, vhosttest.VringState(1, cfg.Base))
				_ = fe.SendMsg(vhosttest.ReqSetVringAddr, vhosttest.FlagVersion, vhosttest.VringAddr(1, cfg.Desc, cfg.Device, cfg.Driver))
				for i := 0; i < 2; i++ {
					_ = fe.SendMsg(vhosttest.ReqSetVringKick, vhosttest.FlagVersion, vhosttest.U64(uint64(i)), vhosttest.EventFD(t))
					_ = fe.SendMsg(vhosttest.ReqSetVringEnable, vhosttest.FlagVersion, vhosttest.VringState(uint32(i), 1))
				}
				// A new kick fd republishes the running ring (the packed
				// ring got this far: building it reads no guest memory).
				_ = fe.SendMsg(vhosttest.ReqSetVringKick, vhosttest.FlagVersion, vhosttest.U64(0), vhosttest.EventFD(t))
			}()
			<-done
			err := fe.WaitClosed()
			if !errors.Is(err, guestmem.ErrFault) {
				t.Fatalf("session ended with %v, want a guest memory fault", err)
			}
			vhosttest.WaitFor(t, "the broken event", func() bool { return hasEvent(mu, evs, vhost.EventBroken) })
			if le := d.Info().LastError; le == nil || !strings.Contains(le.Error(), "fault") {
				t.Errorf("device's last error: %v", le)
			}
			// A new front-end starts clean on the same device.
			fe2 := vhosttest.Connect(t, d)
			fe2.Start(o)
			deadline := time.Now().Add(vhosttest.Timeout)
			for !d.Info().Connected && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if !hasEvent(mu, evs, vhost.EventReady) {
				t.Error("the next front-end's rings never became ready")
			}
		})
	}
}
