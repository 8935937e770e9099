package vhost

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtq"
)

// handle executes one message with d.mu held and returns the body of its
// explicit reply (for requests that have one). Errors wrap ErrRejected or
// ErrUnknown when the session may go on, anything else when it must not.
func (d *Device) handle(s *session, m *message) ([]byte, error) {
	var reply []byte
	var err error
	switch m.req {
	case reqGetFeatures:
		reply = u64(d.offered)
	case reqSetFeatures:
		err = d.setFeatures(s, m)
	case reqGetProtocolFeatures:
		reply = u64(d.proto)
	case reqSetProtocolFeatures:
		var p uint64
		if p, err = payloadU64(m); err == nil {
			if p&^d.proto != 0 {
				err = fmt.Errorf("%w: protocol features %#x, offered %#x", ErrBadFeatures, p, d.proto)
			} else {
				s.protocol = p
			}
		}
	case reqSetOwner:
		// Marks the start of a session; nothing to do.
	case reqResetOwner:
		// Deprecated; the spec recommends disabling all rings.
		d.resetRings()
		for i := range d.queues {
			s.callLine(i).SetFD(-1)
			s.errLine(i).SetFD(-1)
		}
	case reqSetMemTable:
		err = d.setMemTable(s, m)
	case reqAddMemReg:
		err = d.addMemReg(s, m)
	case reqRemMemReg:
		err = d.remMemReg(s, m)
	case reqGetMaxMemSlots:
		reply = u64(maxMemSlots)
	case reqSetVringNum, reqSetVringAddr, reqSetVringBase:
		err = d.setVring(s, m)
	case reqGetVringBase:
		reply, err = d.getVringBase(s, m)
	case reqSetVringKick, reqSetVringCall, reqSetVringErr:
		err = d.setVringFD(s, m)
	case reqSetVringEnable:
		err = d.setVringEnable(s, m)
	case reqGetQueueNum:
		reply = u64(uint64(d.cfg.QueuePairs))
	case reqSendRARP:
		err = needSize(m, 6)
		if err == nil {
			s.event(Event{Kind: EventRARP, MAC: net.HardwareAddr(append([]byte(nil), m.payload[:6]...))})
		}
	case reqNetSetMTU:
		var v uint64
		if v, err = payloadU64(m); err == nil {
			limit := uint64(maxMTU)
			if d.cfg.MTU != 0 {
				limit = uint64(d.cfg.MTU)
			}
			if v < minMTU || v > limit {
				err = fmt.Errorf("%w: MTU %d (%d..%d)", ErrRejected, v, minMTU, limit)
			} else {
				s.mtu = int(v)
			}
		}
	case reqGetConfig:
		reply, err = d.getConfig(s, m)
	case reqSetConfig:
		err = fmt.Errorf("%w: the virtio-net config space is read-only", ErrRejected)
	case reqSetStatus:
		var v uint64
		if v, err = payloadU64(m); err == nil {
			s.status = uint8(v)
		}
	case reqGetStatus:
		reply = u64(uint64(s.status))
	default:
		err = fmt.Errorf("%w: %v", ErrUnknown, m.req)
	}
	d.updateReady(s)
	return reply, err
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	le.PutUint64(b, v)
	return b
}

func (d *Device) setFeatures(s *session, m *message) error {
	f, err := payloadU64(m)
	if err != nil {
		return err
	}
	if f&^d.offered != 0 {
		return fmt.Errorf("%w: %#x, offered %#x", ErrBadFeatures, f, d.offered)
	}
	if f == s.features {
		return nil
	}
	// Started rings were built under the old features (features 0 if
	// this is the first SET_FEATURES: a front-end may start rings before
	// it sends one). A ring's layout and saved state mean nothing to the
	// other ring kind, so RING_PACKED cannot change under them; DPDK's
	// back-end refuses any change while running in the same way.
	if (f^s.features)&(1<<virtq.FeatureRingPacked) != 0 {
		for _, q := range d.queues {
			if q.ctl.kickSet {
				return fmt.Errorf("%w: SET_FEATURES %#x changes the ring kind of started queue %d (features were %#x)",
					ErrFeaturesChanged, f, q.index, s.features)
			}
		}
	}
	s.features = f
	// Rings running under the old features (header length, EVENT_IDX,
	// IN_ORDER) are rebuilt under the new ones from their saved state.
	if _, ok := d.pauseAll(); !ok {
		return fmt.Errorf("%w: a poller did not release its rings", ErrRejected)
	}
	return d.restartAll(s)
}

