package vswitch

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtionet"
)

// Hostile notification fds: a front-end hands over a call eventfd on which
// the device's write blocks, or clears O_NONBLOCK on its kick eventfd. Either
// must stall at most that device's own interrupts: the worker it shares
// with a bystander pair keeps forwarding, the control path keeps
// answering.

// counter reads (and clears) an eventfd's counter, as the guest's side
// does; 0 means it was zero.
func counter(t *testing.T, fd int) uint64 {
	t.Helper()
	c, err := virtionet.ReadEventFD(fd)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// brokenFor waits for port name to be broken and checks that its detail
// says why.
func brokenFor(t *testing.T, s *Switch, name, why string) {
	t.Helper()
	waitFor(t, name+" broken", func() bool { return portState(s, name) == "broken" })
	for _, p := range s.Ports() {
		if p.Name == name && !strings.Contains(p.Detail, why) {
			t.Errorf("%s's detail %q does not say why (%q)", name, p.Detail, why)
		}
	}
}

// answers checks that the control path answers promptly.
func answers(t *testing.T, s *Switch) {
	t.Helper()
	done := make(chan ctl.Response, 1)
	go func() { done <- s.Handle(ctl.Request{Op: ctl.OpShowPorts}) }()
	select {
	case r := <-done:
		if r.Error != "" || len(r.Ports) == 0 {
			t.Fatalf("show ports: %+v", r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("show ports did not answer within 2s")
	}
}

// TestVhostStuckCallFD: a guest's front-end makes its TX call eventfd one
// the device's write blocks on (blocking, counter at the maximum). While
// the interrupt cannot be written, the bystander pair on the same worker
// keeps forwarding, the control path answers, and the stuck guest's own
// frames are still forwarded and counted; when the front-end reads its
// eventfd, the interrupt it was owed arrives. Left stuck, the device is
// broken, saying why, and nothing leaks.
func TestVhostStuckCallFD(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a, b := bystanders(t, s)
	bad := addGuest(t, s, "bad", 0x0252_5400_0bad, vhosttest.Options{})
	bad.fe.PostRx(0, 8)
	exchange(t, a, b, 32)
	fds, rss, gors := openFDs(t), rssKiB(t), runtime.NumGoroutine()
	quiet := exchange(t, a, b, 64)

	stuck := vhosttest.FullEventFD(t)
	bad.fe.MustAck(vhosttest.ReqSetVringCall, vhosttest.U64(1), stuck)
	const n = 20
	b.fe.PostRx(0, n+2)
	for i := 0; i < n; i++ {
		bad.fe.Send(0, bad.frameTo(b.mac, i))
	}
	got := b.receive(t, 0, n)
	for i := range got {
		if want := bad.frameTo(b.mac, i); string(got[i]) != string(want) {
			t.Fatalf("frame %d from the stuck guest: %q", i, got[i])
		}
	}
	waitFor(t, "the stuck guest's frames counted", func() bool { return portStats(s, "bad").RxPackets == n })
	during := exchange(t, a, b, 64)
	answers(t, s)
	if portState(s, "bad") != "ready" {
		t.Fatalf("bad is %s while its interrupt is pending", portState(s, "bad"))
	}
	t.Logf("bystander exchange of 2x64 frames: %v quiet, %v with a stuck call eventfd", quiet, during)

	// The front-end catches up: the device's write completes and the
	// guest gets the interrupt it was owed.
	if c := counter(t, stuck); c != 0xffff_ffff_ffff_fffe {
		t.Fatalf("stuck counter %#x", c)
	}
	var irq uint64
	waitFor(t, "the owed interrupt", func() bool { irq += counter(t, stuck); return irq > 0 })
	// The guest reaps, asks for the next interrupt (EVENT_IDX: when the
	// used index passes where it is) and sends again.
	rearm := func() {
		t.Helper()
		if _, err := bad.fe.TxRing(0).Reap(); err != nil {
			t.Fatal(err)
		}
		sp := bad.fe.TxRing(0).Split()
		sp.SetUsedEvent(sp.UsedIdx())
	}
	rearm()
	bad.fe.Send(0, bad.frameTo(b.mac, n))
	b.receive(t, 0, 1)
	waitFor(t, "the next interrupt", func() bool { return counter(t, stuck) > 0 })
	rearm()

	// Stuck for good: the device is broken with the reason.
	vhosttest.FillEventFD(t, stuck)
	bad.fe.Send(0, bad.frameTo(b.mac, n+1))
	b.receive(t, 0, 1)
	brokenFor(t, s, "bad", "call eventfd")
	exchange(t, a, b, 64)
	answers(t, s)
	balance(t, s)

	// Nothing leaks: a new session of the same guest brings the counts
	// back to where they were.
	unix.Close(stuck)
	bad.fe.Reconnect()
	waitFor(t, "bad ready again", func() bool { return portState(s, "bad") == "ready" })
	bad.fe.PostRx(0, 8)
	waitFor(t, "fds back", func() bool { return openFDs(t) == fds })
	waitFor(t, "goroutines back", func() bool { return runtime.NumGoroutine() <= gors })
	if now := rssKiB(t); now > rss+16<<10 {
		t.Errorf("RSS %d KiB -> %d KiB", rss, now)
	}
}

// TestVhostEventFDsOnly: a call fd that is not an eventfd (here a pipe, on
// which a write blocks once it is full) is refused: the device is broken
// with the reason, the bystanders forward, the control path answers.
func TestVhostEventFDsOnly(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a, b := bystanders(t, s)
	bad := addGuest(t, s, "bad", 0x0252_5400_0bad, vhosttest.Options{})
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	v, err := bad.fe.Ack(vhosttest.ReqSetVringCall, vhosttest.U64(1), p[1])
	if err != nil || v == 0 {
		t.Fatalf("SET_VRING_CALL with a pipe: status %d, %v; want a failure", v, err)
	}
	brokenFor(t, s, "bad", "not an eventfd")
	exchange(t, a, b, 64)
	answers(t, s)
}

// TestVhostKickFDBlocking: a front-end clears O_NONBLOCK on its kick
// eventfd after handing it over (the flag belongs to the open file both
// hold), then makes the sleeping worker drain that queue while the kick
// counter is zero. The drain must not block: the bystanders, on the same
// worker, keep forwarding.
func TestVhostKickFDBlocking(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1, IdleAfter: time.Millisecond})
	a, b := bystanders(t, s)
	bad := addGuest(t, s, "bad", 0x0252_5400_0bad, vhosttest.Options{})
	kick, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(kick)
	bad.fe.MustAck(vhosttest.ReqSetVringKick, vhosttest.U64(1), kick)
	if err := unix.SetNonblock(kick, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "bad ready", func() bool { return portState(s, "bad") == "ready" })
	// Let the worker fall asleep, then wake it through bad's TX queue's
	// state change (disabled, enabled again) with nothing kicked.
	sleeping(t, s)
	bad.fe.MustAck(vhosttest.ReqSetVringEnable, vhosttest.VringState(1, 0))
	bad.fe.MustAck(vhosttest.ReqSetVringEnable, vhosttest.VringState(1, 1))
	time.Sleep(20 * time.Millisecond)
	exchange(t, a, b, 64)
	answers(t, s)
}
