package vhost_test

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// procMapping is one line of /proc/self/maps: an address range and the
// file offset it maps from.
type procMapping struct {
	start, end, offset uint64
}

func (m procMapping) size() uint64 { return m.end - m.start }

// mappingsOf lists this process's mappings of memfds called name.
func mappingsOf(t testing.TB, name string) []procMapping {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []procMapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || !strings.HasPrefix(fs[5], "/memfd:"+name) {
			continue
		}
		se := strings.SplitN(fs[0], "-", 2)
		start, err1 := strconv.ParseUint(se[0], 16, 64)
		end, err2 := strconv.ParseUint(se[1], 16, 64)
		off, err3 := strconv.ParseUint(fs[2], 16, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("/proc/self/maps line %q: %v", sc.Text(), err)
		}
		out = append(out, procMapping{start, end, off})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// vmSizeKiB is the process's address space (VmSize), in KiB.
func vmSizeKiB(t testing.TB) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no VmSize in /proc/self/status")
	return 0
}

// TestRegionMapsOnlyItsRange: a region far into a sparse memfd (QEMU puts
// a backend's later regions at an offset) is mapped from the page below
// its offset to the page above its end, not from the file's start: 1 MiB
// of address space, not the terabyte before it.
func TestRegionMapsOnlyItsRange(t *testing.T) {
	d, _, _ := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	f.Negotiate(vhosttest.DefaultFeatures, vhosttest.ProtocolQEMU)
	const off, size = 1<<40 + 0x800, 1 << 20
	fd := vhosttest.MemFD(t, off+size) // sparse: nothing allocated
	defer unix.Close(fd)
	before := vmSizeKiB(t)
	f.MustAck(vhosttest.ReqSetMemTable, vhosttest.MemTable(vhosttest.Region{GuestAddr: 1 << 30, Size: size, UserAddr: 1 << 44, MmapOffset: off}), fd)
	grown := vmSizeKiB(t) - before
	t.Logf("VmSize grew by %d KiB for a %d KiB region at file offset %#x", grown, size>>10, uint64(off))
	ms := mappingsOf(t, "vhosttest")
	// The page holding the offset to the page holding the end.
	want := procMapping{offset: 1 << 40}
	if len(ms) != 1 || ms[0].offset != want.offset || ms[0].size() != size+4096 {
		t.Fatalf("device mappings %+v, want one of %d bytes from file offset %#x", ms, size+4096, want.offset)
	}
	// Nothing else of that size appeared either (1 GiB: the Go runtime
	// may reserve heap arenas meanwhile, never a terabyte).
	if grown > 1<<20 {
		t.Fatalf("address space grew by %d KiB", grown)
	}
	if inf := d.Info(); inf.Regions != 1 || !inf.Connected {
		t.Fatalf("Info %+v", inf)
	}
}

// TestRegionOnHugetlbfs: on hugetlbfs a mapping must start and end on a
// huge page (the kernel refuses an offset that is not a multiple of it),
// so a region is mapped from the huge page below its offset to the one
// above its end. Nothing touches the memory, so no huge page needs to be
// free.
func TestRegionOnHugetlbfs(t *testing.T) {
	fd, err := unix.MemfdCreate("vhosttest-huge", unix.MFD_CLOEXEC|unix.MFD_HUGETLB)
	if err != nil {
		t.Skipf("no hugetlb memfd: %v", err)
	}
	defer unix.Close(fd)
	const huge = 2 << 20 // the default huge page size on x86-64
	var sf unix.Statfs_t
	if err := unix.Fstatfs(fd, &sf); err != nil || sf.Bsize != huge {
		t.Skipf("huge page size %d (%v), the test wants %d", sf.Bsize, err, huge)
	}
	if err := unix.Ftruncate(fd, 3*huge); err != nil {
		t.Fatal(err)
	}
	d, _, _ := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	f.Negotiate(vhosttest.DefaultFeatures, vhosttest.ProtocolQEMU)
	// Bytes [3 MiB, 5 MiB) of the file: huge pages 1 and 2.
	f.MustAck(vhosttest.ReqSetMemTable, vhosttest.MemTable(vhosttest.Region{GuestAddr: 1 << 30, Size: huge, UserAddr: 1 << 44, MmapOffset: huge + huge/2}), fd)
	ms := mappingsOf(t, "vhosttest-huge")
	if len(ms) != 1 || ms[0].offset != huge || ms[0].size() != 2*huge || ms[0].start%huge != 0 {
		t.Fatalf("device mappings %+v, want one huge-page aligned of %d bytes from file offset %#x", ms, 2*huge, huge)
	}
}

