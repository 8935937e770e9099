package vhosttest

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
)

// Live migration as QEMU drives it (hw/virtio/vhost.c vhost_migration_log):
// the dirty log shared in a memfd (SET_LOG_BASE, LOG_SHMFD), then the
// features with VHOST_F_LOG_ALL; at the end the features without it.

// ProtocolMigrate is ProtocolQEMU with LOG_SHMFD, which QEMU needs before
// it allows a guest on a vhost-user device to migrate.
const ProtocolMigrate = ProtocolQEMU | 1<<vhost.ProtoLogShmFD

// Log is the front-end's side of a dirty log: one bit per 4 KiB page of
// guest-physical memory, in 64-bit words, as QEMU reads it.
type Log struct {
	fd    int
	bytes []byte
	words []uint64
}

// Dirty reports whether the page holding gpa is marked.
func (l *Log) Dirty(gpa uint64) bool {
	p := gpa >> 12
	if p/64 >= uint64(len(l.words)) {
		return false
	}
	return atomic.LoadUint64(&l.words[p/64])&(1<<(p%64)) != 0
}

// Clear zeroes the log, word by word with an exchange, as QEMU does when
// it syncs the dirty bitmap, and returns how many pages were marked.
func (l *Log) Clear() int {
	n := 0
	for i := range l.words {
		v := atomic.SwapUint64(&l.words[i], 0)
		for ; v != 0; v &= v - 1 {
			n++
		}
	}
	return n
}

// FD is the log's memfd (the test may truncate it, as a hostile
// front-end would).
func (l *Log) FD() int { return l.fd }

// LogSizeFor is the log QEMU allocates for the front-end's memory: a bit
// for every page up to the end of the highest region, in whole words.
func (f *FrontEnd) LogSizeFor() uint64 {
	var top uint64
	for _, r := range f.Regions() {
		top = max(top, r.GuestAddr+r.Size)
	}
	pages := (top + 4095) >> 12
	return (pages + 63) / 64 * 8
}

// SetLogBase shares a new log of size bytes (SET_LOG_BASE with its memfd;
// the device answers, as QEMU expects with LOG_SHMFD). The front-end
// keeps it mapped until the test ends.
func (f *FrontEnd) SetLogBase(size uint64) *Log {
	f.t.Helper()
	fd := MemFD(f.t, int64(size))
	b, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = unix.Munmap(b) })
	payload := append(U64(size), U64(0)...)
	f.Call(ReqSetLogBase, payload, fd)
	return &Log{fd: fd, bytes: b, words: unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)}
}

// StartLogging is what QEMU does when migration starts: a log for the
// whole memory, then SET_FEATURES with VHOST_F_LOG_ALL added to the
// features Start negotiated.
func (f *FrontEnd) StartLogging() *Log {
	f.t.Helper()
	l := f.SetLogBase(f.LogSizeFor())
	f.request(ReqSetFeatures, U64(f.opts.Features|1<<vhost.FeatureLogAll))
	f.CallU64(ReqGetFeatures) // orders the device's handling
	return l
}

// StopLogging sends the features Start negotiated, without
// VHOST_F_LOG_ALL, as QEMU does when migration ends or is cancelled.
func (f *FrontEnd) StopLogging() {
	f.t.Helper()
	f.request(ReqSetFeatures, U64(f.opts.Features))
	f.CallU64(ReqGetFeatures)
}

// Snapshot copies every region's bytes, for DirtyPages.
func (f *FrontEnd) Snapshot() map[uint64][]byte {
	f.t.Helper()
	g := f.guestAlive()
	out := map[uint64][]byte{}
	for _, r := range f.Regions() {
		out[r.GuestAddr] = append([]byte(nil), g.mem.Bytes(r.GuestAddr, r.Size)...)
	}
	return out
}

// ChangedPages returns the guest-physical address of every 4 KiB page
// whose bytes differ from the snapshot: what somebody wrote since.
func (f *FrontEnd) ChangedPages(before map[uint64][]byte) []uint64 {
	f.t.Helper()
	g := f.guestAlive()
	var out []uint64
	for gpa, old := range before {
		now := g.mem.Bytes(gpa, uint64(len(old)))
		for off := 0; off < len(old); off += 4096 {
			end := min(off+4096, len(old))
			// Pages are counted from guest address 0, regions may
			// start anywhere: split at the log's page boundaries.
			for a := off; a < end; {
				pageEnd := int(((gpa + uint64(a)) | 4095) + 1 - gpa)
				e := min(end, pageEnd)
				if string(now[a:e]) != string(old[a:e]) {
					out = append(out, (gpa+uint64(a))&^4095)
				}
				a = e
			}
		}
	}
	return out
}
