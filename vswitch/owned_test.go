package vswitch

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/xsk"
)

// TestOwnedQueuesHandedOver: a VM that owns queue 0 of a 2-queue NIC
// takes it from the NIC port (the kernel lets another UMEM bind there),
// the NIC keeps forwarding through queue 1 (transmits that land on queue
// 0 leave through queue 1's socket), show ports says who owns what, and
// the queue comes back when the VM goes.
func TestOwnedQueuesHandedOver(t *testing.T) {
	require.Root(t)
	require.Commands(t, "ping")
	v1 := netns.NewVeth(t, netns.VethOptions{Queues: 2, InnerAddr: "10.92.0.1/24"})
	v2 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.92.0.2/24"})
	// What v1's host sends arrives on queue 1, the one the NIC port
	// keeps, except frames to the owner and to another VM, which go to
	// the owned queue 0.
	const ownerMAC, otherVM = "52:54:00:00:92:01", "52:54:00:00:92:02"
	v1.SteerQueues(t, map[string]int{ownerMAC: 0, otherVM: 0}, 1)
	s := startTestSwitch(t, Config{Workers: 1})
	for _, v := range []*netns.Veth{v1, v2} {
		if err := s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.removeAll)
	nic := s.byName[v1.Outer].drv.(*nicPort)
	slots := func() int { return len(nic.bound.steer.Sockets()) }
	if n := slots(); n != 2 {
		t.Fatalf("before: %d sockets in the XSKMAP, want 2", n)
	}
	if err := foreignBind(v1.Outer, 0); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("a second UMEM on a queue the NIC port holds: %v, want EBUSY", err)
	}

	spec, err := portspec.ParseVhost(filepath.Join(t.TempDir(), "vmown.sock") + ",mac=52:54:00:00:92:01,own=" + v1.Outer + ":0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddVhost(spec); err != nil {
		t.Fatal(err)
	}
	if n := slots(); n != 1 {
		t.Fatalf("owned: %d sockets in the XSKMAP, want 1 (queue 1)", n)
	}
	if _, ok := nic.bound.steer.Socket(0); ok {
		t.Fatal("the NIC port still has a socket in queue 0's slot")
	}
	if o, err := nic.bound.steer.QueueOwners(); err != nil || len(o) != 1 || o[0].String() != ownerMAC {
		t.Fatalf("the XDP program's queue owners: %v %v, want queue 0 = %s", o, err, ownerMAC)
	}
	if err := foreignBind(v1.Outer, 0); err != nil {
		t.Fatalf("binding another UMEM to the owned queue: %v", err)
	}
	// (foreignBind waits, as the switch does, for the kernel's deferred
	// release of a queue: bindQueue.)
	// A second VM cannot own the same queue.
	other, _ := portspec.ParseVhost(filepath.Join(t.TempDir(), "vmdup.sock") + ",mac=52:54:00:00:92:03,own=" + v1.Outer + ":0")
	if err := s.AddVhost(other); !errors.Is(err, ErrQueueOwned) {
		t.Fatalf("a second owner of queue 0: %v, want ErrQueueOwned", err)
	}
	details := map[string]string{}
	for _, p := range s.Ports() {
		details[p.Name] = p.Detail
	}
	if d := details[v1.Outer]; !strings.Contains(d, " owned=0=vmown") {
		t.Errorf("show ports, the NIC: %q lacks owned=0=vmown", d)
	}
	if d := details["vmown"]; !strings.Contains(d, " own="+v1.Outer+":0") {
		t.Errorf("show ports, the VM: %q lacks own=", d)
	}
	// Traffic between the NICs still flows: the single worker transmits
	// on queue 0 of each port, which for v1 means through queue 1's
	// socket; v1's host's frames are steered to queue 1. Counted from
	// here: frames sent to the port while AddVhost rebound its sockets
	// (v2's first IPv6 multicast, under load) are port_down by design
	// (docs/zerocopy.md).
	q0 := s.Stats()[0].Queues[0]
	if !pingUntil(v2.NS, "10.92.0.1", 5*time.Second) {
		t.Fatalf("ping across the switch with queue 0 owned: %+v", s.Stats())
	}
	if q := s.Stats()[0].Queues[0]; q.TxPackets == q0.TxPackets || q.Drops["port_down"] != q0.Drops["port_down"] {
		t.Errorf("v1 queue 0 (owned): %+v, before the ping %+v; want its transmits sent through queue 1's socket", q, q0)
	}
	// The XDP program lets only the owner's unicast onto the owned
	// queue's socket: frames to another VM there are passed to the
	// kernel and counted, never redirected (into the owner's memory,
	// once its socket sits there).
	other, _ = portspec.ParseVhost(filepath.Join(t.TempDir(), "vmother.sock") + ",mac=" + otherVM)
	if err := s.AddVhost(other); err != nil {
		t.Fatal(err)
	}
	v1.NS.MustRun(t, "arp", "-s", "10.92.0.51", ownerMAC)
	v1.NS.MustRun(t, "arp", "-s", "10.92.0.52", otherVM)
	k0 := s.Stats()[0].Kernel
	_ = v1.NS.Exec("ping", "-c", "2", "-i", "0.2", "-W", "1", "10.92.0.51").Run()
	_ = v1.NS.Exec("ping", "-c", "3", "-i", "0.2", "-W", "1", "10.92.0.52").Run()
	k1 := s.Stats()[0].Kernel
	if d := k1["xdp_owned_queue_passed"] - k0["xdp_owned_queue_passed"]; d != 3 {
		t.Errorf("frames to another VM on the owned queue: %d counted as owned_queue_passed, want 3", d)
	}
	// The owner's own frames pass the owner check; with no socket of the
	// owner's in the slot yet, they fall back to the kernel.
	if d := k1["xdp_no_socket_passed"] - k0["xdp_no_socket_passed"]; d != 2 {
		t.Errorf("frames to the owner on its queue: %d no_socket_passed, want 2", d)
	}
	balance(t, s) // while the VM ports, which counted floods to them as port_down, are there
	if err := s.DelPort("vmother"); err != nil {
		t.Fatal(err)
	}

	if err := s.DelPort("vmown"); err != nil {
		t.Fatal(err)
	}
	if n := slots(); n != 2 {
		t.Fatalf("after the owner left: %d sockets in the XSKMAP, want 2", n)
	}
	if o, err := nic.bound.steer.QueueOwners(); err != nil || len(o) != 0 {
		t.Fatalf("after the owner left, the XDP program's queue owners: %v %v", o, err)
	}
	if err := foreignBind(v1.Outer, 0); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("queue 0 given back: another UMEM there: %v, want EBUSY", err)
	}
	for _, p := range s.Ports() {
		if p.Name == v1.Outer && strings.Contains(p.Detail, "owned=") {
			t.Errorf("show ports after the owner left: %q", p.Detail)
		}
	}
	if !pingUntil(v2.NS, "10.92.0.1", 5*time.Second) {
		t.Fatalf("ping after the queue came back: %+v", s.Stats())
	}
}

