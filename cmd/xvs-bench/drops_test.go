package main

import (
	"testing"

	"github.com/xvswitch/xvswitch/test/testpmd"
)

func TestWindowDrops(t *testing.T) {
	start := Drops{"vu0:no_rx_buffers": 1000, "vu0:no_destination": 50, "nic0:kernel.af_xdp_rx_ring_full": 7, "vu1:tx_full": 9}
	end := Drops{"vu0:no_rx_buffers": 1012, "vu0:no_destination": 80, "nic0:kernel.af_xdp_rx_ring_full": 7, "vu1:tx_full": 3, "vu1:malformed": 2}
	w := end.since(start)
	// Warm-up drops do not count; a counter that did not move is left out;
	// one that went backwards (a re-created port) counts from zero.
	want := Drops{"vu0:no_rx_buffers": 12, "vu0:no_destination": 30, "vu1:tx_full": 3, "vu1:malformed": 2}
	if len(w) != len(want) {
		t.Fatalf("window drops %v, want %v", w, want)
	}
	for k, v := range want {
		if w[k] != v {
			t.Errorf("%s: %d, want %d", k, w[k], v)
		}
	}
	if n := w.total(""); n != 47 {
		t.Errorf("total %d, want 47", n)
	}
	if n := w.total("no_destination"); n != 17 {
		t.Errorf("total without the by-design drop %d, want 17", n)
	}
	if s := w.String(); s != "vu0:no_destination=30 vu0:no_rx_buffers=12 vu1:malformed=2 vu1:tx_full=3" {
		t.Errorf("String %q", s)
	}
	if s := (Drops{}).String(); s != "none" {
		t.Errorf("empty String %q", s)
	}
	w["nic0:kernel.af_xdp_rx_ring_full"] = 5
	if n := w.total("", ringFullDrop); n != 47 {
		t.Errorf("total without the AF_XDP ring's drops %d, want 47", n)
	}
}

func TestDPDKWindowDrops(t *testing.T) {
	at0 := map[int]testpmd.PortStats{0: {RxMissed: 5, TxErrors: 100}, 1: {RxNombuf: 1}}
	at1 := map[int]testpmd.PortStats{0: {RxMissed: 5, TxErrors: 160, RxErrors: 2}, 1: {RxNombuf: 4}}
	fwd0 := testpmd.FwdStats{Ports: map[int]testpmd.FwdPortStats{0: {TxDropped: 1000, RxDropped: 5}}}
	fwd1 := testpmd.FwdStats{Ports: map[int]testpmd.FwdPortStats{0: {TxDropped: 1500, RxDropped: 5}, 1: {TxDropped: 7}}}
	w := portDrops(at1, fwd1, []int{0, 1}).since(portDrops(at0, fwd0, []int{0, 1}))
	if w["port0:TX-errors"] != 60 || w["port0:RX-errors"] != 2 || w["port1:RX-nombuf"] != 3 ||
		w["port0:TX-dropped"] != 500 || w["port1:TX-dropped"] != 7 || len(w) != 5 || w.total("") != 572 {
		t.Errorf("DPDK window drops %v", w)
	}
	if newCase(1, "", 64, "split").ByDesignDrop != "no_destination" || newCase(2, "", 64, "split").ByDesignDrop != "" {
		t.Errorf("by-design drops: only scenario 1's one-port switch drops by design")
	}
}
