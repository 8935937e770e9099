package vswitch

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/xsk"
)

// ownedLab is a 2-queue veth NIC whose host's frames to the VM's MAC are
// steered to queue 1 (the rest to 0), and a guest (vhosttest) that owns
// queue 1.
type ownedLab struct {
	s   *Switch
	v   *netns.Veth
	g   *guest
	nic *nicPort
	// small: the guest's buffers are too small to be lent (copy path).
	small bool
}

const ownedVM = 0x5254_0000_9301

func newOwnedLab(t *testing.T) *ownedLab {
	t.Helper()
	return newOwnedLabOpts(t, vhosttest.Options{Packed: true})
}

func newOwnedLabOpts(t *testing.T, opts vhosttest.Options) *ownedLab {
	t.Helper()
	return newOwnedLabWith(t, opts, nil)
}

// newOwnedLabWith is newOwnedLabOpts with the VM port's spec changed by
// edit (nil: as it is).
func newOwnedLabWith(t *testing.T, opts vhosttest.Options, edit func(*portspec.Vhost)) *ownedLab {
	t.Helper()
	require.Root(t)
	require.Commands(t, "ping", "arp")
	l := &ownedLab{v: netns.NewVeth(t, netns.VethOptions{Queues: 2, InnerAddr: "10.94.0.1/24"})}
	l.v.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	vmMAC := macBytes(ownedVM).String()
	l.v.SteerQueues(t, map[string]int{vmMAC: 1}, 0)
	l.v.NS.MustRun(t, "arp", "-s", "10.94.0.9", vmMAC)
	l.s = startTestSwitch(t, Config{Workers: 1})
	if err := l.s.AddNIC(portspec.NIC{Name: l.v.Outer, Ifname: l.v.Outer, Mode: portspec.ModeCopy}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.s.removeAll)
	l.nic = l.s.byName[l.v.Outer].drv.(*nicPort)
	spec := portspec.Vhost{Name: "vmz", MAC: vmMAC, Own: &portspec.Own{Ifname: l.v.Outer, Queues: []int{1}}}
	if edit != nil {
		edit(&spec)
	}
	l.g = addGuestSpec(t, l.s, spec, ownedVM, opts)
	l.small = opts.BufSize != 0 && opts.BufSize < lendMin
	return l
}

// ownerGen is the memory generation the owner's sockets are bound for (0:
// none), and whether they are.
func (l *ownedLab) ownerGen() uint64 {
	o := l.s.byName["vmz"].drv.(*vhostPort).owner
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gen
}

// zc is the zero-copy state of the owner's socket on queue 1.
func (l *ownedLab) zc() *zcRx {
	o := l.s.byName["vmz"].drv.(*vhostPort).owner
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.zc[1]
}

// lending reports whether the owner's sockets are bound and lend the
// guest's buffers.
func (l *ownedLab) lending() bool {
	o := l.s.byName["vmz"].drv.(*vhostPort).owner
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gen != 0 && len(o.zc) > 0
}

// send has the NIC's host send n echo requests to the VM's address (they
// go unanswered: the guest is a test front-end) and checks the guest
// received them.
func (l *ownedLab) send(t *testing.T, n int) {
	t.Helper()
	l.g.fe.PostRx(0, n)
	if l.lending() && l.small {
		// The worker finds the buffers too small at its next poll (the
		// timer's, 10 ms): only then does the copy path fill the ring.
		z := l.zc()
		waitFor(t, "the buffers found too small", func() bool { return z.unfit.Load() })
	}
	if l.lending() && !l.small {
		// The zero-copy path lends them to the kernel at the worker's
		// next poll (at most its idle timeout away): only then can the
		// frames land in them.
		rx := l.s.byName["vmz"].drv.(*vhostPort).dev.RxQueue(0).Receiver()
		waitFor(t, "the guest's buffers lent", func() bool { return rx.Lent() >= n })
	}
	before := l.s.Stats()[0].Queues[1].RxPackets
	_ = l.v.NS.Exec("ping", "-c", strconv.Itoa(n), "-i", "0.1", "-W", "1", "10.94.0.9").Run()
	got := l.g.receive(t, 0, n)
	for _, f := range got {
		if !bytes.Equal(f[:6], macBytes(ownedVM)) {
			t.Fatalf("the guest got a frame to %x", f[:6])
		}
	}
	if d := l.s.Stats()[0].Queues[1].RxPackets - before; d != uint64(n) {
		t.Errorf("NIC queue 1 received %d frames, want the %d steered there", d, n)
	}
}

