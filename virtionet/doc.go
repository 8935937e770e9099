// Package virtionet is the data path of a virtio-net device over the device
// side of its virtqueues (virtq.Ring, packed or split): the virtio-net
// header, the guest's TX queue (frames the guest sends, presented as their
// guest-memory segments without a copy) and its RX queue (frames copied into
// the guest's receive buffers, spread over several with MRG_RXBUF), with
// per-queue counters and drop reasons.
//
// It knows nothing of the vhost-user protocol (vhost/ owns the rings and the
// eventfds and hands them here) and nothing of forwarding (switch/ decides
// where a frame goes). Each queue is owned by one worker goroutine; only
// Snapshot may be called from elsewhere. Interrupts go through a Notifier
// (notify.go), whose goroutine writes the guest's call eventfds so that a
// write that blocks never holds up a worker.
//
// A frame crosses at most one copy: from a UMEM frame or another guest's TX
// buffers straight into this guest's RX buffers. Every frame handed to a
// queue is delivered or counted as a drop with a reason; nothing allocates
// per frame or per burst, and the ring is called once per burst.
package virtionet