// queueOf returns the queue a vring message addresses.
func (d *Device) queueOf(m *message, index uint32) (*Queue, error) {
	if int(index) >= len(d.queues) {
		return nil, fmt.Errorf("%w: %v for queue %d of %d", ErrBadQueue, m.req, index, len(d.queues))
	}
	return d.queues[index], nil
}

func (d *Device) setVring(s *session, m *message) error {
	var idx uint32
	var st vringState
	var ad vringAddr
	var err error
	if m.req == reqSetVringAddr {
		ad, err = payloadAddr(m)
		idx = ad.index
	} else {
		st, err = payloadState(m)
		idx = st.index
	}
	if err != nil {
		return err
	}
	q, err := d.queueOf(m, idx)
	if err != nil {
		return err
	}
	c := &q.ctl
	switch m.req {
	case reqSetVringNum:
		if st.num == 0 || st.num > maxQueueSize {
			return fmt.Errorf("%w: queue %d size %d (1..%d)", ErrBadMessage, idx, st.num, maxQueueSize)
		}
	case reqSetVringBase:
		// The ring kinds check the value against the ring size.
	}
	// Changing a running ring's layout: stop it, apply, restart.
	wasRunning := c.act != nil
	d.stopRing(q)
	switch m.req {
	case reqSetVringNum:
		c.num = st.num
	case reqSetVringAddr:
		c.addr, c.hasAddr = ad, true
	case reqSetVringBase:
		c.base, c.baseOwn = st.num, false
	}
	if wasRunning || c.kickSet {
		return d.tryStart(s, q)
	}
	return nil
}

func (d *Device) getVringBase(s *session, m *message) ([]byte, error) {
	st, err := payloadState(m)
	if err != nil {
		return nil, err
	}
	q, err := d.queueOf(m, st.index)
	if err != nil {
		return nil, err
	}
	c := &q.ctl
	ok := d.stopRing(q)
	// A stopped ring restarts only with a new SET_VRING_KICK.
	c.kickSet = false
	if q.curKick >= 0 {
		q.publish(nil)
	}
	if ok {
		closeFD(c.kickFD)
	}
	c.kickFD = -1
	return vringState{index: st.index, num: c.base}.bytes(), nil
}

func (d *Device) setVringFD(s *session, m *message) error {
	v, err := payloadU64(m)
	if err != nil {
		return err
	}
	q, err := d.queueOf(m, uint32(v&vringIndexMask))
	if err != nil {
		return err
	}
	fd := -1
	if v&vringNoFD == 0 {
		if fd = m.takeFD(); fd < 0 {
			return fmt.Errorf("%w: %v for queue %d without an fd", ErrBadFDs, m.req, q.index)
		}
		if err := checkEventFD(fd); err != nil {
			closeFD(fd)
			return fmt.Errorf("%w: %v for queue %d: %v", ErrBadFDs, m.req, q.index, err)
		}
	}
	c := &q.ctl
	switch m.req {
	case reqSetVringKick:
		if fd >= 0 {
			// The common case of a kick read that never blocks. The
			// front-end shares the flag and may clear it again, so
			// Queue.Drain does not rely on it (virtionet.ReadEventFD).
			if err := unix.SetNonblock(fd, true); err != nil {
				closeFD(fd)
				return fmt.Errorf("%w: kick fd: %v", ErrBadFDs, err)
			}
		}
		old := c.kickFD
		c.kickFD = fd
		c.kickSet = true
		if s.features&(1<<FeatureProtocolFeatures) == 0 {
			// Without protocol features rings start enabled.
			c.enabled = true
		}
		if d.republish(s, q) {
			closeFD(old)
		}
		return d.tryStart(s, q)
	case reqSetVringCall:
		// The Notifier takes it over; the worker's queue signals the
		// same line whatever fd is behind it, so nothing is republished.
		s.callLine(q.index).SetFD(fd)
	case reqSetVringErr:
		s.errLine(q.index).SetFD(fd)
	}
	return nil
}

