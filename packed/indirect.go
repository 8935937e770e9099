package packed

import (
	"encoding/binary"
	"fmt"

	"github.com/xvswitch/xvswitch/virtq"
)

// addIndirect adds the buffers of an indirect table to chain c.
func (r *Ring) addIndirect(b *virtq.Burst, c *virtq.Chain, addr uint64, ln uint32) error {
	if !r.indirect {
		return fmt.Errorf("%w: INDIRECT_DESC was not negotiated", virtq.ErrBadIndirect)
	}
	if ln == 0 || ln%descSize != 0 {
		return fmt.Errorf("%w: %w: table of %d bytes is not a nonzero multiple of %d", virtq.ErrBadIndirect, virtq.ErrBadLength, ln, descSize)
	}
	if uint64(ln) > r.maxLen {
		return fmt.Errorf("%w: %w: table of %d bytes is larger than guest memory", virtq.ErrBadIndirect, virtq.ErrBadLength, ln)
	}
	n := int(ln / descSize)
	if n > virtq.MaxChainDescs {
		return fmt.Errorf("%w: indirect table of %d descriptors (max %d)", virtq.ErrChainTooLong, n, virtq.MaxChainDescs)
	}
	if addr+uint64(ln) < addr {
		return fmt.Errorf("%w: indirect table at %#x wraps the address space", virtq.ErrBadAddress, addr)
	}
	// A table normally lies in one region; one that straddles two is
	// legal, so fall back to translating it entry by entry.
	table, err := r.mem.Translate(addr, uint64(ln))
	if err != nil {
		table = nil
	}
	for j := 0; j < n; j++ {
		var e []byte
		if table != nil {
			e = table[j*descSize : j*descSize+descSize]
		} else if e, err = r.mem.Translate(addr+uint64(j*descSize), descSize); err != nil {
			return fmt.Errorf("%w: indirect table entry %d at %#x", virtq.ErrBadAddress, j, addr+uint64(j*descSize))
		}
		// Only WRITE is valid in a table entry; NEXT and the id are
		// ignored, as the spec says. INDIRECT would be a nested table.
		flags := binary.LittleEndian.Uint16(e[offIDFlags+2:])
		if flags&flagIndirect != 0 {
			return fmt.Errorf("%w: entry %d of the table at %#x", virtq.ErrNestedIndirect, j, addr)
		}
		err := r.addBuf(b, c, binary.LittleEndian.Uint64(e[offAddr:]), binary.LittleEndian.Uint32(e[offLen:]), flags&r.writeMask != 0)
		if err != nil {
			return err
		}
	}
	return nil
}
