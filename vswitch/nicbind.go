package vswitch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/afpacket"
	"github.com/xvswitch/xvswitch/bpf"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/xsk"
)

// nicBinding is what a NIC port holds of one interface (one ifindex):
// the steering program with its pins, the UMEM, one socket per queue, the
// AF_PACKET socket its group frames come through.
// An interface deleted and made again under its name is another
// interface: the port drops the old binding and makes a new one.
type nicBinding struct {
	ifindex int
	// hostMAC is the interface's own MAC, the host's (0: none, a device
	// without a 6-byte address).
	hostMAC uint64
	mtu     int
	up      bool // IFF_UP and IFF_RUNNING when bound
	// fixCsum: the port completes received TCP and UDP checksums on this
	// interface (csum.go); csumWhy says why, or why not.
	fixCsum bool
	csumWhy string
	steer   *bpf.Steering
	umem    *xsk.UMEM     // nil when a VM owns every queue
	socks   []*xsk.Socket // by queue; nil at a queue a VM owns (owned.go)
	groups  *afpacket.Socket
}

// nicQueueCount is how many rx queues the interface has.
func nicQueueCount(ifname string) int {
	m, _ := filepath.Glob(filepath.Join("/sys/class/net", ifname, "queues", "rx-*"))
	if len(m) == 0 {
		return 1
	}
	return len(m)
}

func socketMode(m portspec.NICMode) xsk.Mode {
	switch m {
	case portspec.ModeCopy:
		return xsk.ModeCopy
	case portspec.ModeZeroCopy:
		return xsk.ModeZeroCopy
	}
	return xsk.ModeAuto
}

// bindNIC attaches the steering program to the interface, starts tracking
// the host's addresses on it, binds one socket to each of its first
// queues rx queues that no VM owns, each in its XSKMAP slot, and opens the
// socket for its group frames. On failure it leaves nothing behind.
func bindNIC(spec portspec.NIC, queues int, owned func(q int) bool) (_ *nicBinding, err error) {
	ifi, err := net.InterfaceByName(spec.Ifname)
	if err != nil {
		return nil, fmt.Errorf("vswitch: nic %s: %w", spec.Ifname, err)
	}
	b := &nicBinding{ifindex: ifi.Index, hostMAC: hostMACKey(ifi.HardwareAddr), mtu: ifi.MTU, up: ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagRunning != 0}
	b.fixCsum, b.csumWhy = csumPolicy(spec.Csum, spec.Ifname)
	defer func() {
		if err != nil {
			_ = b.close()
		}
	}()
	// The switch takes frames for the MACs behind its other ports; the
	// host keeps its unicast and every broadcast and multicast frame
	// (router advertisements, DHCP replies, its groups, ARP and neighbour
	// discovery), of which the switch takes copies through b.groups.
	// MACs are steered in their VLAN (syncMACs), untagged frames in the
	// port's native one.
	b.steer, err = bpf.Attach(spec.Ifname, bpf.Options{Policy: bpf.Policy{Mode: bpf.ModeMAC, NativeVLAN: nativeVLAN(spec.VLANs)}})
	if err != nil {
		return nil, err
	}
	// The host's addresses stay tracked: the maps then hold them should
	// the policy steer group frames again (bpftool, a fallback), which
	// would otherwise take the host's ARP and neighbour solicitations.
	if err := b.steer.TrackHostAddrs(context.Background()); err != nil {
		return nil, fmt.Errorf("vswitch: nic %s: tracking the host's addresses: %w", spec.Ifname, err)
	}
	if err := b.openSockets(spec, queues, owned, false); err != nil {
		return nil, err
	}
	// Slots for the longest frame the interface receives now, tagged; a
	// longer MTU later makes longer group frames too_long until the
	// interface is bound again. All-multicast: a NIC's hardware filter
	// then passes the groups the VMs joined, not only the host's (the
	// kernel ends it when the socket closes).
	b.groups, err = afpacket.Open(ifi.Index, afpacket.Config{MaxFrame: b.mtu + ethHeaderLen + 4, AllMulti: true})
	if err != nil {
		return nil, fmt.Errorf("vswitch: nic %s: socket for group frames: %w", spec.Ifname, err)
	}
	return b, nil
}

// openSockets makes the binding's UMEM and binds a socket to each of the
// first queues rx queues that no VM owns. A socket cannot leave a UMEM's
// registration (the first one bound holds it for all), so a change of
// owners closes them all and opens a new set (nicPort.resocket). With
// skipBusy, a queue another socket still holds (EBUSY after bindQueue's
// wait: someone else's UMEM) is left without one and logged, rather than
// costing the port every queue.
func (b *nicBinding) openSockets(spec portspec.NIC, queues int, owned func(q int) bool, skipBusy bool) (err error) {
	b.socks = make([]*xsk.Socket, queues)
	free := 0
	for q := 0; q < queues; q++ {
		if !owned(q) {
			free++
		}
	}
	if free == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			_ = b.closeSockets()
		}
	}()
	const perQueue = 3 * 1024 // 2 x fill ring + TX ring, the xsk defaults
	b.umem, err = xsk.NewUMEM(xsk.UMEMConfig{FrameSize: 4096, NumFrames: uint32(perQueue * free)})
	if err != nil {
		return err
	}
	for q := 0; q < queues; q++ {
		if owned(q) {
			continue
		}
		s, err := bindQueue(b.umem, b.ifindex, q, xsk.SocketConfig{Mode: socketMode(spec.Mode)})
		if err != nil && skipBusy && errors.Is(err, unix.EBUSY) {
			slog.Error("nic: a queue is held by another AF_XDP socket; the port leaves it without one (frames there go to the kernel)",
				"ifname", spec.Ifname, "queue", q, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("vswitch: nic %s queue %d: %w", spec.Ifname, q, err)
		}
		b.socks[q] = s
		if err := b.steer.SetSocket(uint32(q), s.FD()); err != nil {
			return err
		}
	}
	return nil
}

