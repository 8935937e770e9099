package packed_test

import (
	"encoding/binary"
	"errors"

	"github.com/xvswitch/xvswitch/packed"
	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// putDesc encodes a descriptor as it sits in guest memory.
func putDesc(b []byte, d drivertest.PackedDesc) {
	binary.LittleEndian.PutUint64(b[0:], d.Addr)
	binary.LittleEndian.PutUint32(b[8:], d.Len)
	binary.LittleEndian.PutUint16(b[12:], d.ID)
	binary.LittleEndian.PutUint16(b[14:], d.Flags)
}

// resumeBase is packed.Resume's base, for tests that check only where the
// ring resumes.
func resumeBase(cfg virtq.Config) (uint32, error) {
	r, err := packed.Resume(cfg)
	return r.Base, err
}
