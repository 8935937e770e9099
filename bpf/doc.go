// Package bpf is xvswitch's XDP steering program and its loader.
//
// The program (steer.c, built by bpf2go into steer_bpfel.go and
// steer_bpfel.o, both committed so building xvswitch needs no clang)
// redirects to the AF_XDP socket of a frame's rx queue only the frames the
// switch owns, and passes everything else to the kernel, so the host keeps
// using the same NIC. Which frames the switch owns is a per-interface
// Policy: none, all, or those to the VMs' MACs (plus broadcast and multicast
// if asked, except ARP and IPv6 neighbour solicitations for the host's own
// addresses, which TrackHostAddrs keeps in the program's maps). Every
// frame is counted once by verdict in per-CPU Counters.
//
// Attach loads one instance per interface, attaches it natively (or in
// generic mode, with a warning, where the driver has no XDP), and pins
// program, maps and link under /sys/fs/bpf/xvswitch/<ifname>/ so that
// bpftool can show them by name and a crashed run's pins can be found and
// replaced by the next one.
//
// Regenerating the program (`go generate ./bpf`, or `make generate`) needs
// clang, llvm-strip (Debian: clang, llvm) and the libbpf headers (libbpf-dev).
// include/xvs_kernel.h holds the few kernel types the program uses, so no
// vmlinux.h or kernel headers are needed.
package bpf

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -target bpfel -type xvs_mode -type xvs_config -type xvs_mac -type xvs_mac_owner -type xvs_counters -type xvs_ip4 -type xvs_ip6 -type xvs_host_addr -type xvs_queue_owner steer steer.c -- -I./include -Wall -Werror
