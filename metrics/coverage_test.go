package metrics

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/vswitch"
)

// The switch is a Source.
var _ Source = (*vswitch.Switch)(nil)

// kernelFamilies are the families kernel counters map to.
var kernelFamilies = []string{
	"xvswitch_xdp_packets_total",
	"xvswitch_afxdp_rx_dropped_total",
	"xvswitch_afxdp_rx_ring_full_total",
	"xvswitch_afxdp_rx_fill_ring_empty_total",
	"xvswitch_afxdp_rx_invalid_descs_total",
	"xvswitch_afxdp_tx_invalid_descs_total",
	"xvswitch_afpacket_dropped_total",
	"xvswitch_nic_events_total",
	"xvswitch_nic_recovery_errors_total",
	"xvswitch_nic_csum_completed_total",
	"xvswitch_nic_owner_rx_discarded_total",
}

// TestEveryCounterHasASeries: each kernel counter the switch can report
// (vswitch.KernelCounters) lands in a series of its own (and kernelSeries
// maps no other), and each drop
// reason (vswitch.DropReasons) has one per queue. Each key gets a value
// of its own, so a series holding two keys, or none, shows.
func TestEveryCounterHasASeries(t *testing.T) {
	keys, reasons := vswitch.KernelCounters(), vswitch.DropReasons()
	if len(keys) == 0 || len(reasons) == 0 {
		t.Fatalf("kernel counters %v, drop reasons %v", keys, reasons)
	}
	kernel := map[string]uint64{}
	byValue := map[float64]string{}
	for i, k := range keys {
		kernel[k] = uint64(i + 1)
		byValue[float64(i+1)] = k
	}
	drops := map[string]uint64{}
	for i, r := range reasons {
		drops[r] = uint64(100 + i)
	}
	src := &fakeSource{
		stats:   []ctl.PortCounters{{Name: "nic0", Queues: []ctl.QueueCounters{{Drops: drops}}, Kernel: kernel}},
		reasons: reasons,
	}
	fams, err := Registry(src, Build{}).Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	seen := map[string]string{} // kernel key -> the series it landed in
	for _, name := range kernelFamilies {
		f := byName[name]
		if f == nil {
			t.Errorf("no %s", name)
			continue
		}
		for _, m := range f.Metric {
			k, ok := byValue[m.Counter.GetValue()]
			series := name + labelString(m)
			if !ok || seen[k] != "" {
				t.Errorf("%s = %v: not one kernel counter's value (seen: %v)", series, m.Counter.GetValue(), seen)
				continue
			}
			seen[k] = series
		}
	}
	for _, k := range keys {
		if seen[k] == "" {
			t.Errorf("kernel counter %q has no series", k)
		}
	}
	for k := range kernelSeries {
		if kernel[k] == 0 {
			t.Errorf("kernelSeries maps %q, which the switch does not report", k)
		}
	}
	for i, r := range reasons {
		if f := byName["xvswitch_drops_total"]; f == nil || !hasSample(f, float64(100+i), "reason", r) {
			t.Errorf("drop reason %q: no xvswitch_drops_total{reason=%q} %d", r, r, 100+i)
		}
	}
}

// TestUnknownCounterFails: a kernel counter or drop reason the metrics
// have no series for fails a gather (so a test fails) instead of
// vanishing; a scrape logs it and still serves everything else.
func TestUnknownCounterFails(t *testing.T) {
	src := aSwitch()
	src.stats[0].Kernel["xdp_new_verdict"] = 1
	src.stats[1].Queues[0].Drops = map[string]uint64{"new_reason": 1}
	_, err := Registry(src, Build{}).Gather()
	if err == nil || !strings.Contains(err.Error(), `port nic0: kernel counter "xdp_new_verdict" has no series`) ||
		!strings.Contains(err.Error(), `port vm1 queue 0: drop reason "new_reason" is not among DropReasons`) {
		t.Fatalf("gather: %v, want both counters named", err)
	}
	var log bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))
	srv := httptest.NewServer(Handler(src, Build{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(log.String(), "xdp_new_verdict") {
		t.Fatalf("scrape: status %d, log %q", resp.StatusCode, log.String())
	}
	if fams := scrape(t, src, Build{}); fams["xvswitch_fdb_entries"] == nil || fams["xvswitch_xdp_packets_total"] == nil {
		t.Fatalf("the other series are not served: %v", fams)
	}
}

// TestDocsListEveryFamily: docs/metrics.md names every family.
func TestDocsListEveryFamily(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range xvswitchFamilies {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not list `%s`", name)
		}
	}
	for key := range kernelSeries {
		if !strings.Contains(string(doc), "`"+key+"`") {
			t.Errorf("docs/metrics.md does not say where kernel counter `%s` went", key)
		}
	}
}

func labelString(m *dto.Metric) string {
	var parts []string
	for _, l := range m.Label {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func hasSample(f *dto.MetricFamily, v float64, label, value string) bool {
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == label && l.GetValue() == value && m.Counter.GetValue() == v {
				return true
			}
		}
	}
	return false
}
