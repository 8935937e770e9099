// Package split is the device side of the virtio split virtqueue (virtio 1.x,
// section 2.7): a descriptor table, an avail ring the driver fills and a used
// ring the device fills, with optional indirect descriptors and EVENT_IDX
// notification suppression. It implements virtq.Ring, the burst API the
// switch drives once per burst.
//
// Everything the guest writes is hostile: every index is range-checked, every
// guest field is read once into a local before it is used, chains are
// bounded, buffers are translated through guestmem, and the first violation
// breaks the ring for good (virtq.ErrBroken) instead of panicking.
package split
