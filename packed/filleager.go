package packed

import (
	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// An eager Fill (virtq.FillJob.Eager): the used descriptors published a
// line of the ring at a time, as DPDK's vhost publishes each batch of
// four (vhost_flush_enqueue_batch_packed), instead of a run's at its end.
//
// Which is faster depends on who waits. A guest that is behind (its ring
// ran dry: the switch brings frames faster than it takes them) polls for
// the next used descriptor, and each line published early is work it
// starts while the rest are copied: with the two CPUs far apart, switch
// -> VM on the packed ring went from 8.59 to 10.39 Mpps, 0.97x -> 1.12x
// of DPDK (BENCHMARKS.md, "Used descriptors published a line at a
// time"). A guest that keeps up leaves the switch as the one that waits,
// and a release store per line (a full barrier on amd64: the copies'
// stores drain before the next line's loads start) costs the switch more
// than the guest gains: VM <-> VM cross-connect fell from 6.27 to 5.32
// Mpps with every Fill eager. So virtionet asks for it only for a while
// after a Deliver that ran out of buffers (virtionet/rxfill.go).

// linesDescs is the descriptors in one 64-byte line of the ring (the
// ring's base is page-aligned in every front-end; if not, groups of four
// are still groups of four).
const linesDescs = guestmem.CacheLine / descSize

// publishEach ends an eager Fill whose first pass took k buffers (run):
// each line's copies, then its used descriptors, the first one's flags
// last with a release store. The ring's position moves with each line,
// and j.Published counts the frames published, so that a memory fault in
// a later copy leaves the lines before it published and the ring past
// them (virtq.Filler).
func (r *Ring) publishEach(j *virtq.FillJob, run *fillRun, k int) {
	size := int(r.size)
	for done := 0; done < k; {
		at, uwrap := int(r.usedIdx), r.usedWrap
		m := min(k-done, size-at, linesDescs-at%linesDescs)
		for i := done; i < done+m; i++ {
			guestmem.Copy(run.dsts[i][virtq.FillHeadLen:], j.Src[i])
		}
		bits := uint32(usedBits(uwrap)|flagWrite) << 16
		usedLap(r.desc[at*descSize:(at+m)*descSize], run.ids[done:done+m], run.dsts[done:done+m], bits, true)
		r.usedIdx, r.usedWrap = r.advance(uint16(at), uwrap, uint16(m))
		r.setAvail(r.advance(r.availIdx, r.availWrap, uint16(m)))
		r.sincePushed += uint32(m)
		guestmem.StoreRelease32(r.desc, at*descSize+offIDFlags, uint32(run.ids[done])|bits)
		done += m
		j.Published = done
	}
}
