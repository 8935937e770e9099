package metrics

import (
	"bytes"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/ctl"
)

type fakeSource struct{}

func (fakeSource) Stats() []ctl.PortCounters {
	return []ctl.PortCounters{{
		Name:         "nic0",
		Queues:       []ctl.QueueCounters{{RxPackets: 7, RxBytes: 448, Drops: map[string]uint64{"tx_full": 2}}},
		Kernel:       map[string]uint64{"xdp_redirected": 9, "af_xdp_rx_dropped": 1},
		LearnRefused: 4,
	}}
}
func (fakeSource) DropReasons() []string  { return []string{"no_rx_buffers", "tx_full"} }
func (fakeSource) FDBLen() int            { return 3 }
func (fakeSource) WorkerSleeps() []uint64 { return []uint64{5, 0} }

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, fakeSource{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# TYPE xvswitch_rx_packets_total counter\n",
		`xvswitch_rx_packets_total{port="nic0",queue="0"} 7` + "\n",
		`xvswitch_rx_bytes_total{port="nic0",queue="0"} 448` + "\n",
		// Every reason has a series, zeros included.
		`xvswitch_drops_total{port="nic0",queue="0",reason="no_rx_buffers"} 0` + "\n",
		`xvswitch_drops_total{port="nic0",queue="0",reason="tx_full"} 2` + "\n",
		// Kernel counters in name order.
		`xvswitch_kernel_total{port="nic0",counter="af_xdp_rx_dropped"} 1` + "\n" +
			`xvswitch_kernel_total{port="nic0",counter="xdp_redirected"} 9` + "\n",
		"# TYPE xvswitch_fdb_entries gauge\nxvswitch_fdb_entries 3\n",
		"# TYPE xvswitch_fdb_learn_refused_total counter\n" + `xvswitch_fdb_learn_refused_total{port="nic0"} 4` + "\n",
		`xvswitch_worker_sleeps_total{worker="0"} 5` + "\n" + `xvswitch_worker_sleeps_total{worker="1"} 0` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
