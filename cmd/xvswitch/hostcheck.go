package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// checkInterface fails for an interface this host does not have, and
// lists the ones it has.
func checkInterface(name string) error {
	if _, err := net.InterfaceByName(name); err == nil {
		return nil
	}
	return fmt.Errorf("no network interface %q here; there are %s", name, interfaceList())
}

// interfaceList names this host's network interfaces, at most 20.
func interfaceList() string {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		return "none that this process can see ('ip link' lists them)"
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	sort.Strings(names)
	if len(names) > 20 {
		return strings.Join(names[:20], ", ") + fmt.Sprintf(" and %d more ('ip link' lists them)", len(names)-20)
	}
	return strings.Join(names, ", ")
}

// checkCPUs fails for a CPU a worker could not be pinned to (offline, or
// outside the process's cpuset): pinning it there would fail. The
// process's own affinity mask is no limit: each worker's locked thread
// sets its own, so the process may be started on other CPUs (taskset -c)
// to keep the Go runtime's threads off the workers' (docs/measuring.md).
func checkCPUs(cpus []int) error {
	for _, c := range cpus {
		if !canPin(c) {
			var allowed []int
			for o := range onlineCPUs() {
				if canPin(o) {
					allowed = append(allowed, o)
				}
			}
			return fmt.Errorf("CPU %d is not one this process may run on; it may use %s", c, cpuList(allowed))
		}
	}
	return nil
}

// canPin tries to pin a thread to CPU c, and puts the thread's own
// mask back: it may be the main thread, which Go never ends, so the
// probe must not leave it on c.
func canPin(c int) bool {
	ok := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		var old, set unix.CPUSet
		if c < 0 || c >= len(set)*64 {
			runtime.UnlockOSThread()
			ok <- false
			return
		}
		if unix.SchedGetaffinity(0, &old) != nil {
			runtime.UnlockOSThread()
			ok <- true // cannot tell; the worker warns if its pin fails
			return
		}
		set.Set(c)
		pinned := unix.SchedSetaffinity(0, &set) == nil
		if unix.SchedSetaffinity(0, &old) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and ends with this goroutine
		ok <- pinned
	}()
	return <-ok
}

// onlineCPUs counts up to the highest online CPU (its number plus one),
// from sysfs, or the CPUs of this process's mask without it.
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err == nil {
		s := strings.TrimSpace(string(b))
		if i := strings.LastIndexAny(s, ",-"); i >= 0 {
			s = s[i+1:]
		}
		if n, err := strconv.Atoi(s); err == nil {
			return n + 1
		}
	}
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return 1
	}
	n := 0
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			n = c + 1
		}
	}
	return n
}

// cpuList writes sorted CPU numbers as the kernel does: "0-3,6".
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
