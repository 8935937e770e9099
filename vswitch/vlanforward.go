package vswitch

// The forwarder's VLAN steps (vlan.go), taken only while some port has
// VLAN settings: classify each frame at ingress (forward's loop calls
// classifyVLAN for each frame it bridges), flood within a VLAN.

// classifyVLAN finds frame i's VLAN on port in, recording it and its tag
// for the egress (tagViews.retag), and returns it as the VLAN part of an
// FDB key (FDBKey(vid, 0): OR it into a MAC key); d is why the port
// refuses the frame, or accepted.
func (w *forwarder) classifyVLAN(f Frame, i int, in *portVLAN) (vk uint64, d Drop) {
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
	return FDBKey(vid, 0), d
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
