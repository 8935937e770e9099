package afpacket

import "golang.org/x/sys/unix"

// groupFilter is the classic BPF program the socket runs on each frame
// before it is copied into the ring ("ether[0] & 1 != 0" in tcpdump's
// words): only frames to a group address (broadcast, multicast) are
// accepted, whole; unicast is not the socket's and costs it nothing.
// Offset 0 is the destination MAC even for a tagged frame: the kernel
// has taken the tag out of the data before taps see it.
var groupFilter = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 0},                 // A = dst[0]
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, Jt: 0, Jf: 1, K: 1}, // I/G bit?
	{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},                      // accept the whole frame
	{Code: unix.BPF_RET | unix.BPF_K, K: 0},                               // drop
}
