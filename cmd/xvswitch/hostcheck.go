package main

import (
	"fmt"
	"net"
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

// checkCPUs fails for a CPU this process may not run on (offline, or
// outside its affinity mask or cpuset): pinning a worker there would fail.
func checkCPUs(cpus []int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var allowed []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			allowed = append(allowed, c)
		}
	}
	for _, c := range cpus {
		if c >= len(set)*64 || !set.IsSet(c) {
			return fmt.Errorf("CPU %d is not one this process may run on; it may use %s", c, cpuList(allowed))
		}
	}
	return nil
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
