package bpf

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
)

// On a queue a VM owns, only frames to the owner's MAC go on to the
// socket; another VM's unicast, broadcast and multicast are passed and
// counted as owned_queue_passed, so nothing else is ever written into the
// owner's memory. Frames not steered at all are not affected. (Test runs
// arrive on rx queue 0.)
func TestOwnedQueueVerdicts(t *testing.T) {
	o := loaded(t)
	const ownerMAC, otherVM = vmMAC, "02:00:00:00:00:03"
	for _, m := range []string{ownerMAC, otherVM} {
		k, _ := macKey(mustMAC(m))
		if err := o.Macs.Update(&k, &steerXvsMacOwner{Port: 1}, ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	setCfg(t, o, Policy{Mode: ModeMAC, Broadcast: true, Multicast: true})
	setOwner := func(v steerXvsQueueOwner) {
		if err := o.QueueOwners.Update(uint32(0), &v, ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	owner, _ := macKey(mustMAC(ownerMAC))
	setOwner(steerXvsQueueOwner{Addr: owner.Addr, Owned: 1})
	type c = Counters
	for _, tc := range []struct {
		dst  string
		want Counters
	}{
		{ownerMAC, c{NoSocketPassed: 1}}, // to the socket (none in the slot here)
		{otherVM, c{OwnedQueuePassed: 1}},
		{bcastMAC, c{OwnedQueuePassed: 1, SteeredBroadcast: 1}},
		{mcastMAC, c{OwnedQueuePassed: 1, SteeredMulticast: 1}},
		{otherMAC, c{NotOwnedPassed: 1}}, // the host's: never steered
	} {
		before := readCounters(t, o)
		ret, err := o.XvsSteer.Run(&ebpf.RunOptions{Data: frameTo(tc.dst)})
		if err != nil {
			t.Fatal(err)
		}
		if ret != 2 {
			t.Errorf("owned queue, frame to %s: verdict %d, want XDP_PASS", tc.dst, ret)
		}
		if d := readCounters(t, o).Sub(before); d != tc.want {
			t.Errorf("owned queue, frame to %s: counted %+v, want %+v", tc.dst, d, tc.want)
		}
		if d := readCounters(t, o).Sub(before); d.Total() != 1 {
			t.Errorf("frame to %s counted %d times in the verdicts", tc.dst, d.Total())
		}
	}
	// Not owned any more: another VM's unicast is steered again.
	setOwner(steerXvsQueueOwner{})
	before := readCounters(t, o)
	if _, err := o.XvsSteer.Run(&ebpf.RunOptions{Data: frameTo(otherVM)}); err != nil {
		t.Fatal(err)
	}
	if d := readCounters(t, o).Sub(before); d != (c{NoSocketPassed: 1}) {
		t.Errorf("queue given back, frame to another VM: %+v", d)
	}
}

func TestQueueOwnerMap(t *testing.T) {
	t.Parallel()
	l := newLab(t, Policy{Mode: ModeMAC})
	if err := l.S.SetQueueOwner(MaxQueues, mustMAC(vmMAC)); !errors.Is(err, ErrQueue) {
		t.Errorf("SetQueueOwner(MaxQueues): %v, want ErrQueue", err)
	}
	if err := l.S.SetQueueOwner(1, mustMAC(bcastMAC)); !errors.Is(err, ErrMAC) {
		t.Errorf("SetQueueOwner(broadcast): %v, want ErrMAC", err)
	}
	if err := l.S.SetQueueOwner(1, mustMAC(vmMAC)); err != nil {
		t.Fatal(err)
	}
	got, err := l.S.QueueOwners()
	if err != nil || len(got) != 1 || got[1].String() != vmMAC {
		t.Fatalf("QueueOwners: %v %v, want queue 1 = %s", got, err, vmMAC)
	}
	if err := l.S.ClearQueueOwner(1); err != nil {
		t.Fatal(err)
	}
	if got, err := l.S.QueueOwners(); err != nil || len(got) != 0 {
		t.Fatalf("after ClearQueueOwner: %v %v", got, err)
	}
}
