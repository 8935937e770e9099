package afpacket

import (
	"fmt"
	"math/bits"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Config shapes a Socket.
type Config struct {
	// MaxFrame is the longest frame a slot holds whole, its VLAN tag
	// included (default 1522: a 1500-byte MTU, tagged). Longer frames
	// arrive truncated (Frame.Truncated).
	MaxFrame int
	// Slots is how many frames the ring holds (default 1024); frames
	// arriving while it is full are dropped by the kernel (Stats.Drops).
	Slots int
	// AllMulti puts the interface in all-multicast mode while the socket
	// is open (PACKET_MR_ALLMULTI: the kernel undoes it when the socket
	// closes, whatever happens to the process), so a NIC's hardware
	// filter passes the groups others than the host joined.
	AllMulti bool
}

// Socket is an AF_PACKET socket on one interface receiving its group
// frames into a mapped ring. Receive and Release belong to one goroutine;
// Stats may be called from any.
type Socket struct {
	fd      int
	ifindex int
	mem     []byte
	ring    *ring

	statsMu sync.Mutex
	stats   Stats
}

// Stats are the kernel's counts for the socket since Open.
type Stats struct {
	// Packets: group frames the filter accepted, Drops included.
	Packets uint64
	// Drops: of those, frames the kernel dropped because the ring was full.
	Drops uint64
}

// Open binds a socket to the interface's group frames. Every option is
// set before the bind: a socket made with protocol 0 receives nothing, so
// no frame reaches it unfiltered or before its ring exists.
func Open(ifindex int, cfg Config) (_ *Socket, err error) {
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 1522
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 1024
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("afpacket: socket: %w", err)
	}
	s := &Socket{fd: fd, ifindex: ifindex}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	set := func(what string, opt, v int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, opt, v); err != nil {
			return fmt.Errorf("afpacket: %s: %w", what, err)
		}
		return nil
	}
	if err := set("PACKET_VERSION", unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return nil, err
	}
	if err := set("PACKET_RESERVE", unix.PACKET_RESERVE, vlanLen); err != nil {
		return nil, err
	}
	if err := set("PACKET_IGNORE_OUTGOING", unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return nil, err
	}
	prog := unix.SockFprog{Len: uint16(len(groupFilter)), Filter: &groupFilter[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		return nil, fmt.Errorf("afpacket: SO_ATTACH_FILTER: %w", err)
	}
	slotSize, slots, block := ringShape(cfg.MaxFrame, cfg.Slots, os.Getpagesize())
	req := unix.TpacketReq{Block_size: uint32(block), Block_nr: uint32(slots * slotSize / block), Frame_size: uint32(slotSize), Frame_nr: uint32(slots)}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fmt.Errorf("afpacket: PACKET_RX_RING %+v: %w", req, err)
	}
	s.mem, err = unix.Mmap(fd, 0, slots*slotSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("afpacket: mmap ring: %w", err)
	}
	if s.ring, err = newRing(s.mem, slotSize, slots); err != nil {
		return nil, err
	}
	if cfg.AllMulti {
		mr := unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_ALLMULTI}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
			return nil, fmt.Errorf("afpacket: all-multicast: %w", err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		return nil, fmt.Errorf("afpacket: bind to ifindex %d: %w", ifindex, err)
	}
	return s, nil
}

// ringShape sizes the ring: slots of a power of two bytes that hold the
// header, the sockaddr_ll, the reserved tag room, the kernel's alignment
// padding and maxFrame; blocks of a page or one slot, whichever is more
// (a slot never straddles blocks); the slot count rounded up to fill
// whole blocks. Slot i is then at i*slotSize.
func ringShape(maxFrame, slots, page int) (slotSize, n, block int) {
	need := slotHdrLen + 16 + vlanLen + maxFrame + 16 // +16: TPACKET_ALIGN of the header, and of the network header
	slotSize = 1 << bits.Len(uint(need-1))
	block = max(page, slotSize)
	perBlock := block / slotSize
	n = (slots + perBlock - 1) / perBlock * perBlock
	return slotSize, n, block
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// FD is the socket's fd: it polls readable (EPOLLIN) while frames wait.
func (s *Socket) FD() int { return s.fd }

// Ifindex is the interface the socket is bound to.
func (s *Socket) Ifindex() int { return s.ifindex }

// Receive fills out with waiting frames and returns how many; no syscall.
// The frames are views of the ring, the socket's again at Release.
func (s *Socket) Receive(out []Frame) int { return s.ring.receive(out) }

// Release gives the frames of every Receive since the last Release back
// to the kernel.
func (s *Socket) Release() { s.ring.release() }

// Stats reads the kernel's counts (PACKET_STATISTICS, which the kernel
// zeroes at each read) and adds them to the socket's totals.
func (s *Socket) Stats() (Stats, error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st, err := unix.GetsockoptTpacketStats(s.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return s.stats, fmt.Errorf("afpacket: PACKET_STATISTICS: %w", err)
	}
	s.stats.Packets += uint64(st.Packets)
	s.stats.Drops += uint64(st.Drops)
	return s.stats, nil
}

// Close closes the socket and unmaps its ring; no Receive may be running
// or frames held.
func (s *Socket) Close() error {
	var err error
	if s.mem != nil {
		err = unix.Munmap(s.mem)
		s.mem, s.ring = nil, nil
	}
	if s.fd >= 0 {
		if cerr := unix.Close(s.fd); err == nil {
			err = cerr
		}
		s.fd = -1
	}
	return err
}
