package vswitch

// addrTable maps the UMEM addresses of lent guest buffers' frames to
// their chain IDs (vmzerocopy.go), and those of frames a VM transmits
// without a copy to theirs (vmzctx.go): a fixed open-addressing table, linear
// probing with backward-shift deletion, so that a lend and a completion
// cost a few probes and never allocate. It holds at most maxLent (or
// ownerTXRing) entries in at least four times as many slots. Address 0 marks a free slot (a frame address is
// never 0: it lies behind the switch area).
type addrTable struct {
	keys [addrSlots]uint64
	ids  [addrSlots]uint16
}

// addrSlots is a power of two, at least 4*maxLent.
const addrSlots = 4096

// A compile-time check that maxLent entries keep the table at most a
// quarter full.
var _ [addrSlots - 4*maxLent]struct{}

func addrHash(a uint64) int {
	// Frame addresses differ in their upper bits mostly (buffers are
	// 2 KiB or more apart): mix them down.
	a ^= a >> 29
	a *= 0xbf58476d1ce4e5b9
	a ^= a >> 32
	return int(a & (addrSlots - 1))
}

// put records addr -> id; an addr already there is overwritten.
func (t *addrTable) put(addr uint64, id uint16) {
	i := addrHash(addr)
	for t.keys[i] != 0 && t.keys[i] != addr {
		i = (i + 1) & (addrSlots - 1)
	}
	t.keys[i], t.ids[i] = addr, id
}

// take removes addr and returns its id.
func (t *addrTable) take(addr uint64) (uint16, bool) {
	if addr == 0 {
		return 0, false
	}
	i := addrHash(addr)
	for t.keys[i] != addr {
		if t.keys[i] == 0 {
			return 0, false
		}
		i = (i + 1) & (addrSlots - 1)
	}
	id := t.ids[i]
	// Backward shift: move later entries of the probe run into the hole
	// when their home slot allows it.
	hole := i
	for j := (i + 1) & (addrSlots - 1); t.keys[j] != 0; j = (j + 1) & (addrSlots - 1) {
		home := addrHash(t.keys[j])
		// j's entry may move to hole if home is not cyclically in (hole, j].
		if (j > hole && (home <= hole || home > j)) || (j < hole && home <= hole && home > j) {
			t.keys[hole], t.ids[hole] = t.keys[j], t.ids[j]
			hole = j
		}
	}
	t.keys[hole] = 0
	return id, true
}

// has reports whether addr is in the table.
func (t *addrTable) has(addr uint64) bool {
	if addr == 0 {
		return false
	}
	for i := addrHash(addr); t.keys[i] != 0; i = (i + 1) & (addrSlots - 1) {
		if t.keys[i] == addr {
			return true
		}
	}
	return false
}
