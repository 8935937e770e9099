package metrics

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xvswitch/xvswitch/ctl"
)

// fakeSource is a switch as metrics sees it.
type fakeSource struct {
	ports   []ctl.PortInfo
	stats   []ctl.PortCounters
	reasons []string
	fdb     int
	sleeps  []uint64
	windows [2]uint64
}

func (f *fakeSource) Ports() []ctl.PortInfo           { return f.ports }
func (f *fakeSource) Stats() []ctl.PortCounters       { return f.stats }
func (f *fakeSource) DropReasons() []string           { return f.reasons }
func (f *fakeSource) FDBLen() int                     { return f.fdb }
func (f *fakeSource) WorkerSleeps() []uint64          { return f.sleeps }
func (f *fakeSource) StreamWindows() (uint64, uint64) { return f.windows[0], f.windows[1] }

// aSwitch: a NIC that is up and a vhost port that is broken, with two
// queues.
func aSwitch() *fakeSource {
	return &fakeSource{
		ports: []ctl.PortInfo{{Name: "nic0", Kind: "nic", State: "up", Queues: 1}, {Name: "vm1", Kind: "vhost", State: "broken", Queues: 2}},
		stats: []ctl.PortCounters{{
			Name:   "nic0",
			Queues: []ctl.QueueCounters{{RxPackets: 7, RxBytes: 448, TxPackets: 5, TxBytes: 320, FloodCopies: 3, Bursts: ctl.Bursts{RxBursts: 2, TxBursts: 4}}},
			Kernel: map[string]uint64{"xdp_redirected": 9, "xdp_host_nd_passed": 4, "af_xdp_rx_dropped": 1, "af_xdp_rx_ring_full": 11,
				"af_xdp_rx_fill_ring_empty": 12, "af_xdp_rx_invalid_descs": 13, "af_xdp_tx_invalid_descs": 14,
				"link_down_events": 2, "recovery_errors": 6, "csum_completed": 15, "af_packet_dropped": 16, "owner_rx_discarded": 17},
			LearnRefused: 4,
		}, {
			Name: "vm1",
			Queues: []ctl.QueueCounters{{Queue: 0}, {Queue: 1, TxPackets: 1, Drops: map[string]uint64{"tx_full": 2},
				PathCounters: ctl.PathCounters{CopiedFrames: 1, CopiedBytes: 64, StreamedFrames: 1}}},
		}},
		reasons: []string{"no_rx_buffers", "tx_full"},
		fdb:     3,
		sleeps:  []uint64{5, 0},
		windows: [2]uint64{18, 19},
	}
}

// scrape GETs /metrics as curl would and parses the text it gets.
func scrape(t *testing.T, src Source, build Build) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(Handler(src, build))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return fams
}

// family is what a series family must be: its type and label names.
type family struct {
	typ    dto.MetricType
	labels []string
}

var (
	counter = dto.MetricType_COUNTER
	gauge   = dto.MetricType_GAUGE
)

