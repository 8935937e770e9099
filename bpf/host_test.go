package bpf

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/xsk"
)

// rxSocket binds an RX-only AF_XDP socket to queue 0 of the lab's NIC and
// puts it in slot 0.
func (l *lab) rxSocket(t *testing.T) *xsk.Socket {
	t.Helper()
	ifc, err := net.InterfaceByName(l.Outer)
	if err != nil {
		t.Fatal(err)
	}
	u, err := xsk.NewUMEM(xsk.UMEMConfig{NumFrames: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	sock, err := u.Bind(ifc.Index, 0, xsk.SocketConfig{NoTX: true, RXSize: 128, FillSize: 128})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.S.SetSocket(0, sock.FD()); err != nil {
		t.Fatal(err)
	}
	return sock
}

// awaitFrame reads the socket until a frame satisfies match (other frames,
// e.g. the namespace's IPv6 chatter, are skipped). The deadline only
// bounds a hang.
func awaitFrame(t *testing.T, sock *xsk.Socket, what string, match func([]byte) bool) {
	t.Helper()
	var descs [xsk.MaxBurst]xsk.Desc
	deadline := time.Now().Add(10 * time.Second)
	for {
		k := sock.Receive(descs[:])
		found := false
		for _, d := range descs[:k] {
			found = found || match(sock.Frame(d))
		}
		sock.Release(descs[:k])
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the socket never received %s", what)
		}
		if k == 0 {
			_, _ = sock.Wait(100 * time.Millisecond)
		}
	}
}

// isARPRequestFor says whether f is a broadcast ARP request for ip.
func isARPRequestFor(f []byte, ip string) bool {
	return len(f) >= 42 && bytes.Equal(f[:6], mustMAC(bcastMAC)) &&
		binary.BigEndian.Uint16(f[12:]) == 0x0806 && binary.BigEndian.Uint16(f[20:]) == 1 &&
		net.IP(f[38:42]).Equal(net.ParseIP(ip))
}

// randomULA is a random /64 of the unique local range, as "fdxx:...:".
func randomULA() string {
	var b [7]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("fd%02x:%02x%02x:%02x%02x:%02x%02x::", b[0], b[1], b[2], b[3], b[4], b[5], b[6])
}

// awaitHostAddrs waits until HostAddrs satisfies ok (the tracker follows
// netlink notifications in its own goroutine); the deadline only bounds a
// hang: the notification is immediate.
func awaitHostAddrs(t *testing.T, s *Steering, what string, ok func([]net.IP) bool) []net.IP {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		addrs, err := s.HostAddrs()
		if err != nil {
			t.Fatal(err)
		}
		if ok(addrs) {
			return addrs
		}
		if time.Now().After(deadline) {
			t.Fatalf("host addresses never %s: %v", what, addrs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hasIP(addrs []net.IP, ip string) bool {
	return slices.ContainsFunc(addrs, func(a net.IP) bool { return a.Equal(net.ParseIP(ip)) })
}

// neighLLAddr is the namespace's resolved MAC for ip ("" if unresolved).
func (l *lab) neighLLAddr(t *testing.T, ip string) string {
	t.Helper()
	out := l.NS.MustRun(t, "ip", "-j", "neigh", "show", ip, "dev", l.Inner)
	var n []struct {
		LLAddr string   `json:"lladdr"`
		State  []string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		t.Fatalf("ip -j neigh show %s: %v\n%s", ip, err, out)
	}
	if len(n) != 1 || slices.Contains(n[0].State, "FAILED") || slices.Contains(n[0].State, "INCOMPLETE") {
		return ""
	}
	return n[0].LLAddr
}

// The switch's setting: MAC policy with broadcast and multicast steered to
// an AF_XDP socket. With the host's addresses tracked, a peer resolves
// them (ARP, IPv6 neighbour discovery) and the host answers, while a
// broadcast ARP for a VM's address still reaches the switch; addresses
// added and removed at runtime follow.
func TestHostAddrsResolvableWhileGroupsSteered(t *testing.T) {
	t.Parallel()
	require.Commands(t, "ping", "bpftool")
	l := newLab(t, Policy{Mode: ModeMAC, Broadcast: true, Multicast: true})
	// This test wants IPv6 on the wire (newLab turns it off in the namespace).
	l.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=0")
	l.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf."+l.Inner+".disable_ipv6=0")
	ula := randomULA()
	outer6, inner6 := ula+"1", ula+"2"
	netns.MustRun(t, "ip", "addr", "add", outer6+"/64", "dev", l.Outer, "nodad")
	l.NS.MustRun(t, "ip", "addr", "add", inner6+"/64", "dev", l.Inner, "nodad")
	sock := l.rxSocket(t)

	// The problem, before the host's addresses are known: a broadcast ARP
	// request for the host's address goes to the switch, and the host
	// never answers.
	l.NS.MustRun(t, "ip", "neigh", "flush", "dev", l.Inner)
	_ = l.NS.Exec("ping", "-c", "1", "-W", "1", l.OuterIP).Run()
	awaitFrame(t, sock, "the ARP request for the host's address (no host addresses yet)", func(f []byte) bool {
		return isARPRequestFor(f, l.OuterIP)
	})

	if err := l.S.TrackHostAddrs(t.Context()); err != nil {
		t.Fatal(err)
	}
	// TrackHostAddrs returned: the current addresses are in the maps.
	addrs, err := l.S.HostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	if !hasIP(addrs, l.OuterIP) || !hasIP(addrs, outer6) {
		t.Fatalf("host addresses %v lack %s or %s", addrs, l.OuterIP, outer6)
	}
	// The link-local address too (it may appear a moment after the link
	// came up: the tracker adds it then).
	var ll string
	awaitHostAddrs(t, l.S, "had a link-local address", func(a []net.IP) bool {
		for _, ip := range a {
			if ip.IsLinkLocalUnicast() {
				ll = ip.String()
				return true
			}
		}
		return false
	})

	// IPv4: ARP resolves the host's address and the host answers.
	l.NS.MustRun(t, "ip", "neigh", "flush", "dev", l.Inner)
	c0 := l.counters(t)
	l.ping(t, l.OuterIP, 2)
	d := l.waitDelta(t, c0, Counters{HostARPPassed: 1})
	if got := l.neighLLAddr(t, l.OuterIP); got != l.OuterMAC {
		t.Errorf("namespace resolved %s to %q, want %s", l.OuterIP, got, l.OuterMAC)
	}
	t.Logf("ping %s after neigh flush: %+v", l.OuterIP, d)

	// IPv6: neighbour discovery resolves the host's address (global and
	// link-local) and the host answers.
	for _, ip := range []string{outer6, ll + "%" + l.Inner} {
		l.NS.MustRun(t, "ip", "-6", "neigh", "flush", "dev", l.Inner)
		c0 = l.counters(t)
		out := l.NS.MustRun(t, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "5", ip)
		if !strings.Contains(out, "2 received") {
			t.Fatalf("ping -6 %s: not every echo answered:\n%s", ip, out)
		}
		d = l.waitDelta(t, c0, Counters{HostNDPassed: 1})
		if got := l.neighLLAddr(t, strings.Split(ip, "%")[0]); got != l.OuterMAC {
			t.Errorf("namespace resolved %s to %q, want %s", ip, got, l.OuterMAC)
		}
		t.Logf("ping -6 %s after neigh flush: %+v", ip, d)
	}

	// A broadcast ARP request for a VM's address is still the switch's.
	l.NS.MustRun(t, "ip", "neigh", "flush", "dev", l.Inner)
	c0 = l.counters(t)
	l.udp(t, l.VMIP+":9", 1)
	awaitFrame(t, sock, "the ARP request for the VM's address", func(f []byte) bool {
		return isARPRequestFor(f, l.VMIP)
	})
	if d = l.waitDelta(t, c0, Counters{Redirected: 1, SteeredBroadcast: 1}); d.HostARPPassed != 0 {
		t.Errorf("an ARP request for a VM's address passed as the host's: %+v", d)
	}

	// bpftool prints the maps with named fields and the addresses byte
	// by byte.
	checkHostDump(t, l, "host_v4", l.OuterIP, l.S.Ifindex())
	checkHostDump(t, l, "host_v6", outer6, l.S.Ifindex())

	// Addresses added and removed at runtime follow, and the program
	// uses them: a peer resolves the new address.
	extra4, extra6 := l.Net+".77", ula+"77"
	netns.MustRun(t, "ip", "addr", "add", extra4+"/32", "dev", l.Outer)
	netns.MustRun(t, "ip", "addr", "add", extra6+"/128", "dev", l.Outer, "nodad")
	awaitHostAddrs(t, l.S, "gained "+extra4+" and "+extra6, func(a []net.IP) bool { return hasIP(a, extra4) && hasIP(a, extra6) })
	c0 = l.counters(t)
	l.ping(t, extra4, 1)
	out := l.NS.MustRun(t, "ping", "-6", "-c", "1", "-W", "5", extra6)
	if !strings.Contains(out, "1 received") {
		t.Fatalf("ping -6 %s:\n%s", extra6, out)
	}
	l.waitDelta(t, c0, Counters{HostARPPassed: 1, HostNDPassed: 1})
	netns.MustRun(t, "ip", "addr", "del", extra4+"/32", "dev", l.Outer)
	netns.MustRun(t, "ip", "addr", "del", extra6+"/128", "dev", l.Outer)
	addrs = awaitHostAddrs(t, l.S, "lost "+extra4+" and "+extra6, func(a []net.IP) bool { return !hasIP(a, extra4) && !hasIP(a, extra6) })
	if !hasIP(addrs, l.OuterIP) || !hasIP(addrs, outer6) || !hasIP(addrs, ll) {
		t.Fatalf("after removing the extra addresses: %v", addrs)
	}
}

// checkHostDump reads a host address map with bpftool and finds ip in it,
// byte by byte, with the index of the interface it is on beside it.
func checkHostDump(t *testing.T, l *lab, name, ip string, ifindex int) {
	t.Helper()
	out := netns.MustRun(t, "bpftool", "-j", "map", "dump", "pinned", filepath.Join(l.S.PinDir(), name))
	var dump []struct {
		Formatted struct {
			Key struct {
				Addr []byte `json:"addr"`
			} `json:"key"`
			Value struct {
				Ifindex int `json:"ifindex"`
			} `json:"value"`
		} `json:"formatted"`
	}
	if err := json.Unmarshal([]byte(out), &dump); err != nil {
		t.Fatalf("bpftool dump of %s: %v\n%s", name, err, out)
	}
	want := net.ParseIP(ip)
	if w4 := want.To4(); w4 != nil {
		want = w4
	}
	found := false
	for _, e := range dump {
		if bytes.Equal(e.Formatted.Key.Addr, want) && e.Formatted.Value.Ifindex == ifindex {
			found = true
		}
	}
	if !found {
		t.Errorf("bpftool dump of %s lacks %s on ifindex %d:\n%s", name, ip, ifindex, out)
	}
	plain := netns.MustRun(t, "bpftool", "map", "dump", "pinned", filepath.Join(l.S.PinDir(), name))
	if !strings.Contains(plain, `"addr": [`) || !strings.Contains(plain, `"ifindex": `) {
		t.Errorf("plain dump of %s does not name its fields:\n%s", name, plain)
	}
}

// pingAfterFlush pings ip from the namespace after flushing its neighbour
// entries, so the ping starts with a broadcast ARP request, and returns
// the counters' delta once the program saw that request pass as the
// host's.
func (l *lab) pingAfterFlush(t *testing.T, ip string) Counters {
	t.Helper()
	l.NS.MustRun(t, "ip", "neigh", "flush", "all")
	c0 := l.counters(t)
	l.ping(t, ip, 2)
	return l.waitDelta(t, c0, Counters{HostARPPassed: 1})
}

func ifindex(t *testing.T, name string) int {
	t.Helper()
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return ifc.Index
}

// Addresses of devices stacked on the NIC are the host's too, tracked as
// they come and go: a macvlan and a VLAN device on it (whose ARP arrives
// tagged) and the bridge it becomes a port of.
func TestHostAddrsOfStackedDevices(t *testing.T) {
	t.Parallel()
	require.Commands(t, "ping", "ethtool", "bpftool")
	l := newLab(t, Policy{Mode: ModeMAC, Broadcast: true, Multicast: true})
	l.rxSocket(t)
	if err := l.S.TrackHostAddrs(t.Context()); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	vnet := fmt.Sprintf("10.%d.%d", 128+int(b[0])%32, b[1])
	bnet := fmt.Sprintf("10.%d.%d", 96+int(b[2])%32, b[3])
	mnet := fmt.Sprintf("10.%d.%d", 64+int(b[0])%32, b[1])

	// A macvlan device on the NIC: broadcast ARP for its address arrives
	// through the NIC.
	mv := l.Outer + "m"
	netns.MustRun(t, "ip", "link", "add", "link", l.Outer, "name", mv, "type", "macvlan", "mode", "bridge")
	netns.MustRun(t, "ip", "addr", "add", mnet+".1/24", "dev", mv)
	netns.MustRun(t, "ip", "link", "set", mv, "up")
	l.NS.MustRun(t, "ip", "addr", "add", mnet+".2/24", "dev", l.Inner)
	awaitHostAddrs(t, l.S, "gained the macvlan's "+mnet+".1", func(a []net.IP) bool { return hasIP(a, mnet+".1") })
	checkHostDump(t, l, "host_v4", mnet+".1", ifindex(t, mv))
	t.Logf("ping to the macvlan: %+v", l.pingAfterFlush(t, mnet+".1"))
	// Gone (and out of the way: a NIC with a macvlan cannot be a bridge
	// port), its address is not the host's on this NIC any more.
	netns.MustRun(t, "ip", "link", "del", mv)
	awaitHostAddrs(t, l.S, "lost the macvlan's "+mnet+".1", func(a []net.IP) bool { return !hasIP(a, mnet+".1") })

	// VLAN 100 on both ends, where the kernel has 802.1Q; the namespace
	// puts tags in the frame (no tx VLAN offload), so the program sees
	// them.
	vo, vi := l.Outer+".1", l.Inner+".1"
	if out, err := exec.Command("ip", "link", "add", "link", l.Outer, "name", vo, "type", "vlan", "id", "100").CombinedOutput(); err != nil {
		t.Logf("no VLAN devices here (%v: %s): tagged ARP is covered by TestProgramHostVerdicts only", err, bytes.TrimSpace(out))
		vo = ""
	} else {
		netns.MustRun(t, "ip", "addr", "add", vnet+".1/24", "dev", vo)
		netns.MustRun(t, "ip", "link", "set", vo, "up")
		l.NS.MustRun(t, "ethtool", "-K", l.Inner, "txvlan", "off")
		l.NS.MustRun(t, "ip", "link", "add", "link", l.Inner, "name", vi, "type", "vlan", "id", "100")
		l.NS.MustRun(t, "ip", "addr", "add", vnet+".2/24", "dev", vi)
		l.NS.MustRun(t, "ip", "link", "set", vi, "up")
		awaitHostAddrs(t, l.S, "gained the VLAN device's "+vnet+".1", func(a []net.IP) bool { return hasIP(a, vnet+".1") })
		checkHostDump(t, l, "host_v4", vnet+".1", ifindex(t, vo))
		t.Logf("ping over VLAN 100: %+v", l.pingAfterFlush(t, vnet+".1"))
	}

	// The NIC becomes a bridge port; the bridge's address is the host's.
	br := netns.UniqueName("xvb")
	netns.MustRun(t, "ip", "link", "add", br, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", br).Run() })
	netns.MustRun(t, "ip", "link", "set", l.Outer, "master", br)
	netns.MustRun(t, "ip", "addr", "add", bnet+".1/24", "dev", br)
	netns.MustRun(t, "ip", "link", "set", br, "up")
	l.NS.MustRun(t, "ip", "addr", "add", bnet+".2/24", "dev", l.Inner)
	awaitHostAddrs(t, l.S, "gained the bridge's "+bnet+".1", func(a []net.IP) bool { return hasIP(a, bnet+".1") })
	checkHostDump(t, l, "host_v4", bnet+".1", ifindex(t, br))
	t.Logf("ping to the bridge: %+v", l.pingAfterFlush(t, bnet+".1"))

	// Out of the bridge and without the VLAN, their addresses are not the
	// host's on this NIC any more.
	netns.MustRun(t, "ip", "link", "set", l.Outer, "nomaster")
	if vo != "" {
		netns.MustRun(t, "ip", "link", "del", vo)
	}
	addrs := awaitHostAddrs(t, l.S, "lost the stacked devices' addresses", func(a []net.IP) bool {
		return !hasIP(a, bnet+".1") && !hasIP(a, vnet+".1")
	})
	if !hasIP(addrs, l.OuterIP) {
		t.Fatalf("host addresses %v lack the NIC's own %s", addrs, l.OuterIP)
	}
}
