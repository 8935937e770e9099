package vswitch

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"strconv"
)

// This file is a benchmark-only port kind, the frame generator behind
// `xvswitch run --gen NAME,size=N,dst=MAC`: the bench harness
// (cmd/xvs-bench) uses it to measure "switch -> VM" and as the traffic
// source on the wire side of "NIC -> VM". It is not for production: it
// sends as fast as a worker polls it, forever, and its worker never sleeps.
//
// Its receive queue hands the worker a full burst of one prebuilt frame on
// every poll (all 32 frames point at the same bytes: destinations only
// read them, so nothing is copied until a destination port transmits).
// Its transmit queue is a sink: whatever the switch sends to the port is
// counted as transmitted and discarded.

// GenSpec is a frame generator port: `NAME,size=N,dst=MAC[,src=MAC]`.
type GenSpec struct {
	Name string `json:"name"`
	Size int    `json:"size"` // frame length, Ethernet header to end of payload (no FCS)
	Dst  string `json:"dst"`
	Src  string `json:"src,omitempty"` // default 02:00:00:00:00:fe
}

// genMinFrame is an Ethernet + IPv4 + UDP header; genMaxFrame is the
// largest frame a vhost or jumbo-frame NIC port takes.
const (
	genMinFrame = 14 + 20 + 8
	genMaxFrame = 9018
)

// genDefaultSrc is the source MAC of generated frames unless src= says.
const genDefaultSrc = "02:00:00:00:00:fe"

// ParseGen parses a --gen value.
func ParseGen(s string) (GenSpec, error) {
	head, opts, err := splitSpec(s)
	if err != nil {
		return GenSpec{}, err
	}
	g := GenSpec{Name: head, Size: 64, Src: genDefaultSrc}
	for k, v := range opts {
		switch k {
		case "size":
			n, err := strconv.Atoi(v)
			if err != nil || n < genMinFrame || n > genMaxFrame {
				return GenSpec{}, fmt.Errorf("%w: --gen %q: size=%q: want %d..%d", ErrBadSpec, s, v, genMinFrame, genMaxFrame)
			}
			g.Size = n
		case "dst", "src":
			hw, err := net.ParseMAC(v)
			if err != nil || len(hw) != 6 {
				return GenSpec{}, fmt.Errorf("%w: --gen %q: %s=%q: want an Ethernet address", ErrBadSpec, s, k, v)
			}
			if k == "dst" {
				g.Dst = hw.String()
			} else {
				g.Src = hw.String()
			}
		default:
			return GenSpec{}, fmt.Errorf("%w: --gen %q: unknown option %q", ErrBadSpec, s, k)
		}
	}
	if g.Dst == "" {
		return GenSpec{}, fmt.Errorf("%w: --gen %q: dst=MAC is required", ErrBadSpec, s)
	}
	return g, nil
}

// genFrame builds the generated frame: the same IPv4/UDP frame DPDK
// testpmd's txonly mode sends (198.18.0.1 -> 198.18.0.2, port 9 -> 9,
// zero payload), so a receiver cannot tell the two sources apart.
func genFrame(dst, src net.HardwareAddr, size int) []byte {
	f := make([]byte, size)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8] = 64 // TTL
	ip[9] = 17 // UDP
	copy(ip[12:16], []byte{198, 18, 0, 1})
	copy(ip[16:20], []byte{198, 18, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], 9)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], uint16(size-34))
	return f
}

// genPort is a generator port: one receive queue that always has a burst,
// one transmit queue that swallows everything.
type genPort struct {
	spec GenSpec
	q    *genQueue
}

// genQueue is both sides of the generator's single queue.
type genQueue struct {
	frame []byte
}

// AddGen adds a frame generator port (benchmarks only, see GenSpec).
func (s *Switch) AddGen(spec GenSpec) error {
	dst, err := net.ParseMAC(spec.Dst)
	if err != nil {
		return fmt.Errorf("%w: gen %s: dst: %v", ErrBadSpec, spec.Name, err)
	}
	srcS := spec.Src
	if srcS == "" {
		srcS = genDefaultSrc
	}
	src, err := net.ParseMAC(srcS)
	if err != nil {
		return fmt.Errorf("%w: gen %s: src: %v", ErrBadSpec, spec.Name, err)
	}
	if spec.Size < genMinFrame || spec.Size > genMaxFrame {
		return fmt.Errorf("%w: gen %s: size %d", ErrBadSpec, spec.Name, spec.Size)
	}
	p := &genPort{spec: spec, q: &genQueue{frame: genFrame(dst, src, spec.Size)}}
	if _, err := s.addPort(spec.Name, p, 0); err != nil {
		return err
	}
	slog.Info("port added", "name", spec.Name, "kind", "gen", "size", spec.Size, "dst", spec.Dst, "note", "benchmark-only frame generator")
	return nil
}

func (p *genPort) rxQueues() []rxQueue { return []rxQueue{p.q} }
func (p *genPort) txQueues() []txQueue { return []txQueue{p.q} }
func (p *genPort) fail(error)          {}
func (p *genPort) close() error        { return nil }

func (p *genPort) info() PortInfo {
	return PortInfo{Kind: "gen", State: "up", Queues: 1,
		Detail: fmt.Sprintf("benchmark generator size=%d dst=%s src=%s", p.spec.Size, p.spec.Dst, p.spec.Src)}
}

// receive fills a whole burst with the generated frame.
func (q *genQueue) receive(fb *frameBurst, c *burstCounts) (int, error) {
	for i := 0; i < MaxBurst; i++ {
		fb.setOne(i, q.frame)
	}
	return MaxBurst, nil
}

// release has nothing to return: the frame is never consumed.
func (q *genQueue) release(fb *frameBurst) error { return nil }

// waker: a generator always has frames, so its worker never sleeps.
func (q *genQueue) waker() waker { return waker{fd: -1} }

// transmit counts the frames as sent and discards them.
func (q *genQueue) transmit(fb *frameBurst, mask frameMask, c *burstCounts) {
	for m := mask; m != 0; m &= m - 1 {
		c.packets++
		c.bytes += uint64(fb.f[bits.TrailingZeros32(uint32(m))].len)
	}
}