// xvswitchFamilies is every family the switch's collector makes.
var xvswitchFamilies = map[string]family{
	"xvswitch_build_info":                     {gauge, []string{"commit", "goversion", "version"}},
	"xvswitch_port_up":                        {gauge, []string{"port"}},
	"xvswitch_port_info":                      {gauge, []string{"kind", "port", "state"}},
	"xvswitch_rx_packets_total":               {counter, []string{"port", "queue"}},
	"xvswitch_rx_bytes_total":                 {counter, []string{"port", "queue"}},
	"xvswitch_tx_packets_total":               {counter, []string{"port", "queue"}},
	"xvswitch_tx_bytes_total":                 {counter, []string{"port", "queue"}},
	"xvswitch_rx_bursts_total":                {counter, []string{"port", "queue"}},
	"xvswitch_tx_bursts_total":                {counter, []string{"port", "queue"}},
	"xvswitch_flood_copies_total":             {counter, []string{"port", "queue"}},
	"xvswitch_segment_copies_total":           {counter, []string{"port", "queue"}},
	"xvswitch_zerocopy_frames_total":          {counter, []string{"port", "queue"}},
	"xvswitch_copied_frames_total":            {counter, []string{"port", "queue"}},
	"xvswitch_copied_bytes_total":             {counter, []string{"port", "queue"}},
	"xvswitch_streamed_frames_total":          {counter, []string{"port", "queue"}},
	"xvswitch_drops_total":                    {counter, []string{"port", "queue", "reason"}},
	"xvswitch_fdb_entries":                    {gauge, nil},
	"xvswitch_fdb_learn_refused_total":        {counter, []string{"port"}},
	"xvswitch_worker_sleeps_total":            {counter, []string{"worker"}},
	"xvswitch_guest_rx_store_windows_total":   {counter, []string{"stores"}},
	"xvswitch_xdp_packets_total":              {counter, []string{"port", "verdict"}},
	"xvswitch_afxdp_rx_dropped_total":         {counter, []string{"port"}},
	"xvswitch_afxdp_rx_ring_full_total":       {counter, []string{"port"}},
	"xvswitch_afxdp_rx_fill_ring_empty_total": {counter, []string{"port"}},
	"xvswitch_afxdp_rx_invalid_descs_total":   {counter, []string{"port"}},
	"xvswitch_afxdp_tx_invalid_descs_total":   {counter, []string{"port"}},
	"xvswitch_afpacket_dropped_total":         {counter, []string{"port"}},
	"xvswitch_nic_events_total":               {counter, []string{"event", "port"}},
	"xvswitch_nic_recovery_errors_total":      {counter, []string{"port"}},
	"xvswitch_nic_csum_completed_total":       {counter, []string{"port"}},
	"xvswitch_nic_owner_rx_discarded_total":   {counter, []string{"port"}},
}

// value is the sample of fams' family name with exactly these labels.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	t.Helper()
	f := fams[name]
	if f == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			match = match && got[k] == v
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.Counter.GetValue(), true
		case dto.MetricType_GAUGE:
			return m.Gauge.GetValue(), true
		}
		t.Fatalf("%s: type %v", name, f.GetType())
	}
	return 0, false
}