// TestOwnedQueueOnGuestMemory: a VM owning queue 1 gets a socket there on
// a UMEM over its own memory (the switch's area in front), its steered
// frames arrive through it straight into its RX buffers (zero-copy), and
// a memory table replaced under it rebuilds the sockets on the new range.
func TestOwnedQueueOnGuestMemory(t *testing.T) {
	l := newOwnedLab(t)
	waitFor(t, "the owner's sockets", func() bool { return l.ownerGen() != 0 })
	gen := l.ownerGen()
	if _, ok := l.nic.bound.steer.Socket(1); !ok {
		t.Fatal("queue 1's slot is empty")
	}
	if l.nic.bound.socks[1] != nil {
		t.Fatal("the NIC port kept a socket of its own on the owned queue")
	}
	l.send(t, 4)
	k := l.s.Stats()[0].Kernel
	if k["xdp_no_socket_passed"] != 0 || k["xdp_owned_queue_passed"] != 0 {
		t.Errorf("kernel counters %v: the owner's frames should all be redirected", k)
	}

	// The front-end replaces its memory table: the sockets on the old
	// range are closed before vhost unmaps it, new ones are bound on the
	// new range, and frames arrive again.
	l.g.fe.SetMemTable()
	waitFor(t, "sockets on the new memory table", func() bool { g := l.ownerGen(); return g != 0 && g != gen })
	l.send(t, 3)
	balance(t, l.s)
	// The guest's buffers are 2048 bytes (>= 1536): the kernel wrote
	// every frame into them and the switch copied nothing.
	pc := portStats(l.s, "vmz")
	if pc.ZerocopyFrames != 7 || pc.CopiedFrames != 0 || pc.CopiedBytes != 0 || pc.TxPackets != 7 {
		t.Errorf("vmz path counters %+v (tx %d frames, %d bytes): want all 7 zero-copy, nothing copied", pc.PathCounters, pc.TxPackets, pc.TxBytes)
	}
}

// TestOwnedQueueRegistrationRefused: when the VM's memory cannot be
// registered (here as the kernel refuses it without enough locked
// memory), the queue goes back to the NIC port, whose own socket carries
// the VM's frames on the copy path; show ports says so.
func TestOwnedQueueRegistrationRefused(t *testing.T) {
	old := registerOwnerUMEM
	registerOwnerUMEM = func(mem []byte, cfg xsk.UMEMConfig) (*xsk.UMEM, error) {
		return nil, &xsk.MemlockError{Need: uint64(len(mem)), Limit: 1 << 20, Errno: errors.New("no buffer space available")}
	}
	t.Cleanup(func() { registerOwnerUMEM = old })
	l := newOwnedLab(t)
	waitFor(t, "the queue given back to the NIC port", func() bool {
		l.s.mu.Lock()
		defer l.s.mu.Unlock()
		return l.nic.bound.socks[1] != nil
	})
	if l.ownerGen() != 0 {
		t.Fatal("owner sockets despite the refusal")
	}
	if d := l.s.Ports()[0].Detail; !strings.Contains(d, "owned=1=vmz(copy)") {
		t.Errorf("show ports: %q, want owned=1=vmz(copy)", d)
	}
	if o, _ := l.nic.bound.steer.QueueOwners(); len(o) != 0 {
		t.Errorf("the XDP program still treats queue 1 as owned: %v", o)
	}
	l.send(t, 3)
	balance(t, l.s)
}

