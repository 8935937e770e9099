package xsk

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
	"golang.org/x/sys/unix"
)

// TestSharedUMEMMultiQueue: a two-queue veth with one RX-only socket per
// queue, both on one UMEM (the second with XDP_SHARED_UMEM and its own
// fill and completion rings). The namespace sends 64 UDP flows from an
// AF_PACKET socket; veth delivers each on the peer RX queue matching the
// sender's TX queue, which the kernel picks by flow hash, so both queues
// get frames. Every frame must arrive, each on its queue's socket, in that
// socket's own frames.
func TestSharedUMEMMultiQueue(t *testing.T) {
	require.Root(t)
	v := netns.NewVeth(t, netns.VethOptions{Queues: 2})
	x := newXDPRedirect(t, 2)
	x.attach(t, v.Outer)
	u, err := NewUMEM(UMEMConfig{FrameSize: 2048, NumFrames: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	cfg := SocketConfig{NoTX: true, RXSize: 256, FillSize: 256, Frames: 512}
	idx := ifindex(t, v.Outer)
	var socks [2]*Socket
	for q := range socks {
		if socks[q], err = u.Bind(idx, q, cfg); err != nil {
			t.Fatalf("bind queue %d: %v", q, err)
		}
		x.insert(t, q, socks[q])
	}
	if _, err := u.Bind(idx, 1, cfg); !errors.Is(err, ErrQueueBound) {
		t.Fatalf("a second socket on queue 1 of the same UMEM: %v, want ErrQueueBound", err)
	}
	if socks[0].ZeroCopy() || socks[1].ZeroCopy() {
		t.Fatal("veth reported zero-copy")
	}

	const flows = 64
	const marker = 0x5a5a0001
	err = v.NS.Do(func() error {
		ifi, err := interfaceIndex(v.Inner)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi, Protocol: htons(unix.ETH_P_IP)}); err != nil {
			return err
		}
		for i := range flows {
			if _, err := unix.Write(fd, udpFrame(60, uint16(20000+i*7), marker+uint32(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send from namespace: %v", err)
	}

	var got [2]int
	seen := map[uint32]bool{}
	var descs [MaxBurst]Desc
	// A bound on waiting, not a timing assertion.
	for deadline := time.Now().Add(5 * time.Second); len(seen) < flows && time.Now().Before(deadline); {
		for q, s := range socks {
			n := s.Receive(descs[:])
			for _, d := range descs[:n] {
				f := s.Frame(d)
				if _, ok := s.alloc.frameBase(d.Addr); !ok {
					t.Fatalf("queue %d received into frame %#x outside its share", q, d.Addr)
				}
				if len(f) < 46 || binary.BigEndian.Uint16(f[12:14]) != 0x0800 || f[23] != 17 {
					continue // namespace noise (IPv6 ND etc.)
				}
				m := binary.BigEndian.Uint32(f[42:46])
				if m-marker >= flows {
					continue
				}
				if seen[m] {
					t.Fatalf("flow %d received twice", m-marker)
				}
				seen[m] = true
				got[q]++
			}
			s.Release(descs[:n])
		}
		if len(seen) < flows {
			socks[0].Wait(time.Millisecond)
		}
	}
	if len(seen) != flows {
		t.Fatalf("received %d of %d flows (queue 0: %d, queue 1: %d)", len(seen), flows, got[0], got[1])
	}
	if got[0] == 0 || got[1] == 0 {
		t.Fatalf("frames did not spread over both queues: queue 0 %d, queue 1 %d", got[0], got[1])
	}
	for q, s := range socks {
		c := s.Counters()
		if c.FreeRejected != 0 || c.RXBadDescs != 0 {
			t.Fatalf("queue %d counters %+v", q, c)
		}
		if s.FreeFrames()+256 < s.FramesOwned() {
			// All frames are back in the stash or the fill ring.
			t.Fatalf("queue %d: %d of %d frames free", q, s.FreeFrames(), s.FramesOwned())
		}
	}
	t.Logf("queue 0: %d frames, queue 1: %d frames", got[0], got[1])
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
