package vswitch

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// TestVhostGuestMemoryAtOffset: guests whose regions sit far into their
// memfds, at an offset that is not page aligned (QEMU places a backend's
// later regions at an offset), forward byte for byte both ways.
func TestVhostGuestMemoryAtOffset(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	const off = 4<<30 + 0x800
	a := addGuest(t, s, "a", 0x0252_5400_0001, vhosttest.Options{Packed: true, MmapOffset: off})
	b := addGuest(t, s, "b", 0x0252_5400_0002, vhosttest.Options{MmapOffset: off})
	exchange(t, a, b, 64)
	balance(t, s)
}

// TestVhostMemoryTableOverLimit: a front-end offers a region larger than
// a device may map (a sparse memfd makes terabytes free to offer). Its
// port is broken with the reason before anything is mapped, the process's
// address space does not grow by it, its fds are closed, and a bystander
// pair keeps forwarding.
func TestVhostMemoryTableOverLimit(t *testing.T) {
	s := startTestSwitch(t, Config{Workers: 1})
	a, b := bystanders(t, s)
	hostile := addGuest(t, s, "hostile", 0x0252_5400_0bad, vhosttest.Options{})
	fds := openFDs(t)
	const size = vhost.DefaultMaxMemory + 1<<30
	fd := vhosttest.MemFD(t, size)
	before := vmSizeKiB(t)
	v, err := hostile.fe.Ack(vhosttest.ReqSetMemTable, vhosttest.MemTable(vhosttest.Region{GuestAddr: 1 << 30, Size: size, UserAddr: 1 << 45}), fd)
	if err != nil || v == 0 {
		t.Fatalf("SET_MEM_TABLE of %d bytes: ack %d, %v", uint64(size), v, err)
	}
	if grown := vmSizeKiB(t) - before; grown > 1<<20 {
		t.Fatalf("address space grew by %d KiB", grown)
	}
	waitFor(t, "the hostile port broken", func() bool { return portState(s, "hostile") == "broken" })
	for _, p := range s.Ports() {
		if p.Name == "hostile" && !strings.Contains(p.Detail, "MaxMemory") {
			t.Errorf("hostile's detail says %q, want the memory limit", p.Detail)
		}
	}
	exchange(t, a, b, 32)
	// The device kept nothing it was sent: with our copy of the memfd
	// closed and the front-end restarted in place, the process has the
	// fds it had before the hostile table.
	_ = unix.Close(fd)
	hostile.fe.Reconnect()
	waitFor(t, "the hostile port ready again", func() bool { return portState(s, "hostile") == "ready" })
	checkFDs(t, fds, "across the refused table")
	exchange(t, a, hostile, 8)
	balance(t, s)
}

// vmSizeKiB is the process's address space (VmSize), in KiB.
func vmSizeKiB(t *testing.T) int {
	t.Helper()
	return statusKiB(t, "VmSize:")
}
