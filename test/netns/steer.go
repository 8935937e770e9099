package netns

import (
	"errors"
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// Steering a veth's frames to chosen receive queues, for tests that give
// a VM a queue of its own (docs/zerocopy.md). A veth frame arrives on the
// peer's rx queue of the index of the transmit queue it was sent on; the
// sender picks that by flow hash unless skb->queue_mapping was set before
// it does. tc's flower and matchall classifiers are not in this kernel,
// so a tcx egress BPF program on the sending end (the inner end, in the
// namespace) sets it by destination MAC. It is written here with
// cilium/ebpf's asm package rather than in C, so bpf/ keeps one clang
// object.

// Offsets in struct __sk_buff (include/uapi/linux/bpf.h).
const (
	skbQueueMapping = 12
	skbData         = 76
	skbDataEnd      = 80
)

// QueueSteering is a running SteerQueues program: its map can change.
type QueueSteering struct {
	t testing.TB
	m *ebpf.Map
}

// Set makes frames to mac arrive on queue q from now on.
func (s *QueueSteering) Set(mac string, q int) {
	s.t.Helper()
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		s.t.Fatalf("QueueSteering.Set: MAC %q: %v", mac, err)
	}
	var k [8]byte
	copy(k[:], hw)
	if err := s.m.Put(k, uint32(q)); err != nil {
		s.t.Fatalf("steering map: %v", err)
	}
}

// SteerQueues attaches the steering program to the inner end's egress:
// a frame whose destination MAC is a key of queues is received on that
// queue of the outer end, any other on queue def. It is detached in
// t.Cleanup.
//
// The program stores queue + 1: the kernel's transmit queue choice
// (skb_tx_hash) reads a set queue_mapping as a recorded receive queue,
// one above the queue it means.
func (v *Veth) SteerQueues(t testing.TB, queues map[string]int, def int) *QueueSteering {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xvs_steer_q", Type: ebpf.Hash, KeySize: 8, ValueSize: 4, MaxEntries: 64})
	if err != nil {
		t.Fatalf("steering map: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	put := func(key [8]byte, q int) {
		if err := m.Put(key, uint32(q)); err != nil {
			t.Fatalf("steering map: %v", err)
		}
	}
	put([8]byte{}, def) // key 0: the default
	qs := &QueueSteering{t: t, m: m}
	for mac, q := range queues {
		qs.Set(mac, q)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "xvs_steer_q",
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: steerInstructions(m.FD()),
	})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("steering program: %+v", ve)
		}
		t.Fatalf("steering program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	var l link.Link
	err = v.NS.Do(func() error {
		ifi, err := net.InterfaceByName(v.Inner)
		if err != nil {
			return err
		}
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: prog, Attach: ebpf.AttachTCXEgress})
		return err
	})
	if err != nil {
		t.Fatalf("attaching the steering program to %s's egress: %v", v.Inner, err)
	}
	t.Cleanup(func() { l.Close() })
	return qs
}

// steerInstructions: key = the frame's first 6 bytes (its destination
// MAC) padded with two zero bytes; queue = map[key], else map[0]; then
// skb->queue_mapping = queue + 1. A frame shorter than a MAC, or with no
// entry at all, is left to the hash. The verdict is always TCX_PASS (0).
func steerInstructions(mapFD int) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1), // ctx, kept across calls
		asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 6),
		asm.JGT.Reg(asm.R4, asm.R3, "out"),
		asm.Mov.Imm(asm.R5, 0),
		asm.StoreMem(asm.RFP, -8, asm.R5, asm.DWord),
		asm.LoadMem(asm.R5, asm.R2, 0, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R5, asm.Word),
		asm.LoadMem(asm.R5, asm.R2, 4, asm.Half),
		asm.StoreMem(asm.RFP, -4, asm.R5, asm.Half),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JNE.Imm(asm.R0, 0, "found"),
		asm.Mov.Imm(asm.R5, 0),
		asm.StoreMem(asm.RFP, -8, asm.R5, asm.DWord),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R0, asm.R0, 0, asm.Word).WithSymbol("found"),
		asm.Add.Imm(asm.R0, 1),
		asm.StoreMem(asm.R6, skbQueueMapping, asm.R0, asm.Word),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}
