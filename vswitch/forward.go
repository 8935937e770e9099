package vswitch

import (
	"sync/atomic"

	"github.com/xvswitch/xvswitch/virtionet"
)

// groupBit is the multicast/broadcast bit of a MAC key (first octet's LSB).
const groupBit = 1 << 40

// ethHeaderLen is what a frame needs to be switched: two MACs and a type.
const ethHeaderLen = 14

// forwarder is a worker's per-burst state: the burst it receives into and
// one destination mask per port. It is owned by one worker; nothing in it
// is shared, so forwarding a burst takes no lock except each output
// queue's, once per burst, and not even that while it is the only worker
// with queues to poll (egress.go).
type forwarder struct {
	id      int
	fdb     *FDB
	fb      Burst
	scratch [ethHeaderLen + vlanTagLen]byte
	masks   []Mask // per port index: the frames of this burst going there
	// rc and tc are the ingress and egress tallies; they live here, not on
	// the stack, because passing a stack variable to an interface method
	// makes it escape.
	rc, tc Counts
	// held is the output queue whose lock the worker holds, if any.
	held *egress
	// What a fault in the middle of a burst needs to count it
	// (accountFault): the frames received (0 outside a burst), whether
	// they were all classified and the egress loop began, and the copies
	// that loop has not yet transmitted or counted.
	inFlight  int
	egressing bool
	owed      int
	// taps is the switch's table of running captures (capture.go), nil
	// while none runs.
	taps *atomic.Pointer[tapTable]
	// tv is the burst's VLANs and retagged views (vlantag.go), used only
	// while some port has VLAN settings.
	tv tagViews
	// touched keeps touchFrames' loads from being optimised away.
	touched byte
}

