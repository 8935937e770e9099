package vswitch

import "math/bits"

// groupBit is the multicast/broadcast bit of a MAC key (first octet's LSB).
const groupBit = 1 << 40

// ethHeaderLen is what a frame needs to be switched: two MACs and a type.
const ethHeaderLen = 14

// forwarder is a worker's per-burst state: the burst it receives into and
// one destination mask per port. It is owned by one worker; nothing in it
// is shared, so forwarding a burst takes no lock except each output
// queue's, once per burst.
type forwarder struct {
	id      int
	fdb     *FDB
	fb      frameBurst
	scratch [ethHeaderLen]byte
	masks   []frameMask // per port index: the frames of this burst going there
	// rc and tc are the ingress and egress tallies; they live here, not on
	// the stack, because passing a stack variable to an interface method
	// makes it escape.
	rc, tc burstCounts
	// held is the output queue whose lock the worker holds, if any.
	held *txBinding
}

// forward moves one burst from rb to its destinations and returns how many
// frames it received. Each frame is forwarded or counted as a drop: at
// ingress (malformed, hairpin, no destination) on rb's counters, at egress
// by the output queue.
func (w *forwarder) forward(snap *snapshot, rb *rxBinding) (int, error) {
	rc := &w.rc
	n, err := rb.q.receive(&w.fb, rc)
	if n == 0 {
		rc.flushRx(rb.stats)
		return 0, err
	}
	in := rb.port
	ports := snap.ports
	if len(w.masks) < len(ports) {
		w.masks = make([]frameMask, len(ports)) // only when the port table grew
	}
	masks := w.masks[:len(ports)]
	clear(masks)
	var flood frameMask
	peer := int(in.peer.Load()) - 1
	for i := 0; i < n; i++ {
		f := &w.fb.f[i]
		rc.packets++
		rc.bytes += uint64(f.len)
		bit := frameMask(1) << i
		h, ok := f.header(w.scratch[:], ethHeaderLen)
		if !ok {
			rc.drop(DropMalformed)
			continue
		}
		if peer >= 0 {
			masks[peer] |= bit
			continue
		}
		w.fdb.Learn(MACKey(h[6:12]), in.idx)
		if dst := MACKey(h[0:6]); dst&groupBit == 0 {
			if p := w.fdb.Lookup(dst); p >= 0 && p < len(ports) && ports[p] != nil {
				if p == in.idx {
					rc.drop(DropHairpin)
				} else {
					masks[p] |= bit
				}
				continue
			}
		}
		flood |= bit
	}
	if peer >= 0 && (peer >= len(ports) || ports[peer] == nil) {
		// The partner was deleted: nothing can take these frames.
		rc.dropN(DropNoDest, bits.OnesCount32(uint32(masks[peer])))
		masks[peer] = 0
	}
	if flood != 0 {
		copies := 0
		for p, out := range ports {
			if out == nil || p == in.idx || out.peer.Load() != 0 {
				continue // cross-connected ports are not on the bridge
			}
			masks[p] |= flood
			copies++
		}
		nf := bits.OnesCount32(uint32(flood))
		if copies == 0 {
			rc.dropN(DropNoDest, nf)
		} else {
			rc.floodCopies += uint64(nf * (copies - 1))
		}
	}
	for p, m := range masks {
		if m == 0 {
			continue
		}
		out := ports[p]
		if len(out.tx) == 0 {
			rc.dropN(DropPortDown, bits.OnesCount32(uint32(m)))
			continue
		}
		tb := out.tx[w.id%len(out.tx)]
		tb.mu.Lock()
		w.held = tb // released by recoverFault if the transmit faults
		tb.q.transmit(&w.fb, m, &w.tc)
		w.tc.flushTx(tb.stats)
		w.held = nil
		tb.mu.Unlock()
	}
	rerr := rb.q.release(&w.fb)
	rc.flushRx(rb.stats)
	if err == nil {
		err = rerr
	}
	return n, err
}
