package xsk

import "golang.org/x/sys/unix"

// capIPCLock is CAP_IPC_LOCK's bit number (linux/capability.h).
const capIPCLock = 14

// memlockState returns the soft RLIMIT_MEMLOCK in bytes and whether the
// calling thread has CAP_IPC_LOCK in its effective set (which exempts the
// UMEM from the limit).
func memlockState() (limit uint64, hasIPCLock bool) {
	var rl unix.Rlimit
	limit = ^uint64(0)
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err == nil && rl.Cur != unix.RLIM_INFINITY {
		limit = rl.Cur
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err == nil {
		hasIPCLock = data[capIPCLock/32].Effective&(1<<(capIPCLock%32)) != 0
	}
	return limit, hasIPCLock
}