// forward moves one burst from in to its destinations and returns how many
// frames it received. Each frame is forwarded or counted as a drop: at
// ingress (malformed, spoofed source, hairpin, no destination) on in's
// counters, at egress by the output queue.
func (w *forwarder) forward(snap *snapshot, in *ingress) (int, error) {
	rc := &w.rc
	w.fb.fr = nil // the burst's own table, unless the queue lends its own
	n, err := in.q.Receive(&w.fb, rc)
	if n == 0 {
		rc.flushIngress(in.stats)
		return 0, err
	}
	w.inFlight, w.egressing = n, false
	src := in.port
	ports := snap.ports
	if len(w.masks) < len(ports) {
		w.masks = make([]Mask, len(ports)) // only when the port table grew
	}
	masks := w.masks[:len(ports)]
	clear(masks)
	var flood Mask
	peer := int(src.peer.Load()) - 1
	ownMAC, srcCheck := src.mac, src.srcCheck
	lastSrc, lastDst, last := noMAC, noMAC, destFlood
	vlans := snap.vlans
	if vlans {
		w.tv.reset()
	}
	// A run of frames with the header of the two frames before them
	// takes the short way (sameFlow, bridge.go) while same is true: ha
	// and hb are that header's words.
	same, ha, hb := false, uint64(0), uint64(0)
	fr := w.fb.table() // the frames are read where the ingress queue put them
	classify := n      // the frames the loop below reads and classifies
	if peer >= 0 && srcCheck == 0 {
		masks[peer] = crossConnect(fr, n, rc) // crossconnect.go
		classify = 0
	} else {
		w.touchFrames(fr, n)
	}
	for i := 0; i < classify; i++ {
		if same {
			if k, nb := sameFlow(fr, i, classify, ha, hb); k > 0 {
				rc.packets += uint64(k)
				rc.bytes += nb
				run := (Mask(1)<<k - 1) << i
				switch {
				case last >= 0:
					masks[last] |= run
				case last == destFlood:
					flood |= run
				default:
					rc.DropN(DropHairpin, k)
				}
				i += k - 1
				continue
			}
			same = false // another flow: two frames of it, and its run goes short
		}
		segs, ln := fr.Segments(i), fr.FrameLen(i)
		rc.packets++
		rc.bytes += uint64(ln)
		bit := Mask(1) << i
		h, ok := frameHeader(segs, ln, w.scratch[:], ethHeaderLen)
		if !ok {
			rc.Drop(DropMalformed)
			continue
		}
		// Port security before anything else, cross-connects included: a
		// guest with a configured MAC sends only from it.
		sk, dk := headerKeys(h)
		if (sk^ownMAC)&srcCheck != 0 {
			rc.Drop(DropSpoofed)
			continue
		}
		if peer >= 0 {
			masks[peer] |= bit // cross-connects pass frames as they are
			continue
		}
		if vlans {
			// The frame's VLAN first (vlanforward.go); the keys carry
			// it, so the memory below is of the VLAN too.
			vk, d := w.classifyVLAN(frameAt(fr, i), i, src.vlan)
			if d != accepted {
				rc.Drop(d)
				continue
			}
			sk, dk = sk|vk, dk|vk
		}
		// A burst is mostly one flow: a frame with the previous one's
		// keys goes where it went, without the FDB (bridge.go).
		if sk != lastSrc || dk != lastDst {
			lastSrc, lastDst = sk, dk
			last = w.bridgeDest(sk, dk, src.idx, ports)
		} else if !vlans {
			// The second frame of a flow in a row: what follows of
			// it takes the short way.
			same, ha, hb = headerWords(segs)
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
	if peer >= 0 && (peer >= len(ports) || ports[peer] == nil) {
		// The partner was deleted: nothing can take these frames.
		rc.DropN(DropNoDest, masks[peer].Count())
		masks[peer] = 0
	}
	if flood != 0 && vlans {
		w.floodVLAN(rc, flood, src, ports, masks)
	} else if flood != 0 {
		copies := 0
		for p, out := range ports {
			if out == nil || p == src.idx || out.peer.Load() != 0 {
				continue // cross-connected ports are not on the bridge
			}
			masks[p] |= flood
			copies++
		}
		nf := flood.Count()
		if copies == 0 {
			rc.DropN(DropNoDest, nf)
		} else {
			rc.floodCopies += uint64(nf * (copies - 1))
		}
	}
	// Captures (capture.go) copy the burst's frames here, before any
	// transmit. While none runs, this load and branch is all they cost.
	if t := w.taps.Load(); t != nil {
		w.tap(t, src, ports, masks, n)
	}
	w.owed = 0
	for _, m := range masks {
		w.owed += m.Count()
	}
	w.egressing = true
	for p, m := range masks {
		if m == 0 {
			continue
		}
		out := ports[p]
		if len(out.out) == 0 {
			rc.DropN(DropPortDown, m.Count())
			w.owed -= m.Count()
			continue
		}
		var retagged Mask
		if vlans {
			retagged = w.tv.retag(&w.fb, m, out.vlan)
		}
		w.transmit(snap, out, m) // egress.go
		if retagged != 0 {
			w.tv.swap(&w.fb, retagged) // the frames' own views again
		}
	}
	rerr := in.q.Release(&w.fb)
	w.inFlight = 0
	rc.flushIngress(in.stats)
	if err == nil {
		err = rerr
	}
	return n, err
}

// touchFrames loads the first byte of each of the burst's n frames, in a
// loop that does nothing else, before the classification reads their
// headers. Another CPU wrote the frames last (the guest, or the kernel
// filling a UMEM frame), so the first read of each is a cache miss, and
// the classification does a frame's worth of work between two of them:
// the CPU then overlaps only the few misses its reorder window reaches.
// Here it has the whole burst's in flight at once (Go has no prefetch
// instruction); BENCHMARKS.md has what it measured. It runs once the burst
// is in flight (inFlight set), so a memory fault here is accounted for as
// one in the classification would be.
func (w *forwarder) touchFrames(fr *virtionet.Frames, n int) {
	var t byte
	for i := range n {
		if s := fr.Segments(i); len(s) > 0 && len(s[0]) > 0 {
			t ^= s[0][0]
		}
	}
	w.touched = t
}
