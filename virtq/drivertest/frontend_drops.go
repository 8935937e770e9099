package drivertest

import "encoding/binary"

// FrontEndDrops plays QEMU serving a packed transmit ring itself while no
// back-end runs, with the link down (virtio_net_handle_tx_bh,
// virtqueue_packed_drop_all in hw/virtio/virtio.c): from its position idx
// with wrap counter wrap (a stale one: QEMU cannot restore a packed ring's
// position), every chain available there gets a used descriptor of length
// 0 at its head, with the head's id and the used flags of its lap; the
// rest of a chain's slots keep the driver's flags. QEMU's used position is
// its avail position (its base's halves agree). It returns the position
// after them, which QEMU sends the next back-end, and how many chains it
// dropped. The driver model learns of them when it reaps.
func (d *PackedDriver) FrontEndDrops(idx uint16, wrap bool) (next uint16, nextWrap bool, dropped int) {
	for ; dropped < int(d.Size); dropped++ {
		avail := uint16(PackedUsed)
		if wrap {
			avail = PackedAvail
		}
		w := binary.LittleEndian.Uint32(d.desc[int(idx)*packedDescSize+12:])
		if uint16(w>>16)&(PackedAvail|PackedUsed) != avail {
			break
		}
		head, headWrap := idx, wrap
		for {
			flags := binary.LittleEndian.Uint16(d.desc[int(idx)*packedDescSize+14:])
			if idx++; idx == d.Size {
				idx, wrap = 0, !wrap
			}
			if flags&PackedNext == 0 {
				break
			}
		}
		used := uint16(0)
		if headWrap {
			used = PackedAvail | PackedUsed
		}
		binary.LittleEndian.PutUint32(d.desc[int(head)*packedDescSize+8:], 0)
		binary.LittleEndian.PutUint32(d.desc[int(head)*packedDescSize+12:], uint32(uint16(w))|uint32(used)<<16)
	}
	return idx, wrap, dropped
}