// TestScrape reads a fake switch over HTTP and checks every family's
// type, help and label names, and the values.
func TestScrape(t *testing.T) {
	fams := scrape(t, aSwitch(), Build{Version: "v1.2.3", Commit: "0123abcd"})
	for name, f := range fams {
		if !strings.HasPrefix(name, "xvswitch_") {
			continue
		}
		want, ok := xvswitchFamilies[name]
		if !ok {
			t.Errorf("%s: a family this test does not know (add it here and to docs/metrics.md)", name)
			continue
		}
		if f.GetType() != want.typ || f.GetHelp() == "" {
			t.Errorf("%s: type %v, help %q; want %v and a help text", name, f.GetType(), f.GetHelp(), want.typ)
		}
		for _, m := range f.Metric {
			var got []string
			for _, l := range m.Label {
				got = append(got, l.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, want.labels) {
				t.Errorf("%s: labels %v, want %v", name, got, want.labels)
			}
		}
	}
	for name := range xvswitchFamilies {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	if fams["xvswitch_kernel_total"] != nil {
		t.Error("the catch-all xvswitch_kernel_total is back")
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"xvswitch_build_info", []string{"version", "v1.2.3", "commit", "0123abcd", "goversion", runtime.Version()}, 1},
		{"xvswitch_port_up", []string{"port", "nic0"}, 1},
		{"xvswitch_port_up", []string{"port", "vm1"}, 0},
		{"xvswitch_port_info", []string{"port", "nic0", "kind", "nic", "state", "up"}, 1},
		{"xvswitch_port_info", []string{"port", "vm1", "kind", "vhost", "state", "broken"}, 1},
		{"xvswitch_rx_packets_total", []string{"port", "nic0", "queue", "0"}, 7},
		{"xvswitch_rx_bytes_total", []string{"port", "nic0", "queue", "0"}, 448},
		{"xvswitch_tx_packets_total", []string{"port", "nic0", "queue", "0"}, 5},
		{"xvswitch_tx_bytes_total", []string{"port", "nic0", "queue", "0"}, 320},
		{"xvswitch_flood_copies_total", []string{"port", "nic0", "queue", "0"}, 3},
		{"xvswitch_rx_bursts_total", []string{"port", "nic0", "queue", "0"}, 2},
		{"xvswitch_tx_bursts_total", []string{"port", "nic0", "queue", "0"}, 4},
		{"xvswitch_tx_packets_total", []string{"port", "vm1", "queue", "1"}, 1},
		{"xvswitch_copied_frames_total", []string{"port", "vm1", "queue", "1"}, 1},
		{"xvswitch_copied_bytes_total", []string{"port", "vm1", "queue", "1"}, 64},
		{"xvswitch_streamed_frames_total", []string{"port", "vm1", "queue", "1"}, 1},
		{"xvswitch_streamed_frames_total", []string{"port", "vm1", "queue", "0"}, 0},
		// Every reason has a series, zeros included.
		{"xvswitch_drops_total", []string{"port", "vm1", "queue", "1", "reason", "tx_full"}, 2},
		{"xvswitch_drops_total", []string{"port", "vm1", "queue", "1", "reason", "no_rx_buffers"}, 0},
		{"xvswitch_drops_total", []string{"port", "nic0", "queue", "0", "reason", "tx_full"}, 0},
		{"xvswitch_fdb_entries", nil, 3},
		{"xvswitch_fdb_learn_refused_total", []string{"port", "nic0"}, 4},
		{"xvswitch_fdb_learn_refused_total", []string{"port", "vm1"}, 0},
		{"xvswitch_worker_sleeps_total", []string{"worker", "0"}, 5},
		{"xvswitch_worker_sleeps_total", []string{"worker", "1"}, 0},
		{"xvswitch_guest_rx_store_windows_total", []string{"stores", "ordinary"}, 18},
		{"xvswitch_guest_rx_store_windows_total", []string{"stores", "streaming"}, 19},
		{"xvswitch_xdp_packets_total", []string{"port", "nic0", "verdict", "redirected"}, 9},
		{"xvswitch_xdp_packets_total", []string{"port", "nic0", "verdict", "host_nd_passed"}, 4},
		{"xvswitch_afxdp_rx_dropped_total", []string{"port", "nic0"}, 1},
		{"xvswitch_afxdp_rx_ring_full_total", []string{"port", "nic0"}, 11},
		{"xvswitch_afxdp_rx_fill_ring_empty_total", []string{"port", "nic0"}, 12},
		{"xvswitch_afxdp_rx_invalid_descs_total", []string{"port", "nic0"}, 13},
		{"xvswitch_afxdp_tx_invalid_descs_total", []string{"port", "nic0"}, 14},
		{"xvswitch_afpacket_dropped_total", []string{"port", "nic0"}, 16},
		{"xvswitch_nic_events_total", []string{"port", "nic0", "event", "link_down"}, 2},
		{"xvswitch_nic_recovery_errors_total", []string{"port", "nic0"}, 6},
		{"xvswitch_nic_csum_completed_total", []string{"port", "nic0"}, 15},
	} {
		if got, ok := value(t, fams, tc.name, tc.labels...); !ok || got != tc.want {
			t.Errorf("%s%v: %v (found: %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	// A vhost port has no kernel counters, so no kernel series.
	if _, ok := value(t, fams, "xvswitch_afxdp_rx_dropped_total", "port", "vm1"); ok {
		t.Error("a vhost port has AF_XDP series")
	}
	// The process and Go build collectors.
	for name, typ := range map[string]dto.MetricType{
		"process_cpu_seconds_total":     counter,
		"process_resident_memory_bytes": gauge,
		"process_open_fds":              gauge,
		"process_start_time_seconds":    gauge,
		"go_build_info":                 gauge,
	} {
		if f := fams[name]; f == nil || f.GetType() != typ {
			t.Errorf("%s: %v, want a %v", name, f, typ)
		}
	}
}
