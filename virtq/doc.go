// Package virtq is the contract between the two virtqueue kinds (packed/ and
// split/) and their users: the burst view of descriptor chains with their
// buffers already translated to host bytes, the used entries that complete
// them, the ring state that vhost-user saves and restores, and the errors a
// hostile guest's ring produces.
//
// The switch drives a ring with one method call per burst, never per frame.
package virtq
