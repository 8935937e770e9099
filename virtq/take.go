package virtq

// TakeJob is where a Take puts the chains it popped: each one's buffer
// (the one readable descriptor, translated) and the Used entry that
// returns it (its id, one slot, length 0: the device writes nothing into
// a transmit buffer). Its user owns one and reuses it, so nothing is
// allocated per chain.
type TakeJob struct {
	Bufs [MaxBurst][]byte
	Used [MaxBurst]Used
	// More, after a Take, says whether a Pop may find something Take
	// left: the descriptor that stopped it was available (a chain Take
	// does not take, or something wrong), or the ring cannot take this
	// path at all. False when it stopped at a descriptor not yet
	// available, or at max, or at the ring's room in flight: a Pop then
	// would find nothing to pop, and a poll of an empty ring costs one
	// look at it, not two.
	More bool
}

// Taker is a ring with a one-pass transmit path for the common case of a
// chain of one readable descriptor (what Linux and DPDK guests send): it
// pops such chains straight into a TakeJob, without the burst of chains
// and segments a Pop builds and its user reads back
// (docs/ring-fast-path.md, "Transmit").
type Taker interface {
	// Take pops up to max (at most MaxBurst) chains from the next
	// available descriptor on, for as long as each is one descriptor,
	// readable, whose id is not in flight and whose buffer lies inside one
	// region of guest memory, and returns how many it popped, into
	// j.Bufs[:n] and j.Used[:n]. They are in flight as after a Pop, and
	// a Push of their Used entries returns them. The descriptor that
	// stops it is left untouched, for Pop to take (and to say what is
	// wrong with it): a Pop right after a Take continues where it stopped
	// (j.More says whether it can find anything). It takes none when the
	// ring cannot take this path at all (broken, IN_ORDER). It fails
	// nothing: what is wrong is Pop's to find.
	Take(j *TakeJob, max int) int
}
