// Package guestmem holds a guest's memory as a vhost-user front-end describes
// it (a table of regions, each mapped into this process) and turns the
// addresses a guest hands us into host byte slices.
//
// A guest is hostile: every translation is bounds-checked against the
// regions, a buffer that straddles two regions comes back as two segments,
// and nothing here can reach memory outside the mapped regions. The few
// ring fields that carry ordering between driver and device are read and
// written through the acquire/release accessors in access.go.
package guestmem