// foreignBind binds a UMEM of its own to (ifname, queue) and closes it:
// the kernel allows one UMEM per queue, so it fails with EBUSY while
// another socket holds the queue.
func foreignBind(ifname string, queue int) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	u, err := xsk.NewUMEM(xsk.UMEMConfig{FrameSize: 2048, NumFrames: 64})
	if err != nil {
		return err
	}
	defer u.Close()
	_, err = bindQueue(u, ifi.Index, queue, xsk.SocketConfig{Mode: xsk.ModeCopy, Frames: 32, FillSize: 16, CompletionSize: 16, RXSize: 16, TXSize: 16})
	return err
}

// TestGivenBackQueueHeldElsewhere: when a VM gives its queue back but
// another AF_XDP socket (not the switch's) holds it by then, the NIC port
// goes on with its other queues instead of losing them all.
func TestGivenBackQueueHeldElsewhere(t *testing.T) {
	require.Root(t)
	require.Commands(t, "ping")
	v1 := netns.NewVeth(t, netns.VethOptions{Queues: 2, InnerAddr: "10.96.0.1/24"})
	v2 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.96.0.2/24"})
	v1.SteerQueues(t, nil, 1)
	s := startTestSwitch(t, Config{Workers: 1})
	for _, v := range []*netns.Veth{v1, v2} {
		if err := s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.removeAll)
	spec, err := portspec.ParseVhost(filepath.Join(t.TempDir(), "vmown.sock") + ",mac=52:54:00:00:96:01,own=" + v1.Outer + ":0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddVhost(spec); err != nil {
		t.Fatal(err)
	}
	ifi, err := net.InterfaceByName(v1.Outer)
	if err != nil {
		t.Fatal(err)
	}
	u, err := xsk.NewUMEM(xsk.UMEMConfig{FrameSize: 2048, NumFrames: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if _, err := bindQueue(u, ifi.Index, 0, xsk.SocketConfig{Mode: xsk.ModeCopy, Frames: 32, FillSize: 16, CompletionSize: 16, RXSize: 16, TXSize: 16}); err != nil {
		t.Fatalf("binding another UMEM to the owned queue: %v", err)
	}
	if err := s.DelPort("vmown"); err != nil {
		t.Fatal(err)
	}
	nic := s.byName[v1.Outer].drv.(*nicPort)
	if socks := nic.bound.steer.Sockets(); len(socks) != 1 {
		t.Fatalf("the NIC port's sockets: %v, want queue 1's alone", socks)
	}
	if !pingUntil(v2.NS, "10.96.0.1", 5*time.Second) {
		t.Fatalf("the NIC port stopped forwarding: %+v", s.Stats())
	}
}
