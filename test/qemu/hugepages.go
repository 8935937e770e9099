package qemu

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

const nrHugePages = "/proc/sys/vm/nr_hugepages"

// ReserveHugePages makes sure n 2 MiB huge pages are free for a guest
// (GuestConfig.HugePages needs MemoryMB/2), raising vm.nr_hugepages if it
// must, and puts the old count back when the test ends. The machines
// reserve none by default (docs/environment.md). Needs root.
func ReserveHugePages(t testing.TB, n int) {
	t.Helper()
	free := hugeFree(t)
	if free >= n {
		return
	}
	b, err := os.ReadFile(nrHugePages)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.TrimSpace(string(b))
	total, _ := strconv.Atoi(old)
	want := total + n - free
	if err := os.WriteFile(nrHugePages, []byte(strconv.Itoa(want)), 0o644); err != nil {
		t.Fatalf("reserving huge pages: %v", err)
	}
	t.Cleanup(func() { _ = os.WriteFile(nrHugePages, []byte(old), 0o644) })
	if got := hugeFree(t); got < n {
		t.Fatalf("asked the kernel for %d huge pages, %d are free (memory too fragmented?)", want, got)
	}
}

// HugePagesTaken is how many huge pages are in use or reserved for a
// mapping (HugePages_Total - HugePages_Free + HugePages_Rsvd): a guest
// with HugePages takes MemoryMB/2 while it runs.
func HugePagesTaken(t testing.TB) int {
	t.Helper()
	return meminfo(t, "HugePages_Total") - hugeFree(t) + meminfo(t, "HugePages_Rsvd")
}

func hugeFree(t testing.TB) int { return meminfo(t, "HugePages_Free") }

// meminfo is the named count of /proc/meminfo (default huge page size).
func meminfo(t testing.TB, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatalf("no %s in /proc/meminfo", name)
	return 0
}
