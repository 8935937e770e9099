package xsk

import (
	"encoding/binary"
	"testing"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// pair is a veth with an AF_XDP socket on each end: rx on the outer end
// (behind the redirect program, RX and TX rings) and gen on the inner end
// inside the namespace (TX only), a traffic generator written with this
// package itself.
type pair struct {
	v   *netns.Veth
	rx  *Socket
	gen *Socket
}

func newPair(t testing.TB, rxCfg SocketConfig) *pair {
	t.Helper()
	require.Root(t)
	u, err := NewUMEM(UMEMConfig{FrameSize: 2048, NumFrames: 8192})
	if err != nil {
		t.Fatal(err)
	}
	return newPairOn(t, u, rxCfg)
}

// newPairOn is newPair with the outer socket on a UMEM the test made
// (closed when the test ends).
func newPairOn(t testing.TB, u *UMEM, rxCfg SocketConfig) *pair {
	t.Helper()
	t.Cleanup(func() { u.Close() })
	require.Root(t)
	require.Commands(t, "ip")
	v := netns.NewVeth(t, netns.VethOptions{})
	x := newXDPRedirect(t, 1)
	x.attach(t, v.Outer)
	rx, err := u.Bind(ifindex(t, v.Outer), 0, rxCfg)
	if err != nil {
		t.Fatal(err)
	}
	x.insert(t, 0, rx)

	// The generator's socket must be created and bound inside the
	// namespace: an AF_XDP socket resolves ifindex in its creator's netns.
	var gen *Socket
	var gu *UMEM
	err = v.NS.Do(func() error {
		var err error
		gu, err = NewUMEM(UMEMConfig{FrameSize: 2048, NumFrames: 4096})
		if err != nil {
			return err
		}
		ifi, err := interfaceIndex(v.Inner)
		if err != nil {
			return err
		}
		gen, err = gu.Bind(ifi, 0, SocketConfig{NoRX: true, TXSize: 2048, CompletionSize: 2048, Frames: 4096})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gu.Close() })
	return &pair{v: v, rx: rx, gen: gen}
}

// udpFrame builds a minimal Ethernet/IPv4/UDP frame of length n (>= 60)
// with src port sport and a 4-byte marker at the start of the payload.
func udpFrame(n int, sport uint16, marker uint32) []byte {
	f := make([]byte, n)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 0x01})  // dst
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 0x02}) // src
	binary.BigEndian.PutUint16(f[12:14], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:4], uint16(n-14))
	ip[8], ip[9] = 64, 17
	copy(ip[12:16], []byte{10, 78, 0, 1})
	copy(ip[16:20], []byte{10, 78, 0, 2})
	binary.BigEndian.PutUint16(ip[10:12], checksum(ip))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:2], sport)
	binary.BigEndian.PutUint16(udp[2:4], 9)
	binary.BigEndian.PutUint16(udp[4:6], uint16(n-34))
	binary.BigEndian.PutUint32(f[42:46], marker)
	return f
}
