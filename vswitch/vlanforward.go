package vswitch

// The forwarder's VLAN steps (vlan.go), taken only while some port has
// VLAN settings: classify each frame at ingress, flood within a VLAN.

// classifyVLANs is forward's loop over the burst's frames for a switch
// with VLANs: the same steps (counting, port security, the cross-connect,
// the bridge with its memory of the previous frame) with the frame's VLAN
// found first, refused frames dropped by reason, and the FDB keys in that
// VLAN. It sets the frames' bits in masks and returns the frames to
// flood (floodVLAN floods them per VLAN).
func (w *forwarder) classifyVLANs(n int, src *port, ports []*port, masks []Mask, peer int) (flood Mask) {
	rc := &w.rc
	w.tv.reset()
	ownMAC, srcCheck := src.mac, src.srcCheck
	lastSrc, lastDst, last := noMAC, noMAC, destFlood
	for i := 0; i < n; i++ {
		f := &w.fb.f[i]
		rc.packets++
		rc.bytes += uint64(f.len)
		bit := Mask(1) << i
		h, ok := f.header(w.scratch[:], ethHeaderLen)
		if !ok {
			rc.Drop(DropMalformed)
			continue
		}
		sk := MACKey(h[6:12])
		if (sk^ownMAC)&srcCheck != 0 {
			rc.Drop(DropSpoofed)
			continue
		}
		if peer >= 0 {
			masks[peer] |= bit // cross-connects pass frames as they are
			continue
		}
		vid, d := w.classifyVLAN(f, i, src.vlan)
		if d != accepted {
			rc.Drop(d)
			continue
		}
		// The keys carry the VLAN, so the memory of the previous frame
		// is of its VLAN too.
		vk := FDBKey(vid, 0)
		if sk, dk := sk|vk, MACKey(h[0:6])|vk; sk != lastSrc || dk != lastDst {
			lastSrc, lastDst = sk, dk
			last = w.bridgeDest(sk, dk, src.idx, ports)
		}
		switch {
		case last >= 0:
			masks[last] |= bit
		case last == destFlood:
			flood |= bit
		default:
			rc.Drop(DropHairpin)
		}
	}
	return flood
}

// classifyVLAN finds frame i's VLAN on port in, recording it and its tag
// for the egress (tagViews.retag); d is why the port refuses the frame,
// or accepted.
func (w *forwarder) classifyVLAN(f *Frame, i int, in *portVLAN) (vid uint16, d Drop) {
	n := ethHeaderLen
	if f.len >= ethHeaderLen+vlanTagLen {
		n += vlanTagLen
	}
	h, _ := f.header(w.scratch[:], n) // forward checked f.len >= ethHeaderLen
	if n == ethHeaderLen && uint16(h[12])<<8|uint16(h[13]) == tpid8021Q {
		return 0, DropMalformed // a tag cut short
	}
	vid, tag, exact, d := in.classify(h)
	if d == accepted {
		w.tv.set(i, vid, tag, exact)
	}
	return vid, d
}

// floodVLAN adds the frames of flood to the masks of every other bridge
// port that carries their VLAN, and counts the copies (flood_copies: one
// frame to c ports is c-1 copies more than it came as) or, for a VLAN no
// other port carries, the frames as no_destination.
func (w *forwarder) floodVLAN(rc *Counts, flood Mask, src *port, ports []*port, masks []Mask) {
	// The burst's flooded frames grouped by VLAN: a burst holds few.
	var vids [MaxBurst]uint16
	var groups [MaxBurst]Mask
	ng := 0
	for r := flood; r != 0; r &= r - 1 {
		i := r.Lowest()
		vid := w.tv.vid[i]
		g := 0
		for g < ng && vids[g] != vid {
			g++
		}
		if g == ng {
			vids[g], groups[g] = vid, 0
			ng++
		}
		groups[g] |= Mask(1) << i
	}
	for g := 0; g < ng; g++ {
		copies := 0
		for p, out := range ports {
			if out == nil || p == src.idx || out.peer.Load() != 0 || !out.vlan.carries(vids[g]) {
				continue
			}
			masks[p] |= groups[g]
			copies++
		}
		nf := groups[g].Count()
		if copies == 0 {
			rc.DropN(DropNoDest, nf)
		} else {
			rc.floodCopies += uint64(nf * (copies - 1))
		}
	}
}
