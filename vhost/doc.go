// Package vhost is the back-end side of the vhost-user protocol (QEMU's
// docs/interop/vhost-user.rst) for virtio-net devices: the Unix socket in
// server or client mode, the messages that negotiate features and hand over
// guest memory, rings and eventfds, and the Device that a switch polls.
//
// A Device serves one socket and at most one front-end connection at a time
// (QEMU, cloud-hypervisor, DPDK virtio-user). It owns the guest's memory
// mappings and the rings built over them; the data path reaches each
// virtqueue through a stable *Queue handle whose current state is an
// immutable snapshot behind an atomic pointer. The control path replaces a
// snapshot (new memory table, ring stopped or restarted) and waits until the
// poller has moved off the old one before it unmaps memory or closes fds.
//
// The front-end is hostile: every message is bounded and validated; a bad
// one gets an error reply or a closed connection, and a misbehaving guest
// marks only its own device broken.
package vhost
