package vhost_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/require"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

const hugePage = 2 << 20 // the default huge page size on x86-64

const (
	nrHugePages   = "/proc/sys/vm/nr_hugepages"
	freeHugePages = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
)

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// freeHugePagesFor makes n huge pages free, raising nr_hugepages (as root)
// by what is missing and restoring it when the test ends. It says why not
// when it cannot.
func freeHugePagesFor(t *testing.T, n uint64) (bool, string) {
	free, err := readUint(freeHugePages)
	if err != nil {
		return false, err.Error()
	}
	if free >= n {
		return true, ""
	}
	nr, err := readUint(nrHugePages)
	if err != nil {
		return false, err.Error()
	}
	if err := os.WriteFile(nrHugePages, []byte(strconv.FormatUint(nr+n-free, 10)), 0); err != nil {
		return false, "cannot raise " + nrHugePages + ": " + err.Error()
	}
	t.Cleanup(func() {
		if err := os.WriteFile(nrHugePages, []byte(strconv.FormatUint(nr, 10)), 0); err != nil {
			t.Errorf("restoring %s to %d: %v", nrHugePages, nr, err)
		}
	})
	if free, err = readUint(freeHugePages); err != nil || free < n {
		return false, "the kernel found no memory for more huge pages"
	}
	return true, ""
}

// TestContiguousHugetlb: a hugetlbfs region behind a region of 4 KiB pages
// that does not end on a huge page goes at the next multiple of 2 MiB of a
// range that starts on one (MAP_FIXED on hugetlbfs refuses anything else),
// the gap in front of it is the switch's memory (a registration over a
// hole fails), and the region's bytes are the file's.
func TestContiguousHugetlb(t *testing.T) {
	hfd, err := unix.MemfdCreate("vhosttest-huge", unix.MFD_CLOEXEC|unix.MFD_HUGETLB)
	if err != nil {
		require.SkipOrFail(t, fmt.Sprintf("no hugetlb memfd here: %v", err))
	}
	defer unix.Close(hfd)
	var sf unix.Statfs_t
	if err := unix.Fstatfs(hfd, &sf); err != nil || sf.Bsize != hugePage {
		t.Skipf("huge page size %d (%v), the test wants %d", sf.Bsize, err, hugePage)
	}
	if err := unix.Ftruncate(hfd, 2*hugePage); err != nil {
		t.Fatal(err)
	}
	const small = 1<<20 + pageSize
	sfd := vhosttest.MemFD(t, small)
	defer unix.Close(sfd)

	d, _, _ := newDevice(t, vhost.Config{Contiguous: true, SwitchArea: pageSize})
	f := vhosttest.Connect(t, d)
	f.Negotiate(vhosttest.DefaultFeatures, vhosttest.ProtocolQEMU)
	// The second half of the hugetlb file: huge page 1.
	f.MustAck(vhosttest.ReqSetMemTable, vhosttest.MemTable(
		vhosttest.Region{GuestAddr: 1 << 30, Size: small, UserAddr: 1 << 40},
		vhosttest.Region{GuestAddr: 2 << 30, Size: hugePage, UserAddr: 2 << 40, MmapOffset: hugePage},
	), sfd, hfd)
	l := d.MemoryLayout()
	if l == nil {
		t.Fatal("no layout")
	}
	rs := l.Regions()
	if len(rs) != 2 || rs[0].Offset != pageSize || rs[1].Offset != hugePage {
		t.Fatalf("regions %+v: want the small one at %#x, the huge one at %#x", rs, pageSize, hugePage)
	}
	if l.Base()%hugePage != 0 || l.Len() != 2*hugePage {
		t.Fatalf("range at %#x of %#x bytes: want a 2 MiB aligned range of %#x", l.Base(), l.Len(), 2*hugePage)
	}
	checkNoHole(t, l)
	if ms := mappingsOf(t, "vhosttest-huge"); len(ms) != 1 || ms[0].start != uint64(l.Base())+hugePage || ms[0].offset != hugePage {
		t.Fatalf("hugetlb mappings %+v", ms)
	}
	// The gap between the regions is the switch's: writable, seen by no
	// guest.
	copy(l.Range()[pageSize+small:], "gap")

	ok, why := freeHugePagesFor(t, 1)
	if !ok {
		require.SkipOrFail(t, "layout checked; the huge page itself not touched (needs root to raise nr_hugepages): "+why)
	}
	copy(l.Range()[rs[1].Offset+100:], "through the range")
	got := make([]byte, 17)
	if _, err := unix.Pread(hfd, got, hugePage+100); err != nil || string(got) != "through the range" {
		t.Fatalf("the hugetlb file has %q (%v) where the range was written", got, err)
	}
}