// TestOwnedQueueMemoryReplacedUnderTraffic: the front-end replaces its
// memory table three times while frames for it pour in on its queue.
// Each time the sockets are rebuilt, and every frame the namespace sent is
// accounted for: the XDP program saw each once; each redirected one was
// received by the switch, dropped by the socket (AF_XDP statistics) or
// left in a closing socket (owner_rx_discarded); the switch's counters
// balance.
func TestOwnedQueueMemoryReplacedUnderTraffic(t *testing.T) {
	l := newOwnedLab(t)
	waitFor(t, "the owner's sockets", func() bool { return l.ownerGen() != 0 })
	verdicts := []string{"xdp_redirected", "xdp_no_socket_passed", "xdp_bad_queue_passed", "xdp_not_owned_passed",
		"xdp_short_passed", "xdp_host_arp_passed", "xdp_host_nd_passed", "xdp_owned_queue_passed"}
	sum := func(k map[string]uint64, keys ...string) (n uint64) {
		for _, key := range keys {
			n += k[key]
		}
		return n
	}
	k0, q0, tx0 := l.s.Stats()[0].Kernel, l.s.Stats()[0].Queues[1].RxPackets, innerTx(t, l.v)
	ping := l.v.NS.Exec("ping", "-q", "-i", "0.002", "-c", "800", "-w", "3", "10.94.0.9")
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	gens := map[uint64]bool{}
	l.g.fe.PostRx(0, 128)
	empty := 0
	for i := 0; i < 40; i++ {
		back := 0
		for _, r := range l.g.fe.Receive(0) {
			back += max(int(r.NumBuffers), 1)
		}
		// Buffers lent to the kernel come back empty when the sockets
		// close for a new table: posted again like the rest.
		e := l.g.fe.EmptyRx(0)
		back += e - empty
		empty = e
		l.g.fe.PostRx(0, back)
		if i%10 == 5 {
			gens[l.ownerGen()] = true
			l.g.fe.SetMemTable()
		}
		time.Sleep(30 * time.Millisecond)
	}
	_ = ping.Wait()
	waitFor(t, "the sockets on the last table", func() bool { return l.ownerGen() != 0 })
	gens[l.ownerGen()] = true
	if len(gens) < 3 {
		t.Errorf("socket generations seen: %v, want the tables replaced under traffic", gens)
	}
	sent := innerTx(t, l.v) - tx0
	time.Sleep(200 * time.Millisecond)
	st := l.s.Stats()[0]
	k := st.Kernel
	seen := sum(k, verdicts...) - sum(k0, verdicts...)
	if seen != sent {
		t.Errorf("the namespace sent %d frames, the XDP program counted %d: %v", sent, seen, k)
	}
	redirected := k["xdp_redirected"] - k0["xdp_redirected"]
	received := st.Queues[1].RxPackets - q0
	lost := sum(k, "af_xdp_rx_dropped", "af_xdp_rx_ring_full", "owner_rx_discarded") -
		sum(k0, "af_xdp_rx_dropped", "af_xdp_rx_ring_full", "owner_rx_discarded")
	if redirected != received+lost {
		t.Errorf("redirected %d != received %d + dropped or discarded by the sockets %d: %v", redirected, received, lost, k)
	}
	pc := portStats(l.s, "vmz")
	t.Logf("sent %d: redirected %d (received %d, socket drops/discarded %d), passed while unbound %d; vmz: %d zero-copy, %d copied, %d lent buffers returned empty",
		sent, redirected, received, lost, k["xdp_no_socket_passed"]-k0["xdp_no_socket_passed"], pc.ZerocopyFrames, pc.CopiedFrames, empty)
	if pc.ZerocopyFrames == 0 {
		t.Errorf("no frame took the zero-copy path: %+v", pc.PathCounters)
	}
	balance(t, l.s)
}

