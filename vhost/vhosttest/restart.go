package vhosttest

import (
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// RestartBackEnd plays what QEMU does when its back-end dies and another
// one connects (a server-mode chardev, or a client-mode one with
// reconnect): the guest runs on with its memory, its rings and whatever it
// has in flight on them; only the connection is new. The old connection is
// hung up without GET_VRING_BASE (the back-end is gone, there is nobody to
// ask), a new one is made as the first was (for Connect, served by dev; a
// Dial or Accept front-end ignores dev), and the new back-end gets what
// QEMU sends it: Start's negotiation again, the same memory table, and
// every ring set up again, enabled, with SET_VRING_BASE carrying base(i, r)
// (QEMUBase is QEMU's choice). It needs Start to have run.
func (f *FrontEnd) RestartBackEnd(dev *vhost.Device, base func(vring int, r *Ring) uint32) {
	f.t.Helper()
	o := f.opts
	if o == nil || f.g == nil {
		f.t.Fatal("vhosttest: RestartBackEnd before Start")
	}
	if f.c != nil {
		_ = f.c.Close()
		f.c = nil
		_ = f.waitServed()
	}
	if dev != nil {
		f.dev = dev
	}
	f.srv, f.protocol, f.last = nil, 0, 0
	f.c = f.dial()
	f.Negotiate(o.Features, o.Protocol)
	f.SetMemTable()
	for i, r := range f.rings {
		if r != nil {
			f.SetupRingAt(i, r, true, base(i, r))
		}
	}
	if o.Protocol&(1<<vhost.ProtoReplyAck) == 0 {
		f.CallU64(ReqGetFeatures) // orders the device's handling, as in Start
	}
}

// QEMUBase is the SET_VRING_BASE QEMU (7.2, and as of 10.2) sends for r
// to a back-end that replaced one which died: for a split ring the used
// index the old back-end left in guest memory
// (virtio_queue_split_restore_last_avail_idx), for a packed ring whatever
// it last sent or got, because it has nothing in guest memory to restore
// from (virtio_queue_packed_restore_last_avail_idx is empty): here the
// base r was last set up with.
func QEMUBase(vring int, r *Ring) uint32 {
	if r.s != nil {
		return uint32(r.s.UsedIdx())
	}
	return r.base
}

// QEMUDroppedTX is QEMUBase after QEMU, while no back-end ran, served a
// packed transmit ring itself with the link down and dropped what the
// guest had queued from its stale position on
// (drivertest.PackedDriver.FrontEndDrops): for such a ring, QEMU's
// position after what it dropped. It plays the guest kicking that ring
// during the outage; other rings get QEMUBase.
func QEMUDroppedTX(vring int, r *Ring) uint32 {
	if r.p == nil || vring%2 == 0 {
		return QEMUBase(vring, r)
	}
	idx, wrap, _ := r.p.FrontEndDrops(uint16(r.base&0x7fff), r.base&(1<<15) != 0)
	s := uint32(drivertest.PackedOffWrap(idx, wrap))
	return s | s<<16
}