// closeSockets empties the XSKMAP slots (frames there go to the kernel,
// counted as no_socket_passed) and closes the sockets and the UMEM. No
// worker may be using the sockets.
func (b *nicBinding) closeSockets() error {
	for q, s := range b.socks {
		if s != nil && b.steer != nil {
			_ = b.steer.RemoveSocket(uint32(q))
		}
	}
	b.socks = nil
	if b.umem == nil {
		return nil
	}
	err := b.umem.Close()
	b.umem = nil
	return err
}

// mode is the AF_XDP bind mode of the binding's sockets, for show ports:
// "copy" or "zerocopy" (the kernel's, not the switch's data path; see
// zerocopy_frames in the stats for that), "none" without sockets.
func (b *nicBinding) mode() string {
	for _, s := range b.socks {
		if s != nil {
			if s.ZeroCopy() {
				return "zerocopy"
			}
			return "copy"
		}
	}
	return "none"
}

// csumPolicy decides whether a port completes the checksums of what it
// receives from the interface: csum=fix and csum=off say so; by default
// only a veth does (docs/afxdp-veth.md), a virtual NIC whose frames no
// wire can corrupt. A physical NIC's frames keep their checksums as they
// came: completing them would hide corruption from the guests.
func csumPolicy(c portspec.NICCsum, ifname string) (bool, string) {
	switch c {
	case portspec.CsumFix:
		return true, "csum=fix"
	case portspec.CsumOff:
		return false, "csum=off"
	}
	drv := nicDriver(ifname)
	if _, err := os.Stat(filepath.Join("/sys/class/net", ifname, "device")); err == nil || drv != "veth" {
		return false, fmt.Sprintf("csum=auto: driver %q, not a veth", drv)
	}
	return true, "csum=auto: a veth, whose peer may send partial checksums"
}

// nicDriver is the interface's driver as ethtool names it ("" if it cannot
// be read).
func nicDriver(ifname string) string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname)
	if err != nil {
		return ""
	}
	return unix.ByteSliceToString(info.Driver[:])
}

// close detaches the program, removes its pins and closes the sockets and
// the UMEM. No worker may be using the sockets.
func (b *nicBinding) close() error {
	var errs []error
	if b.groups != nil {
		errs = append(errs, b.groups.Close())
	}
	errs = append(errs, b.closeSockets())
	if b.steer != nil {
		errs = append(errs, b.steer.Close())
	}
	return errors.Join(errs...)
}

// counters adds the program's verdicts and the sockets' kernel statistics
// to k (safe beside the workers: both are syscalls the kernel serialises).
func (b *nicBinding) counters(k map[string]uint64) {
	c, _ := b.steer.Counters() // zeros if it cannot be read
	var groups afpacket.Stats
	if b.groups != nil {
		groups, _ = b.groups.Stats() // the totals so far if it cannot be read
	}
	addKernelCounts(k, c, b.socketStats(), groups)
}

// socketStats is each socket's XDP_STATISTICS.
func (b *nicBinding) socketStats() []xsk.Stats {
	stats := make([]xsk.Stats, 0, len(b.socks))
	for _, s := range b.socks {
		if s == nil {
			continue
		}
		if st, err := s.Stats(); err == nil {
			stats = append(stats, st)
		}
	}
	return stats
}

// addKernelCounts adds the XDP program's verdicts, each AF_XDP socket's
// XDP_STATISTICS and the group socket's drops to a port's kernel
// counters. KernelCounters names them.
func addKernelCounts(k map[string]uint64, c bpf.Counters, socks []xsk.Stats, groups afpacket.Stats) {
	k["xdp_redirected"] += c.Redirected
	k["xdp_no_socket_passed"] += c.NoSocketPassed
	k["xdp_bad_queue_passed"] += c.BadQueuePassed
	k["xdp_not_owned_passed"] += c.NotOwnedPassed
	k["xdp_host_arp_passed"] += c.HostARPPassed
	k["xdp_host_nd_passed"] += c.HostNDPassed
	k["xdp_short_passed"] += c.ShortPassed
	k["xdp_group_passed"] += c.GroupPassed
	k["xdp_owned_queue_passed"] += c.OwnedQueuePassed
	// Group frames the kernel passed but could not put in the switch's
	// ring (full): the host got them, the VMs did not.
	k["af_packet_dropped"] += groups.Drops
	for _, st := range socks {
		k["af_xdp_rx_dropped"] += st.RXDropped
		k["af_xdp_rx_ring_full"] += st.RXRingFull
		k["af_xdp_rx_fill_ring_empty"] += st.RXFillRingEmptyDescs
		k["af_xdp_rx_invalid_descs"] += st.RXInvalidDescs
		k["af_xdp_tx_invalid_descs"] += st.TXInvalidDescs
	}
}

// hostMACKey is a MAC key of the interface's hardware address, 0 unless it
// is a 6-byte unicast one.
func hostMACKey(hw net.HardwareAddr) uint64 {
	if len(hw) != 6 || hw[0]&1 != 0 {
		return 0
	}
	return MACKey(hw)
}
