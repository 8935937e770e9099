package vswitch

import (
	"encoding/binary"

	"github.com/xvswitch/xvswitch/virtionet"
)

// The learning bridge's decision for one frame, and what lets most frames
// skip it. A burst from one queue is mostly one flow (a guest's TX ring, a
// NIC queue that RSS fed one connection), so forward remembers the MACs of
// the previous frame of the burst and where it went, and a frame with the
// same two MACs goes there too without touching the FDB: the source was
// learned (and its timestamp refreshed) by that previous frame, and the
// destination was looked up for it.
//
// The memory lives for one burst only, so it is invalidated by every FDB
// change (a MAC learned, moved, aged out, flushed with its port) and
// every snapshot change (a port removed, VLANs turned on or off) from the
// next burst's first frame (TestBridgeMemoryFollowsFDBChanges). Within a
// burst nothing the answer depends on changes but through another
// worker or the control path, a race the lock-free FDB has anyway (a
// frame classified just before a MAC moved goes to its old port); the
// port table is the burst's snapshot. A frame never waits longer for a
// change than one burst.
//
// Keeping it across bursts (checked against an FDB change counter, the
// snapshot and the clock's second) would save one learn and one lookup
// per burst, under 1 ns/frame at 32 frames, and needs a memory per
// ingress queue that no two workers write during a queue's hand-over.
// Measured, it is not where the bridge's time goes: in the closed VM <->
// VM loop the code of the bridge costs ~2 ns/frame more than a
// cross-connect's, the rest of forward's time is the first load of each
// frame's header, a cache miss in both modes (docs/architecture.md, "The
// bridge's cost"). In one core's cache the classification itself was ~86
// instructions a frame more than a cross-connect (callgrind,
// BenchmarkBridgeVsXConnect, 2026-12-07), ~43 with the runs below.

// Where the bridge sends a frame, besides a port index (>= 0).
const (
	destFlood   = -1 // unknown unicast or a group address: every other bridge port
	destHairpin = -2 // the destination lives behind the ingress port: dropped
)

// noMAC is a key no MAC has (MACKey sets only the low 48 bits): nothing
// is remembered at a burst's start.
const noMAC = uint64(1) << 63

// bridgeDest learns source sk on port in and returns where a frame from
// sk to destination dk (FDB keys, FDBKey: MACs in the frame's VLAN) goes: a port index, destFlood or destHairpin.
func (w *forwarder) bridgeDest(sk, dk uint64, in int, ports []*port) int {
	f := w.fdb
	// Learn and Lookup, with the table's probes inlined here.
	if sk&groupBit == 0 && sk&macMask != 0 {
		s, e := f.find(sk)
		f.learnFound(sk, in, s, e)
	}
	if dk&groupBit != 0 {
		return destFlood
	}
	v, _ := f.value(f.find(dk)) // 0 when unknown or changed: port -1
	p := valPort(v)
	switch {
	case p < 0 || p >= len(ports) || ports[p] == nil:
		return destFlood
	case p == in:
		return destHairpin
	}
	return p
}

// A run of frames with the same Ethernet header (both MACs and the type)
// as the two frames before them needs none of the per-frame
// classification: those frames passed the port's source check with that
// source, and went where the bridge sends that destination. forward
// remembers the header as two words read from the frame's first segment
// (headerWords) once two frames in a row carried it, and sameFlow finds
// how far the run goes with two loads and compares a frame, where the
// classification spent ~70 instructions (callgrind,
// BenchmarkBridgeVsXConnect). Two in a row, not one: where flows
// alternate frame by frame, a run never starts and nothing is spent on
// looking for one. Only without VLANs: with them, a frame's VLAN is more
// than its header's type. A header split across segments goes the long
// way.

// headerWords returns the words of a frame's Ethernet header (bytes 0-7
// and 6-13 of its first segment), or ok false if that segment is shorter.
func headerWords(segs [][]byte) (ok bool, a, b uint64) {
	if len(segs) == 0 || len(segs[0]) < ethHeaderLen {
		return false, 0, 0
	}
	h := segs[0]
	return true, binary.LittleEndian.Uint64(h[0:8]), binary.LittleEndian.Uint64(h[6:ethHeaderLen])
}

// sameFlow returns how many frames from i on (below n) start with the
// header words a and b in their first segment, and their bytes.
func sameFlow(fr *virtionet.Frames, i, n int, a, b uint64) (k int, bytes uint64) {
	j := i
	for ; j < n; j++ {
		ok, ja, jb := headerWords(fr.Segments(j))
		if !ok || ja != a || jb != b {
			break
		}
		bytes += uint64(fr.FrameLen(j))
	}
	return j - i, bytes
}
