package vhost

import (
	"encoding/binary"
	"fmt"
)

// Payload layouts (vhost-user.rst, "Payload"). All numbers are in the
// host's byte order, which is little-endian on every platform guestmem
// builds for.

var le = binary.LittleEndian

func needSize(m *message, n int) error {
	if len(m.payload) < n {
		return fmt.Errorf("%w: %v payload is %d bytes, needs %d", ErrBadMessage, m.req, len(m.payload), n)
	}
	return nil
}

func payloadU64(m *message) (uint64, error) {
	if err := needSize(m, 8); err != nil {
		return 0, err
	}
	return le.Uint64(m.payload), nil
}

// vringState is the "vring state description": index and num.
type vringState struct{ index, num uint32 }

func payloadState(m *message) (vringState, error) {
	if err := needSize(m, vringStateSize); err != nil {
		return vringState{}, err
	}
	return vringState{le.Uint32(m.payload[0:]), le.Uint32(m.payload[4:])}, nil
}

func (s vringState) bytes() []byte {
	b := make([]byte, vringStateSize)
	le.PutUint32(b[0:], s.index)
	le.PutUint32(b[4:], s.num)
	return b
}

// vringAddr is the "vring address description". Note the field order of
// the wire format: descriptor, used, available.
type vringAddr struct {
	index, flags          uint32
	desc, used, avail, lg uint64
}

func payloadAddr(m *message) (vringAddr, error) {
	if err := needSize(m, vringAddrSize); err != nil {
		return vringAddr{}, err
	}
	p := m.payload
	return vringAddr{
		index: le.Uint32(p[0:]), flags: le.Uint32(p[4:]),
		desc: le.Uint64(p[8:]), used: le.Uint64(p[16:]), avail: le.Uint64(p[24:]), lg: le.Uint64(p[32:]),
	}, nil
}

// regionDesc is one memory region of SET_MEM_TABLE or ADD/REM_MEM_REG.
type regionDesc struct {
	guestAddr, size, userAddr, mmapOffset uint64
}

func decodeRegion(p []byte) regionDesc {
	return regionDesc{le.Uint64(p[0:]), le.Uint64(p[8:]), le.Uint64(p[16:]), le.Uint64(p[24:])}
}

func (r regionDesc) String() string {
	return fmt.Sprintf("gpa %#x size %#x uva %#x offset %#x", r.guestAddr, r.size, r.userAddr, r.mmapOffset)
}

// payloadMemTable decodes SET_MEM_TABLE: u32 count, u32 padding, regions.
func payloadMemTable(m *message) ([]regionDesc, error) {
	if err := needSize(m, memTableHeaderSize); err != nil {
		return nil, err
	}
	n := le.Uint32(m.payload)
	if n == 0 || n > maxFDs {
		return nil, fmt.Errorf("%w: SET_MEM_TABLE with %d regions (1..%d)", ErrBadMemTable, n, maxFDs)
	}
	if err := needSize(m, memTableHeaderSize+int(n)*memRegionDescSize); err != nil {
		return nil, err
	}
	rs := make([]regionDesc, n)
	for i := range rs {
		rs[i] = decodeRegion(m.payload[memTableHeaderSize+i*memRegionDescSize:])
	}
	return rs, nil
}

// payloadSingleRegion decodes ADD_MEM_REG / REM_MEM_REG: u64 padding, region.
func payloadSingleRegion(m *message) (regionDesc, error) {
	if err := needSize(m, singleMemRegionMsgSize); err != nil {
		return regionDesc{}, err
	}
	return decodeRegion(m.payload[8:]), nil
}

// configSpace is the "virtio device config space" payload header.
type configSpace struct{ offset, size, flags uint32 }

func payloadConfig(m *message) (configSpace, error) {
	if err := needSize(m, configSpaceHeaderSize); err != nil {
		return configSpace{}, err
	}
	return configSpace{le.Uint32(m.payload[0:]), le.Uint32(m.payload[4:]), le.Uint32(m.payload[8:])}, nil
}
