package vswitch

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// soakTime is how long TestSoak churns: XVS_SOAK_TIME (a Go duration)
// for a run by hand, else 15 s, or 3 s under -short (make unit).
func soakTime(t *testing.T) time.Duration {
	if v := os.Getenv("XVS_SOAK_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("XVS_SOAK_TIME=%q: %v", v, err)
		}
		return d
	}
	if testing.Short() {
		return 3 * time.Second
	}
	return 15 * time.Second
}

// soak is TestSoak's world: the switch, a fixed bystander pair, churning
// guests added and removed over the control protocol, and the ledger of
// what was sent and what deleted ports had counted.
type soak struct {
	t     *testing.T
	s     *Switch
	rng   *rand.Rand
	dir   string
	a, b  *guest
	churn []*guest // nil where a churning port is deleted
	sent  uint64   // frames the guests made available
	gone  []ctl.PortCounters
	next  int // names churning ports uniquely
	stats map[string]int
}

// addChurn adds a churning port through the control protocol and brings
// a front-end up on it, on a random ring kind.
func (k *soak) addChurn(slot int) {
	k.next++
	name := fmt.Sprintf("churn%d", k.next)
	mac := uint64(0x0252_5400_c000 + k.next)
	path := filepath.Join(k.dir, name+".sock")
	if resp := k.s.Handle(ctl.Request{Op: ctl.OpAddPort, Vhost: fmt.Sprintf("%s,name=%s,mac=%s", path, name, MACString(mac))}); resp.Error != "" {
		k.t.Fatalf("add-port %s: %s", name, resp.Error)
	}
	g := &guest{name: name, path: path, mac: mac, fe: vhosttest.Dial(k.t, path)}
	g.fe.Start(vhosttest.Options{Packed: k.rng.IntN(2) == 0})
	waitFor(k.t, name+" ready", func() bool { return portState(k.s, name) == "ready" })
	g.fe.PostRx(0, 64)
	k.churn[slot] = g
	k.stats["add-port"]++
}

// quiesce waits until every frame sent so far has been received by a
// port (then its transmit side is counted too: one burst does both).
func (k *soak) quiesce() {
	waitFor(k.t, "every sent frame received", func() bool {
		var rx uint64
		for _, p := range append(k.s.Stats(), k.gone...) {
			rx += p.RxPackets
		}
		return rx == k.sent
	})
}

// delChurn removes a churning port through the control protocol, keeping
// its final counters for the balance.
func (k *soak) delChurn(slot int) {
	g := k.churn[slot]
	k.quiesce()
	k.gone = append(k.gone, portStats(k.s, g.name))
	if resp := k.s.Handle(ctl.Request{Op: ctl.OpDelPort, Name: g.name}); resp.Error != "" {
		k.t.Fatalf("del-port %s: %s", g.name, resp.Error)
	}
	_ = g.fe.Close()
	k.churn[slot] = nil
	k.stats["del-port"]++
}

// send has g send n frames: to other churners, to an unknown MAC and
// broadcast, so floods, learning and drops (a churner's RX ring runs
// dry) all happen.
func (k *soak) send(g *guest, n int) {
	var frames [][]byte
	for i := 0; i < n; i++ {
		dst := uint64(bcast)
		switch k.rng.IntN(3) {
		case 0:
			dst = 0x0252_5400_ffff // nobody's: flooded
		case 1:
			if o := k.churn[k.rng.IntN(len(k.churn))]; o != nil {
				dst = o.mac
			}
		}
		frames = append(frames, g.frameTo(dst, i))
	}
	k.sent += uint64(g.fe.Send(0, frames...))
}

// TestSoak: traffic between a bystander pair and among churning guests, while
// churning guests restart their front-ends (in place, or a new one on the
// other ring kind) and are deleted and added again over the control
// protocol, with workers sleeping and waking in between. The bystanders'
// traffic always arrives intact; at the end the counters balance over the
// ports that still exist and those that were deleted, and the process's
// fd count is back where it was and its RSS has not grown.
func TestSoak(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 2, IdleAfter: time.Millisecond})
	// The bystanders are cross-connected, off the bridge, so the churners'
	// floods do not eat their receive buffers; they share the workers.
	s.cfg.XConnects = []portspec.XConnect{{A: "bystander-a", B: "bystander-b"}}
	k := &soak{t: t, s: s, rng: rand.New(rand.NewPCG(1, 2)), dir: t.TempDir(), churn: make([]*guest, 3), stats: map[string]int{}}
	k.a, k.b = bystanders(t, s)
	// Warm up once so the baseline includes what the first traffic
	// allocates for good (worker masks, Go's heap).
	exchange(t, k.a, k.b, 32)
	k.sent += 64
	fds, mem := openFDs(t), heldMemory(t)
	if mem.guestMaps == 0 {
		t.Fatal("no guest memory mapping seen in /proc/self/maps: the mapping check would be vacuous")
	}
	t.Logf("before the soak: %+v", mem)
	for i := range k.churn {
		k.addChurn(i)
	}
	deadline := time.Now().Add(soakTime(t))
	var slowest time.Duration
	for time.Now().Before(deadline) {
		slot := k.rng.IntN(len(k.churn))
		g := k.churn[slot]
		switch r := k.rng.IntN(10); {
		case g == nil:
			k.addChurn(slot)
		case r < 5:
			k.send(g, 1+k.rng.IntN(40))
			g.fe.Receive(0)
			g.fe.PostRx(0, 8)
		case r < 7:
			k.quiesce() // a restart loses what its rings held: count it first
			g.fe.Reconnect()
			waitFor(t, g.name+" ready after a restart", func() bool { return portState(s, g.name) == "ready" })
			g.fe.PostRx(0, 64)
			k.stats["restart"]++
		case r < 8:
			k.quiesce()
			_ = g.fe.Close()
			g.fe = vhosttest.Dial(t, g.path)
			g.fe.Start(vhosttest.Options{Packed: k.rng.IntN(2) == 0})
			waitFor(t, g.name+" ready with a new front-end", func() bool { return portState(s, g.name) == "ready" })
			g.fe.PostRx(0, 64)
			k.stats["new front-end"]++
		default:
			k.delChurn(slot)
		}
		if d := exchange(t, k.a, k.b, 8); d > slowest {
			slowest = d
		}
		k.sent += 16
		if k.rng.IntN(20) == 0 {
			time.Sleep(5 * time.Millisecond) // let the workers fall asleep
		}
	}
	for i := range k.churn {
		if k.churn[i] != nil {
			k.delChurn(i)
		}
	}
	k.quiesce()
	var rx, tx, drops, flood uint64
	for _, p := range append(s.Stats(), k.gone...) {
		rx += p.RxPackets
		tx += p.TxPackets
		flood += p.FloodCopies
		for _, n := range p.Drops {
			drops += n
		}
	}
	t.Logf("soak: %v; %d frames sent, tx %d, drops %d, flood copies %d; slowest bystander exchange %v", k.stats, k.sent, tx, drops, flood, slowest)
	if rx != k.sent || rx+flood != tx+drops {
		t.Errorf("counters: sent %d, rx %d + flood %d != tx %d + drops %d", k.sent, rx, flood, tx, drops)
	}
	checkFDs(t, fds, "across the soak")
	for _, why := range mem.grownBeyond(heldMemory(t), 32<<10) {
		t.Error(why)
	}
}
