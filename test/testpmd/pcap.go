package testpmd

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// ReadPcap returns up to max frames (max <= 0: all) of a classic pcap file,
// such as the one a Pcap port's TxPcap records: what testpmd sent, byte
// for byte. Both byte orders and both time resolutions are accepted.
func ReadPcap(path string, max int) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var hdr [24]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: pcap %s: header: %v", ErrHarness, path, err)
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(hdr[:4]) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("%w: pcap %s: bad magic %x", ErrHarness, path, hdr[:4])
	}
	var frames [][]byte
	for max <= 0 || len(frames) < max {
		var rec [16]byte
		if _, err := io.ReadFull(f, rec[:]); err == io.EOF {
			break
		} else if err != nil {
			return frames, fmt.Errorf("%w: pcap %s: record %d: %v", ErrHarness, path, len(frames), err)
		}
		n := bo.Uint32(rec[8:])
		if n > 1<<18 {
			return frames, fmt.Errorf("%w: pcap %s: record %d of %d bytes", ErrHarness, path, len(frames), n)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(f, b); err != nil {
			return frames, fmt.Errorf("%w: pcap %s: record %d: %v", ErrHarness, path, len(frames), err)
		}
		frames = append(frames, b)
	}
	return frames, nil
}
