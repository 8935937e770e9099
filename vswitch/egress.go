package vswitch

import "encoding/binary"

// Which of an output port's queues a worker transmits on, and whether it
// needs the queue's lock.
//
// Each worker has its own share of a port's egress queues (spread): with
// at least as many queues as workers, the queues q with q mod workers =
// its id, else the one queue id mod queues (shared with other workers);
// for a port that does not want its frames spread (liveEgress), only
// queue id mod queues. Over its share it spreads frames per flow (flowHash: the MACs and, for
// IPv4/IPv6 TCP and UDP in the frame's first segment, addresses and
// ports), among the queues that run now (a guest that enabled one pair of
// four gets everything on that one), so one worker fills every queue pair
// of a multiqueue guest and a flow always takes one queue: its frames
// come from one ingress queue, hence one worker, and keep their order.
//
// A queue's mutex serialises workers that share it. When only one worker
// polls anything (snapshot.solo), no other can transmit anywhere, and it
// takes no lock at all; publish makes that hand-over safe (switch.go).

// liveEgress is implemented by the egress queues of a port whose peer
// wants its frames spread over them (a multiqueue guest's RX queues, each
// served by its own vCPU), which are not always able to take frames (a
// queue pair the guest has not enabled). Other ports' queues (a NIC's TX
// queues, which all lead to one wire) take a worker's frames on the first
// queue of its share: one kick per burst.
type liveEgress interface {
	running() bool
}

// spread gives each of workers workers its share of the port's egress
// queues (port.outBy).
func (p *port) spread(workers int) {
	p.outBy = make([][]*egress, workers)
	n := len(p.out)
	if n == 0 {
		return
	}
	if _, ok := p.out[0].q.(liveEgress); !ok {
		// Not spread: one queue per worker, as many as there are.
		for w := range p.outBy {
			p.outBy[w] = []*egress{p.out[w%n]}
		}
		return
	}
	for w := range p.outBy {
		if n < workers {
			p.outBy[w] = []*egress{p.out[w%n]}
			continue
		}
		for q := w; q < n; q += workers {
			p.outBy[w] = append(p.outBy[w], p.out[q])
		}
	}
}

// transmit sends frames m of the burst out of port out, on the worker's
// share of its queues, and counts them there.
func (w *forwarder) transmit(snap *snapshot, out *port, m Mask) {
	share := out.outBy[w.id]
	if len(share) == 1 {
		w.send(snap, share[0], m) // nothing to choose
		return
	}
	var live [MaxBurst]*egress
	n := 0
	for _, eg := range share {
		if n == len(live) {
			break
		}
		if l, ok := eg.q.(liveEgress); ok && !l.running() {
			continue
		}
		live[n] = eg
		n++
	}
	switch n {
	case 0:
		// Nothing of the worker's share runs: the first queue counts
		// the drops (port_down), as it would with one queue.
		w.send(snap, share[0], m)
	case 1:
		w.send(snap, live[0], m)
	default:
		var sub [MaxBurst]Mask
		for rest := m; rest != 0; rest &= rest - 1 {
			i := rest.Lowest()
			q := uint64(flowHash(w.fb.Frame(i), w.scratch[:])) * uint64(n) >> 32
			sub[q] |= 1 << i
		}
		for q, qm := range sub[:n] {
			if qm != 0 {
				w.send(snap, live[q], qm)
			}
		}
	}
}

// send transmits frames m on eg: under its lock unless the worker alone
// transmits anywhere (snapshot.solo).
func (w *forwarder) send(snap *snapshot, eg *egress, m Mask) {
	if snap.solo == w.id {
		eg.q.Transmit(&w.fb, m, &w.tc)
		w.tc.flushEgress(eg.stats)
		w.owed -= m.Count()
		return
	}
	eg.mu.Lock()
	w.held = eg // released by recoverFault if the transmit faults
	eg.q.Transmit(&w.fb, m, &w.tc)
	w.tc.flushEgress(eg.stats)
	w.owed -= m.Count()
	w.held = nil
	eg.mu.Unlock()
}

// flowHash hashes what identifies a frame's flow: its two MACs and, when
// its first segment holds them, the IPv4 or IPv6 addresses and the TCP or
// UDP ports (after at most one VLAN tag). Frames of one flow hash alike;
// it reads only bytes the segments bound.
func flowHash(f Frame, scratch []byte) uint32 {
	h, ok := f.header(scratch, ethHeaderLen)
	if !ok {
		return 0
	}
	src, dst := headerKeys(h)
	x := dst<<16 ^ src
	if len(f.segs) > 0 {
		x ^= l34Key(f.segs[0])
	}
	x *= 0x9E3779B97F4A7C15
	return uint32(x >> 32)
}

// l34Key folds a frame's IP addresses and TCP/UDP ports into a word (0
// when seg does not hold them).
func l34Key(seg []byte) uint64 {
	off := ethHeaderLen
	if len(seg) < off {
		return 0
	}
	et := binary.BigEndian.Uint16(seg[12:14])
	if et == 0x8100 && len(seg) >= off+4 {
		et = binary.BigEndian.Uint16(seg[16:18])
		off += 4
	}
	var x uint64
	var proto byte
	l4 := 0
	switch et {
	case 0x0800:
		if len(seg) < off+20 {
			return 0
		}
		ip := seg[off : off+20]
		x = uint64(binary.LittleEndian.Uint32(ip[12:16]))<<32 | uint64(binary.LittleEndian.Uint32(ip[16:20]))
		if binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 {
			return x // a fragment: only the first has ports
		}
		proto, l4 = ip[9], off+int(ip[0]&0xf)*4
	case 0x86dd:
		if len(seg) < off+40 {
			return 0
		}
		ip := seg[off : off+40]
		for i := 8; i < 40; i += 8 {
			x ^= binary.LittleEndian.Uint64(ip[i : i+8])
		}
		proto, l4 = ip[6], off+40
	default:
		return 0
	}
	if (proto == 6 || proto == 17) && len(seg) >= l4+4 {
		x += uint64(binary.LittleEndian.Uint32(seg[l4 : l4+4]))
	}
	return x
}
