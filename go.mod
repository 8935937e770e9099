module github.com/xvswitch/xvswitch

go 1.26.0

require github.com/vishvananda/netns v0.0.5

require golang.org/x/sys v0.50.0

require github.com/cilium/ebpf v0.22.0

require github.com/vishvananda/netlink v1.3.1
