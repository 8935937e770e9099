// Package packed is the device side of the virtio 1.1 packed virtqueue: one
// descriptor ring that the driver fills with available descriptors and the
// device overwrites with used ones, plus the two event suppression areas.
//
// A Ring reads what the guest made available in bursts (virtq.Burst), with
// every buffer already translated to host bytes, returns used buffers in
// bursts, and decides once per burst whether the guest wants an interrupt.
// The guest is hostile: every descriptor field is read once, every address
// and length is bounds-checked, chains are bounded, and anything that breaks
// the virtio contract fails the ring with a virtq sentinel error instead of
// panicking or touching memory outside the guest's regions.
package packed