// TestMemoryLimit: a memory table that needs more address space than
// Config.MaxMemory is refused before anything is mapped: the device is
// broken with the reason, everything it had mapped is unmapped and every
// fd it received closed, and the next front-end starts clean. The default
// limit refuses a region of terabytes that a sparse memfd makes cheap to
// offer.
func TestMemoryLimit(t *testing.T) {
	fds := countFDs(t)
	// Each case: regions (sizes, in one message, or one ADD_MEM_REG each).
	cases := []struct {
		name   string
		limit  uint64
		sizes  []uint64
		add    bool
		refuse bool
	}{
		{"table at the limit", 8 << 20, []uint64{4 << 20, 4 << 20}, false, false},
		{"table over the limit", 8 << 20, []uint64{4 << 20, 4<<20 + 4096}, false, true},
		{"regions added over the limit", 8 << 20, []uint64{4 << 20, 4 << 20, 4096}, true, true},
		{"a region over the default limit", 0, []uint64{vhost.DefaultMaxMemory + 1<<30}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _, _ := newDevice(t, vhost.Config{MaxMemory: tc.limit})
			f := vhosttest.Connect(t, d)
			f.Negotiate(vhosttest.DefaultFeatures, vhosttest.ProtocolQEMU)
			var rs []vhosttest.Region
			var mfds []int
			for i, sz := range tc.sizes {
				fd := vhosttest.MemFD(t, int64(sz))
				defer unix.Close(fd)
				gpa := uint64(i+1) << 42
				rs = append(rs, vhosttest.Region{GuestAddr: gpa, Size: sz, UserAddr: gpa})
				mfds = append(mfds, fd)
			}
			var ack uint64
			if tc.add {
				for i, r := range rs {
					v, err := f.Ack(vhosttest.ReqAddMemReg, vhosttest.MemReg(r), mfds[i])
					if err != nil {
						t.Fatal(err)
					}
					if ack = v; v != 0 {
						if i != len(rs)-1 {
							t.Fatalf("ADD_MEM_REG %d of %d refused", i+1, len(rs))
						}
						break
					}
				}
			} else {
				v, err := f.Ack(vhosttest.ReqSetMemTable, vhosttest.MemTable(rs...), mfds...)
				if err != nil {
					t.Fatal(err)
				}
				ack = v
			}
			if !tc.refuse {
				if ack != 0 || d.Info().Regions != len(rs) {
					t.Fatalf("ack %d, Info %+v", ack, d.Info())
				}
				return
			}
			if ack == 0 {
				t.Fatalf("table of %v accepted under a limit of %d", tc.sizes, tc.limit)
			}
			err := f.WaitClosed()
			if !errors.Is(err, vhost.ErrBadMemTable) || !strings.Contains(err.Error(), "MaxMemory") {
				t.Fatalf("session ended with %v, want ErrBadMemTable naming the limit", err)
			}
			if inf := d.Info(); inf.Connected || !errors.Is(inf.LastError, vhost.ErrBadMemTable) {
				t.Fatalf("Info after the refusal: %+v", inf)
			}
			if ms := mappingsOf(t, "vhosttest"); len(ms) != 0 {
				t.Fatalf("still mapped after the refusal: %+v", ms)
			}
			// The next front-end starts clean.
			g := vhosttest.Connect(t, d)
			g.Start(vhosttest.Options{Packed: true})
			if !d.Info().Ready || g.Send(0, frame(100, 1)) != 1 {
				t.Fatalf("after the refusal, a new front-end: %+v", d.Info())
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if got := countFDs(t); got != fds {
		t.Fatalf("%d fds open before, %d after", fds, got)
	}
}
