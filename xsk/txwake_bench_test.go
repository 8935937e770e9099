package xsk

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkTXWaiter: BenchmarkTX's copy-mode transmit with and without the
// socket in an epoll set. In copy mode each transmitted frame's skb, when
// freed, wakes the socket's wait queue (sock_wfree -> sk_write_space),
// and an epoll set holding the socket is a waiter there, whatever its
// event mask: the cost vswitch avoids by keeping a NIC queue's socket in
// its epoll set only while the worker sleeps (vswitch/nicwake.go). Run
// with -count to alternate the two.
func BenchmarkTXWaiter(b *testing.B) {
	for _, waiter := range []bool{false, true} {
		name := "no-waiter"
		if waiter {
			name = "in-epoll-set"
		}
		b.Run(name, func(b *testing.B) {
			p := newPair(b, SocketConfig{NoRX: true, TXSize: 2048, CompletionSize: 2048, Frames: 4096})
			attachInNS(b, p.v, xdpDrop(b))
			s := p.rx
			if waiter {
				ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
				if err != nil {
					b.Fatal(err)
				}
				defer unix.Close(ep)
				ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(s.FD())}
				if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, s.FD(), &ev); err != nil {
					b.Fatal(err)
				}
			}
			frames := make([][]byte, MaxBurst)
			for i := range frames {
				frames[i] = udpFrame(benchFrameLen, uint16(1000+i), 0xbe7c4)
			}
			b.ResetTimer()
			transmitAll(b, s, frames)
		})
	}
}