// innerTx is the frames the veth's inner end has sent.
func innerTx(t *testing.T, v *netns.Veth) uint64 {
	t.Helper()
	// ip netns exec mounts the namespace's own /sys.
	out := v.NS.MustRun(t, "cat", "/sys/class/net/"+v.Inner+"/statistics/tx_packets")
	n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOwnedQueueNICRecreated: the NIC is deleted and made again under its
// name; when the NIC port re-attaches, the owner's sockets are bound again
// into the new interface's slot and queue, and its frames arrive again.
func TestOwnedQueueNICRecreated(t *testing.T) {
	old := nicCheckInterval
	nicCheckInterval = 100 * time.Millisecond
	t.Cleanup(func() { nicCheckInterval = old })
	l := newOwnedLab(t)
	waitFor(t, "the owner's sockets", func() bool { return l.ownerGen() != 0 })
	l.send(t, 2)
	l.v.Delete(t)
	opts := netns.VethOptions{Queues: 2, InnerAddr: "10.94.0.1/24"}
	l.v.Create(t, opts)
	l.v.SteerQueues(t, map[string]int{macBytes(ownedVM).String(): 1}, 0)
	l.v.NS.MustRun(t, "arp", "-s", "10.94.0.9", macBytes(ownedVM).String())
	waitFor(t, "the NIC port re-attached with the owner's socket in queue 1's slot", func() bool {
		l.s.mu.Lock()
		defer l.s.mu.Unlock()
		if l.nic.bound == nil {
			return false
		}
		_, ok := l.nic.bound.steer.Socket(1)
		return ok
	})
	l.send(t, 3)
	balance(t, l.s)
}

// TestOwnedQueueSmallBuffers: a guest whose receive buffers are smaller
// than frame_len + 12 (1024 bytes here) gets none lent: its frames on the
// owned queue land in the switch's area and are copied, as the path
// counters say.
func TestOwnedQueueSmallBuffers(t *testing.T) {
	l := newOwnedLabOpts(t, vhosttest.Options{Packed: true, BufSize: 1024})
	waitFor(t, "the owner's sockets", func() bool { return l.ownerGen() != 0 })
	l.send(t, 4)
	balance(t, l.s)
	pc := portStats(l.s, "vmz")
	if pc.ZerocopyFrames != 0 || pc.CopiedFrames != 4 || pc.CopiedBytes != pc.TxBytes {
		t.Errorf("vmz path counters %+v (tx %d frames, %d bytes): want all 4 copied", pc.PathCounters, pc.TxPackets, pc.TxBytes)
	}
	if rx := l.s.byName["vmz"].drv.(*vhostPort).dev.RxQueue(0).Receiver(); rx.Lent() != 0 {
		t.Errorf("%d buffers of 1024 bytes lent", rx.Lent())
	}
}

// TestOwnedQueueFewBuffersFlood: a guest posting fewer buffers than its
// ring holds (100 of 256, as DPDK's testpmd posts 512 of any ring) gets
// all but a burst of them lent; the burst kept back receives the frames
// the switch copies to it, here broadcasts from the NIC, which found no
// buffer when every posted one was lent.
func TestOwnedQueueFewBuffersFlood(t *testing.T) {
	l := newOwnedLab(t)
	waitFor(t, "the owner's sockets", func() bool { return l.ownerGen() != 0 })
	const posted = 100
	l.g.fe.PostRx(0, posted)
	rx := l.s.byName["vmz"].drv.(*vhostPort).dev.RxQueue(0).Receiver()
	// The worker lends at most two bursts per poll and sleeps when idle;
	// the guest's posting does not wake it, a frame landing in a lent
	// buffer does. So unicast frames to the VM, one at a time, until all
	// but a burst of what is left posted is lent (with every posted buffer
	// lent, as before the keep, this never holds).
	waitFor(t, "the first buffers lent", func() bool { return rx.Lent() >= 1 })
	used := 0
	settled := func() bool {
		for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if rx.Lent() == posted-used-lendKeep {
				return true
			}
		}
		return false
	}
	for !settled() {
		if used == 6 {
			t.Fatalf("%d of %d buffers lent after %d frames, want all but %d", rx.Lent(), posted-used, used, lendKeep)
		}
		_ = l.v.NS.Exec("ping", "-c", "1", "-W", "1", "10.94.0.9").Run()
		l.g.receive(t, 0, 1)
		used++
	}
	time.Sleep(50 * time.Millisecond) // a few more polls: it lends no more
	if n := rx.Lent(); n != posted-used-lendKeep {
		t.Fatalf("%d of %d buffers lent, want all but %d", n, posted-used, lendKeep)
	}
	const pings = 3
	_ = l.v.NS.Exec("ping", "-b", "-c", strconv.Itoa(pings), "-i", "0.1", "-W", "1", "10.94.0.255").Run()
	peer, err := net.ParseMAC(netns.MAC(t, l.v.NS, l.v.Inner))
	if err != nil {
		t.Fatal(err)
	}
	got := l.g.receiveFrom(t, 0, pings, MACKey(peer))
	for _, f := range got {
		if !bytes.Equal(f[:6], bytes.Repeat([]byte{0xff}, 6)) {
			t.Fatalf("the guest got a frame to %x, want the broadcasts", f[:6])
		}
	}
	balance(t, l.s)
	if pc := portStats(l.s, "vmz"); pc.CopiedFrames != pings || pc.ZerocopyFrames != uint64(used) {
		t.Errorf("vmz path counters %+v: want the %d broadcasts copied, the %d unicast zero-copy", pc.PathCounters, pings, used)
	}
}
