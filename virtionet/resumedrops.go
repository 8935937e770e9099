package virtionet

// Chains a ring's start dropped. When a back-end restarts and the
// front-end served a packed transmit ring in the meantime, the new ring
// can only start after completing, unsent, the chains the guest had queued
// before the front-end's own used ones (packed.Resume, docs/reconnect.md).
// Those frames came in on the port and went nowhere, so they are counted
// like any other drop: the control path that started the ring hands their
// number over with AddResumeDrops, and the next Receive counts them in its
// burst, where the switch reads a burst's drops (LastBurstDrops) and keeps
// its port's received = forwarded + dropped.

// AddResumeDrops records n chains the ring's start completed unsent, to be
// counted as resume_dropped by the next Receive. Safe from any goroutine.
func (q *TxQueue) AddResumeDrops(n int) {
	if n > 0 {
		q.resumeDropped.Add(uint32(n))
	}
}

// countResumeDrops moves what AddResumeDrops recorded into the burst
// Receive is starting, and publishes it (Receive may return before its
// own publish).
func (q *TxQueue) countResumeDrops() {
	q.ctr.drop(DropResumeDropped, int(q.resumeDropped.Swap(0)))
	q.ctr.publish()
}