func (d *Device) setVringEnable(s *session, m *message) error {
	st, err := payloadState(m)
	if err != nil {
		return err
	}
	q, err := d.queueOf(m, st.index)
	if err != nil {
		return err
	}
	if st.num == 0 {
		d.stopRing(q)
		q.ctl.enabled = false
		return nil
	}
	q.ctl.enabled = true
	return d.tryStart(s, q)
}

// setMemTable maps a new memory table, moves every running ring onto it
// and only then unmaps the old one.
func (d *Device) setMemTable(s *session, m *message) error {
	descs, err := payloadMemTable(m)
	if err != nil {
		return err
	}
	if len(m.fds) != len(descs) {
		return fmt.Errorf("%w: SET_MEM_TABLE with %d regions and %d fds", ErrBadFDs, len(descs), len(m.fds))
	}
	if d.cfg.Contiguous {
		srcs := make([]regionSource, len(descs))
		for i, rd := range descs {
			srcs[i] = regionSource{desc: rd, fd: m.takeFD()}
		}
		return d.replaceRange(s, srcs)
	}
	// The new table gets the whole MaxMemory: it replaces the old one,
	// which stays mapped only until the rings have moved over.
	maps := make([]*mapping, 0, len(descs))
	for _, rd := range descs {
		mp, err := mapRegion(m.takeFD(), rd, d.cfg.MaxMemory-mapped(maps))
		if err != nil {
			unmapAll(maps)
			return err
		}
		maps = append(maps, mp)
	}
	return d.replaceMemory(s, maps, s.maps, nil)
}

func (d *Device) addMemReg(s *session, m *message) error {
	rd, err := payloadSingleRegion(m)
	if err != nil {
		return err
	}
	if len(m.fds) != 1 {
		return fmt.Errorf("%w: ADD_MEM_REG with %d fds", ErrBadFDs, len(m.fds))
	}
	// QEMU before 8.0 sends ADD_MEM_REG and REM_MEM_REG once per queue
	// pair (each pair is a vhost device of its own there, with its own
	// copy of the table; QEMU commit "vhost-user: Skip unnecessary
	// duplicated VHOST_USER_ADD/REM_MEM_REG requests"): a region exactly
	// like one mapped, of the same file, is such a copy, acknowledged and
	// not mapped twice.
	for _, mp := range s.maps {
		if mp.sameRegion(rd, m.fds[0]) {
			closeFD(m.takeFD())
			return nil
		}
	}
	if len(s.maps) >= maxMemSlots {
		closeFD(m.takeFD())
		return fmt.Errorf("%w: all %d memory slots used", ErrBadMemTable, maxMemSlots)
	}
	if d.cfg.Contiguous {
		srcs, err := keptSources(s.maps, nil)
		if err != nil {
			closeFD(m.takeFD())
			return err
		}
		return d.replaceRange(s, append(srcs, regionSource{desc: rd, fd: m.takeFD()}))
	}
	mp, err := mapRegion(m.takeFD(), rd, d.cfg.MaxMemory-mapped(s.maps))
	if err != nil {
		return err
	}
	maps := append(append([]*mapping(nil), s.maps...), mp)
	return d.replaceMemory(s, maps, nil, nil)
}

func (d *Device) remMemReg(s *session, m *message) error {
	rd, err := payloadSingleRegion(m)
	if err != nil {
		return err
	}
	// A stray fd is allowed by the spec and closed unused (closeFDs).
	var gone *mapping
	maps := make([]*mapping, 0, len(s.maps))
	for _, mp := range s.maps {
		if gone == nil && mp.desc.guestAddr == rd.guestAddr && mp.desc.userAddr == rd.userAddr && mp.desc.size == rd.size {
			gone = mp
			continue
		}
		maps = append(maps, mp)
	}
	if gone == nil {
		// Another queue pair's copy of a removal already done (see
		// addMemReg): there is nothing left to unmap.
		return nil
	}
	if d.cfg.Contiguous {
		srcs, err := keptSources(s.maps, gone)
		if err != nil {
			return err
		}
		return d.replaceRange(s, srcs)
	}
	return d.replaceMemory(s, maps, []*mapping{gone}, nil)
}

