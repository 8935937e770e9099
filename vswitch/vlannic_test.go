package vswitch

import (
	"bytes"
	stdnet "net"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// wire is a raw AF_PACKET socket on the far end of a veth, in its
// namespace: it sends frames as given (tags inline) and receives every
// frame with its tag put back where the kernel took it out
// (PACKET_AUXDATA), as it was on the wire. The machine's kernel has no
// 802.1Q devices, so the host side of the trunk is played with this.
type wire struct{ fd int }

func openWire(t *testing.T, v *netns.Veth) *wire {
	t.Helper()
	w := &wire{}
	err := v.NS.Do(func() error {
		ifi, err := stdnet.InterfaceByName(v.Inner)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		w.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(w.fd) })
	tv := unix.Timeval{Usec: 20000}
	if err := unix.SetsockoptTimeval(w.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *wire) send(t *testing.T, frame []byte) {
	t.Helper()
	if _, err := unix.Write(w.fd, frame); err != nil {
		t.Fatal(err)
	}
}

// recv returns the frames that arrived within d, outgoing ones left out.
func (w *wire) recv(d time.Duration) [][]byte {
	var out [][]byte
	buf := make([]byte, 4096)
	oob := make([]byte, 256)
	for end := time.Now().Add(d); time.Now().Before(end); {
		n, oobn, _, from, err := unix.Recvmsg(w.fd, buf, oob, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := append([]byte(nil), buf[:n]...)
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
				continue
			}
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
			if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 && n >= 12 {
				f = tagged(aux.Vlan_tci, f)
			}
		}
		out = append(out, f)
	}
	return out
}

// TestNICVLANTrunk: NIC <-> VM with VLANs. The NIC port is a trunk of 10
// and 20, the wire (a raw socket at the veth's far end) sends tagged
// frames, and two guests are access ports in 10 and 20. Unicast steered
// by XDP and broadcast copied through AF_PACKET (the kernel strips the
// tag; afpacket puts it back) reach only their VLAN's guest, untagged; a
// frame to one guest's MAC in the other's VLAN is not steered (the XDP
// program's MAC map is keyed by VLAN) and reaches no guest; refused frames
// are counted by reason; each guest's frames leave on the wire tagged with
// its VLAN. The counters balance.
func TestNICVLANTrunk(t *testing.T) {
	require.Root(t)
	v := netns.NewVeth(t, netns.VethOptions{})
	v.NS.MustRun(t, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	w := openWire(t, v)
	s := startTestSwitch(t, Config{Workers: 1})
	if err := s.AddNIC(portspec.NIC{Name: "nic", Ifname: v.Outer, Mode: portspec.ModeCopy, VLANs: portspec.VLANs{Trunks: []int{10, 20}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.removeAll)
	const m10, m20, far = 0x0252_5400_0a09, 0x0252_5400_1409, 0x0200_00fa_0001
	g10 := addGuestSpec(t, s, portspec.Vhost{Name: "g10", MAC: MACString(m10), VLANs: portspec.VLANs{Tag: 10}}, m10, vhosttest.Options{Packed: true})
	g20 := addGuestSpec(t, s, portspec.Vhost{Name: "g20", MAC: MACString(m20), VLANs: portspec.VLANs{Tag: 20}}, m20, vhosttest.Options{Packed: false})
	g10.fe.PostRx(0, 64)
	g20.fe.PostRx(0, 64)
	// The XDP program steers the guests' MACs once housekeeping wrote them.
	lab := &nicLab{s: s}
	waitFor(t, "the guests' MACs steered", func() bool {
		macs, err := lab.steering(t, "nic").MACs()
		_, ok10 := macs[MACString(m10)+"/10"]
		_, ok20 := macs[MACString(m20)+"/20"]
		return err == nil && ok10 && ok20
	})
	wf := func(dst uint64, what string) []byte { return ethFrame(dst, far, what+" "+strings.Repeat("w", 40)) }
	to10 := wf(m10, "unicast to g10 in 10")      // steered by XDP
	to20 := wf(m20, "unicast to g20 in 20")      // steered by XDP
	wrong := wf(m20, "g20's MAC, in VLAN 10")    // not steered (macs is keyed by VLAN): the host's
	b10 := wf(bcast, "broadcast in 10")          // the kernel's, copied through AF_PACKET
	b20 := wf(bcast, "broadcast in 20")          // likewise
	untagged := wf(bcast, "untagged on a trunk") // vlan_untagged_on_trunk
	w30 := wf(bcast, "vlan 30")                  // vlan_not_in_trunk
	w.send(t, tagged(10, to10))
	w.send(t, tagged(20, to20))
	w.send(t, tagged(10, wrong))
	w.send(t, tagged(10, b10))
	w.send(t, tagged(20, b20))
	w.send(t, untagged)
	w.send(t, tagged(30, w30))
	wantSet(t, "g10", g10.receive(t, 0, 2), to10, b10)
	wantSet(t, "g20", g20.receive(t, 0, 2), to20, b20)
	waitFor(t, "the wire's refused frames", func() bool {
		st := portStats(s, "nic")
		return st.Drops["vlan_untagged_on_trunk"] == 1 && st.Drops["vlan_not_in_trunk"] == 1
	})
	// The other way: each guest's frames leave tagged with its VLAN.
	w.recv(50 * time.Millisecond) // what the wire had meanwhile
	// A full-size frame (MTU 1500) still fits on the wire with its tag.
	u10 := g10.frameTo(far, 1)
	full := ethFrame(far, m10, strings.Repeat("f", 1500))
	bc20 := g20.frameTo(bcast, 2)
	g10.fe.Send(0, u10, full)
	g20.fe.Send(0, bc20)
	// The host's own stack sends on the outer veth too (IPv6 MLD reports
	// for its link-local address, at random times after the link came
	// up; CI saw one here): those frames are the kernel's, from the
	// veth's own MAC, not the switch's, and are left out.
	outer, err := stdnet.InterfaceByName(v.Outer)
	if err != nil {
		t.Fatal(err)
	}
	var onWire [][]byte
	waitFor(t, "the guests' frames on the wire", func() bool {
		for _, f := range w.recv(20 * time.Millisecond) {
			if len(f) < 12 || !bytes.Equal(f[6:12], outer.HardwareAddr) {
				onWire = append(onWire, f)
			}
		}
		return len(onWire) >= 3
	})
	wantSet(t, "the wire", onWire, tagged(10, u10), tagged(10, full), tagged(20, bc20))
	if extra := g10.fe.Receive(0); len(extra) != 0 {
		t.Errorf("g10 got %d more frames", len(extra))
	}
	if extra := g20.fe.Receive(0); len(extra) != 0 {
		t.Errorf("g20 got %d more frames", len(extra))
	}
	balance(t, s)
}

// wantSet checks got holds exactly the frames of want, in any order.
func wantSet(t *testing.T, at string, got [][]byte, want ...[]byte) {
	t.Helper()
	left := append([][]byte(nil), got...)
	for _, w := range want {
		found := false
		for i, g := range left {
			if bytes.Equal(g, w) {
				left = append(left[:i], left[i+1:]...)
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: missing %x", at, w)
		}
	}
	for _, g := range left {
		t.Errorf("%s: unexpected %x", at, g)
	}
}
