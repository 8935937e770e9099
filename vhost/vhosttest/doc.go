// Package vhosttest plays a vhost-user front-end (what QEMU or DPDK's
// virtio-user is to a vhost.Device) inside a test process, so that unit
// tests of vhost and of the packages built on it can drive a device
// without a VM.
//
// A FrontEnd speaks the protocol over a socketpair handed to
// Device.ServeConn (Connect), or over the device's socket (Dial, Accept).
// It does what QEMU does to bring a virtio-net device up: feature and
// protocol feature negotiation, guest memory in memfds passed with
// SET_MEM_TABLE, and per vring the size, base, addresses and kick and call
// eventfds (Start does all of it for N queue pairs, packed or split). The
// guest side of each ring is a driver model from virtq/drivertest, so Send
// and Receive move virtio-net frames through rings built the way a guest
// driver builds them, and catch a device that breaks the ring rules.
//
// It also plays the hostile front-end the device must survive: raw
// messages with any flags and payload (SendMsg, Conn), descriptors from
// MemFD and EventFD, and guest memory truncated under the device
// (TruncateMemory). Close and Reconnect play a front-end that goes away
// and comes back; AddRegion and RemoveRegion play memory hot-plug
// (ADD_MEM_REG, REM_MEM_REG), UseBufferRegion moves the guest's buffers.
//
// The wire vocabulary (request numbers, flags, payload layouts) is written
// here from the vhost-user specification rather than shared with package
// vhost, as a real front-end's would be.
//
// Methods that take no error return fail the test on error, so call them
// from the test's goroutine.
package vhosttest