// keptSources is the regions of maps but skip, with a duplicate of each
// fd, to map into a new range (Contiguous).
func keptSources(maps []*mapping, skip *mapping) ([]regionSource, error) {
	srcs := make([]regionSource, 0, len(maps)+1)
	for _, mp := range maps {
		if mp == skip {
			continue
		}
		fd, err := unix.FcntlInt(uintptr(mp.fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			for _, s := range srcs {
				closeFD(s.fd)
			}
			return nil, fmt.Errorf("%w: dup the fd of region %v: %v", ErrBadMemTable, mp.desc, err)
		}
		srcs = append(srcs, regionSource{desc: mp.desc, fd: fd})
	}
	return srcs, nil
}

// replaceRange maps srcs as a new contiguous table (Contiguous) and makes
// it the session's; the whole old table and its range are retired. No
// regions at all is no memory, and no range.
func (d *Device) replaceRange(s *session, srcs []regionSource) error {
	if len(srcs) == 0 {
		return d.replaceMemory(s, nil, s.maps, nil)
	}
	rng, maps, err := mapRange(srcs, d.cfg.SwitchArea, d.cfg.MaxMemory)
	if err != nil {
		return err
	}
	return d.replaceMemory(s, maps, s.maps, rng)
}

// replaceMemory makes maps (in range rng, with Contiguous) the session's
// memory table: running rings are paused, the owner is told of the new
// range (changeMemory), the rings are rebuilt over the new table from
// their saved state and republished; the mappings in retire, and the old
// range, are unmapped once no poller can reach them and the owner let go.
// On error the new mappings not already in the old table are unmapped and
// the old table stays.
func (d *Device) replaceMemory(s *session, maps, retire []*mapping, rng *memRange) error {
	var mem *guestmem.Memory
	if len(maps) > 0 {
		var err error
		if mem, err = buildMemory(maps); err != nil {
			if rng != nil {
				unmapAll(maps)
				rng.unmap()
			} else {
				unmapAll(newOnly(maps, s.maps))
			}
			return err
		}
	}
	_, ok := d.pauseAll()
	old := s.rng
	s.maps, s.mem, s.rng = maps, mem, rng
	d.changeMemory(old, rng, retire, ok)
	return d.restartAll(s)
}

// newOnly returns the mappings of maps that are not in old.
func newOnly(maps, old []*mapping) []*mapping {
	var out []*mapping
outer:
	for _, m := range maps {
		for _, o := range old {
			if m == o {
				continue outer
			}
		}
		out = append(out, m)
	}
	return out
}

// getConfig serves the virtio-net config space: mac, status,
// max_virtqueue_pairs, mtu (virtio 1.1, 5.1.4).
func (d *Device) getConfig(s *session, m *message) ([]byte, error) {
	cs, err := payloadConfig(m)
	if err != nil {
		return nil, err
	}
	var space [virtioNetConfigSize]byte
	copy(space[0:6], d.cfg.MAC)
	le.PutUint16(space[6:], netConfigStatusLinkUp)
	le.PutUint16(space[8:], uint16(d.cfg.QueuePairs))
	mtu := s.mtu
	if mtu == 0 {
		mtu = d.cfg.MTU
	}
	le.PutUint16(space[10:], uint16(mtu))
	if uint64(cs.offset)+uint64(cs.size) > virtioNetConfigSize {
		return nil, fmt.Errorf("%w: GET_CONFIG of bytes %d+%d beyond the %d-byte config space", ErrRejected, cs.offset, cs.size, virtioNetConfigSize)
	}
	out := make([]byte, configSpaceHeaderSize+int(cs.size))
	le.PutUint32(out[0:], cs.offset)
	le.PutUint32(out[4:], cs.size)
	le.PutUint32(out[8:], cs.flags)
	copy(out[configSpaceHeaderSize:], space[cs.offset:cs.offset+cs.size])
	return out, nil
}
