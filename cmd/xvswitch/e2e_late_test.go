package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/test/testpmd"
)

// TestVirtioUserLateSender is the scenario a new user tries first: two
// vhost ports cross-connected, a DPDK virtio-user receiver on one, the
// switch idle long enough that its worker sleeps in epoll, then a txonly
// sender on the other. The sender's device becomes ready while the worker
// sleeps; its frames must be switched as soon as it sends (a report had
// them switched only ~11 s after it started), and every frame is counted.
func TestVirtioUserLateSender(t *testing.T) {
	require.Long(t)
	require.Root(t)
	require.Commands(t, "dpdk-testpmd")
	for _, packed := range []bool{true, false} {
		t.Run(ringName(packed), func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
			d := startDaemon(t, "--vhost", a+",name=a", "--vhost", b+",name=b", "--xconnect", "a=b")
			rx := testpmd.Start(t, testpmd.Config{
				Name:  "late-rx",
				Ports: []testpmd.Port{{Kind: testpmd.VirtioUser, Path: b, Packed: packed, MrgRxbuf: true, QueueSize: 1024}},
				Mode:  "rxonly", Interactive: true, StatsPeriod: 200 * time.Millisecond, FwdCPUs: []int{1},
			})
			if err := rx.Cmd("start"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // the worker sleeps after 10 ms
			launched := time.Now()
			tx := testpmd.Start(t, testpmd.Config{
				Name:  "late-tx",
				Ports: []testpmd.Port{{Kind: testpmd.VirtioUser, Path: a, Packed: packed, MrgRxbuf: true}},
				Mode:  "txonly", Interactive: true, StatsPeriod: 200 * time.Millisecond, FwdCPUs: []int{0},
			})
			ready := time.Since(launched)
			start := time.Now()
			if err := tx.Cmd("start"); err != nil {
				t.Fatal(err)
			}
			for port(d.stats(t), "b").TxPackets == 0 && time.Since(start) < 15*time.Second {
				time.Sleep(10 * time.Millisecond)
			}
			first := time.Since(start)
			t.Logf("the sender was up %v after its launch; its first frame reached the receiver's ring %v after it started sending", ready, first)
			if first > time.Second {
				t.Errorf("the first switched frame came %v after the sender started", first)
			}
			fwd, err := tx.StopForwarding(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			sent := fwd.Ports[0].TxPackets
			for deadline := time.Now().Add(5 * time.Second); port(d.stats(t), "a").RxPackets < sent && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			st := d.stats(t)
			if got := port(st, "a").RxPackets; got != sent {
				t.Errorf("the switch received %d frames from the sender, testpmd sent %d", got, sent)
			}
			checkBalance(t, st)
		})
	}
}
