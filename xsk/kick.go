package xsk

import "golang.org/x/sys/unix"

// The two system calls a socket makes on the data path, raw: without
// entersyscall/exitsyscall, so the calling goroutine keeps its P while the
// kernel works. Neither blocks (MSG_DONTWAIT on a socket that only moves
// its rings), and in copy mode a transmit kick is where most of a
// transmit's work is done, so a worker feeding a NIC spends much of its
// time in them. Through unix.Syscall6, Go's sysmon found the worker there
// at its 10 ms preemption check, took the P back and handed it off, and
// reset its own backoff to its shortest sleep each time: traced in the
// bench's VM -> NIC case (perf sched_switch on both CPUs, 1 s), sysmon ran
// 1471-2193 times a second, on the worker's CPU (each time taking the
// worker off it for ~12 us) or on the guest's; with raw calls 98-99
// (docs/measuring.md, "What the unpinned runtime costs the worker"). What
// a raw call costs: a stop-the-world waits for it to return, microseconds.

// sendtoKick is sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0): it asks the
// kernel to process the TX ring. Raw errno, no allocation.
func sendtoKick(fd int) unix.Errno {
	_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// recvfromWake is recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL): it wakes
// the RX path (need_wakeup on the fill ring) or drives busy polling.
func recvfromWake(fd int) unix.Errno {
	_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}
