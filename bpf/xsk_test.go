package bpf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/xsk"
)

// Frames to a VM's MAC reach the AF_XDP socket in the rx queue's slot,
// byte for byte, while the host's own traffic on the same NIC still reaches
// the kernel and is answered; without the socket they go back to the kernel.
func TestSteerToAFXDPSocket(t *testing.T) {
	t.Parallel()
	require.Commands(t, "ping")
	l := newLab(t, Policy{Mode: ModeMAC})
	vm := randomVMMAC()
	if err := l.S.AddMAC(vm, 1); err != nil {
		t.Fatal(err)
	}
	ifc, err := net.InterfaceByName(l.Outer)
	if err != nil {
		t.Fatal(err)
	}
	u, err := xsk.NewUMEM(xsk.UMEMConfig{NumFrames: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	sock, err := u.Bind(ifc.Index, 0, xsk.SocketConfig{NoTX: true, RXSize: 128, FillSize: 128})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.S.SetSocket(0, sock.FD()); err != nil {
		t.Fatal(err)
	}
	if fd, ok := l.S.Socket(0); !ok || fd != sock.FD() {
		t.Fatalf("Socket(0) = %d, %t; want %d", fd, ok, sock.FD())
	}

	l.neigh(t, l.VMIP, vm.String())
	c0 := l.counters(t)
	const n = 5
	l.udp(t, l.VMIP+":4789", n)
	// The host keeps answering on the NIC meanwhile.
	l.ping(t, l.OuterIP, 2)

	var descs [xsk.MaxBurst]xsk.Desc
	got := 0
	inner := netns.MAC(t, l.NS, l.Inner)
	deadline := time.Now().Add(10 * time.Second) // bounds a hang only
	for got < n {
		k := sock.Receive(descs[:])
		for _, d := range descs[:k] {
			f := sock.Frame(d)
			if len(f) < 42 || !bytes.Equal(f[0:6], vm) || net.HardwareAddr(f[6:12]).String() != inner ||
				binary.BigEndian.Uint16(f[12:14]) != 0x0800 || f[23] != 17 ||
				binary.BigEndian.Uint16(f[36:38]) != 4789 || !bytes.Contains(f, []byte("xvswitch steering test")) {
				t.Errorf("unexpected frame on the socket: % x", f)
			}
			got++
		}
		sock.Release(descs[:k])
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d frames reached the socket; counters %+v", got, n, l.counters(t).Sub(c0))
			}
			_, _ = sock.Wait(100 * time.Millisecond)
		}
	}
	d := l.waitDelta(t, c0, Counters{Redirected: n, NotOwnedPassed: 2})
	if d.Redirected != n || d.NoSocketPassed != 0 {
		t.Fatalf("counters after %d frames to the VM MAC: %+v", n, d)
	}
	if k := sock.Receive(descs[:]); k != 0 {
		t.Fatalf("%d extra frames on the socket (the host's ping must not be steered)", k)
	}

	// Socket out of the slot: frames to the VM go back to the kernel.
	if err := l.S.RemoveSocket(0); err != nil {
		t.Fatal(err)
	}
	c1 := l.counters(t)
	l.udp(t, l.VMIP+":4789", 2)
	d = l.waitDelta(t, c1, Counters{NoSocketPassed: 2})
	if d.Redirected != 0 || d.NoSocketPassed != 2 {
		t.Fatalf("after RemoveSocket: %+v", d)
	}
	if k := sock.Receive(descs[:]); k != 0 {
		t.Fatalf("%d frames reached a socket no longer in the slot", k)
	}
}

// Each rx queue's frames go to the socket in that queue's slot: a 2-queue
// veth, one socket per queue on a shared UMEM, many flows (the namespace
// spreads them over its tx queues, which are the outer end's rx queues).
func TestSteerPerQueue(t *testing.T) {
	t.Parallel()
	if runtime.NumCPU() < 2 {
		require.SkipOrFail(t, "a 2-queue veth needs 2 CPUs")
	}
	l := newLabQueues(t, Policy{Mode: ModeMAC}, 2)
	vm := randomVMMAC()
	if err := l.S.AddMAC(vm, 1); err != nil {
		t.Fatal(err)
	}
	l.neigh(t, l.VMIP, vm.String())
	ifc, err := net.InterfaceByName(l.Outer)
	if err != nil {
		t.Fatal(err)
	}
	u, err := xsk.NewUMEM(xsk.UMEMConfig{NumFrames: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	var socks [2]*xsk.Socket
	for q := range socks {
		if socks[q], err = u.Bind(ifc.Index, q, xsk.SocketConfig{NoTX: true, RXSize: 128, FillSize: 128}); err != nil {
			t.Fatal(err)
		}
		if err := l.S.SetSocket(uint32(q), socks[q].FD()); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.S.Sockets(); len(got) != 2 || got[0] != socks[0].FD() || got[1] != socks[1].FD() {
		t.Fatalf("Sockets() = %v", got)
	}

	// flows sends one datagram from each of n fresh sockets (fresh source
	// ports and tx hashes) and returns how many each socket received.
	flows := func(n int) [2]int {
		t.Helper()
		c0 := l.counters(t)
		for range n {
			l.udp(t, l.VMIP+":4789", 1)
		}
		d := l.waitFor(t, c0, fmt.Sprintf("%d steered", n), func(d Counters) bool { return d.Steered() >= uint64(n) })
		if d.Steered() != uint64(n) {
			t.Fatalf("%d flows to the VM MAC, %d steered: %+v", n, d.Steered(), d)
		}
		var got [2]int
		var descs [xsk.MaxBurst]xsk.Desc
		deadline := time.Now().Add(10 * time.Second) // bounds a hang only
		for uint64(got[0]+got[1]) < d.Redirected {
			for q, s := range socks {
				k := s.Receive(descs[:])
				for _, dd := range descs[:k] {
					if f := s.Frame(dd); len(f) < 6 || !bytes.Equal(f[:6], vm) {
						t.Errorf("queue %d: unexpected frame % x", q, f)
					}
				}
				s.Release(descs[:k])
				got[q] += k
			}
			if time.Now().After(deadline) {
				t.Fatalf("sockets got %v of %d redirected", got, d.Redirected)
			}
		}
		if uint64(got[0]+got[1]) != d.Redirected {
			t.Fatalf("sockets got %v, program redirected %d", got, d.Redirected)
		}
		return got
	}

	const n = 32
	got := flows(n)
	t.Logf("%d flows over the two queues: %v", n, got)
	// 32 random flows all hashing to one queue: odds 2^-31.
	if got[0] == 0 || got[1] == 0 {
		t.Fatalf("all %d flows on one queue (%v): cannot tell the slots apart", n, got)
	}

	// Queue 1's slot emptied: its frames go to the kernel, queue 0's still
	// to its socket.
	if err := l.S.RemoveSocket(1); err != nil {
		t.Fatal(err)
	}
	c0 := l.counters(t)
	got = flows(n)
	d := l.counters(t).Sub(c0)
	if got[1] != 0 || uint64(got[0]) != d.Redirected || d.Redirected+d.NoSocketPassed != n {
		t.Fatalf("slot 1 empty: sockets got %v, counters %+v", got, d)
	}
}
