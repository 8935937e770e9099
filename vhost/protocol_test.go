package vhost

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReplyAck(t *testing.T) {
	d, _, _ := newDevice(t, Config{MTU: 9000})
	f := connect(t, d)
	f.negotiate(featBase, protoQEMU)
	// Messages without a reply of their own are acknowledged with 0...
	f.mustAck(reqSetOwner, nil)
	f.mustAck(reqNetSetMTU, u64b(9000))
	f.mustAck(reqSetStatus, u64b(StatusAcknowledge))
	f.mustAck(reqSendRARP, u64b(0x563412005452))
	// ...and refused ones with non-zero, and the session goes on.
	for _, mtu := range []uint64{10, 9001, 1 << 40} {
		if v, err := f.ack(reqNetSetMTU, u64b(mtu)); err != nil || v == 0 {
			t.Fatalf("NET_SET_MTU %d: ack %d, %v", mtu, v, err)
		}
	}
	if v, err := f.ack(reqSetConfig, make([]byte, 16)); err != nil || v == 0 {
		t.Fatalf("SET_CONFIG: ack %d, %v", v, err)
	}
	if v, err := f.ack(request(99), nil); err != nil || v == 0 {
		t.Fatalf("unknown request with NEED_REPLY: ack %d, %v", v, err)
	}
	if v, err := f.ack(reqRemMemReg, make([]byte, singleMemRegionMsgSize)); err != nil || v == 0 {
		t.Fatalf("REM_MEM_REG of nothing: ack %d, %v", v, err)
	}
	// A refused request without NEED_REPLY is not answered (an answer
	// would desynchronise the front-end) and the session goes on.
	if err := f.send(reqNetSetMTU, flagVersion, u64b(5)); err != nil {
		t.Fatal(err)
	}
	// Requests with their own reply are answered once, NEED_REPLY or not.
	if err := f.send(reqGetFeatures, flagVersion|flagNeedReply, nil); err != nil {
		t.Fatal(err)
	}
	if p, err := f.recv(reqGetFeatures); err != nil || binary.LittleEndian.Uint64(p) != d.offered {
		t.Fatalf("GET_FEATURES with NEED_REPLY: %x, %v", p, err)
	}
	if got := f.callU64(reqGetStatus); got != StatusAcknowledge {
		t.Fatalf("status %#x", got)
	}
	if inf := d.Info(); inf.MTU != 9000 || !inf.Connected {
		t.Fatalf("Info %+v", inf)
	}
}

// TestMalformed sends one bad message per fresh device and checks the
// outcome: an error reply when the front-end waits for one, a closed
// connection when the session cannot go on, never a hang (every read has a
// deadline) or a crash.
func TestMalformed(t *testing.T) {
	before := countFDs(t)
	cases := []struct {
		name   string
		send   func(f *frontend) error
		ack    bool  // the front-end expects a u64 ack first: 0 if closed is nil, else non-zero
		closed error // the session ends with this; nil: it goes on
	}{
		{"short vring state", func(f *frontend) error {
			return f.send(reqSetVringNum, flagVersion|flagNeedReply, []byte{0, 0, 0, 0})
		}, true, ErrBadMessage},
		{"unknown request with NEED_REPLY", func(f *frontend) error {
			return f.send(request(99), flagVersion|flagNeedReply, nil)
		}, true, nil},
		{"unknown request without NEED_REPLY", func(f *frontend) error {
			return f.send(request(77), flagVersion, u64b(1))
		}, false, ErrUnknown},
		{"oversize payload", func(f *frontend) error {
			var h [headerSize]byte
			binary.LittleEndian.PutUint32(h[0:], uint32(reqSetFeatures))
			binary.LittleEndian.PutUint32(h[4:], flagVersion)
			binary.LittleEndian.PutUint32(h[8:], 1<<30)
			_, err := f.c.Write(h[:])
			return err
		}, false, ErrOversize},
		{"bad version", func(f *frontend) error {
			return f.send(reqGetFeatures, 0x2, nil)
		}, false, ErrBadVersion},
		{"mem table without fds", func(f *frontend) error {
			return f.send(reqSetMemTable, flagVersion|flagNeedReply,
				memTableb(regionDesc{guestAddr: 0, size: 1 << 20, userAddr: 1 << 40}))
		}, true, ErrBadFDs},
		{"mem table of 9 regions", func(f *frontend) error {
			rs := make([]regionDesc, 9)
			return f.send(reqSetMemTable, flagVersion|flagNeedReply, memTableb(rs...))
		}, true, ErrBadMemTable},
		{"region larger than its file", func(f *frontend) error {
			fd := memfd(t, 4096)
			defer unix.Close(fd)
			return f.send(reqSetMemTable, flagVersion|flagNeedReply,
				memTableb(regionDesc{guestAddr: 0, size: 1 << 30, userAddr: 1 << 40}), fd)
		}, true, ErrBadMemTable},
		{"region past the end of its file by offset", func(f *frontend) error {
			fd := memfd(t, 1<<20)
			defer unix.Close(fd)
			return f.send(reqSetMemTable, flagVersion|flagNeedReply,
				memTableb(regionDesc{guestAddr: 0, size: 1 << 20, userAddr: 1 << 40, mmapOffset: 4096}), fd)
		}, true, ErrBadMemTable},
		{"overlapping regions", func(f *frontend) error {
			a, b := memfd(t, 1<<20), memfd(t, 1<<20)
			defer unix.Close(a)
			defer unix.Close(b)
			return f.send(reqSetMemTable, flagVersion|flagNeedReply, memTableb(
				regionDesc{guestAddr: 0, size: 1 << 20, userAddr: 1 << 40},
				regionDesc{guestAddr: 4096, size: 1 << 20, userAddr: 2 << 40}), a, b)
		}, true, ErrBadMemTable},
		{"kick for a queue that does not exist", func(f *frontend) error {
			fd := eventfd(t)
			defer unix.Close(fd)
			return f.send(reqSetVringKick, flagVersion|flagNeedReply, u64b(200), fd)
		}, true, ErrBadQueue},
		{"kick without fd or poll bit", func(f *frontend) error {
			return f.send(reqSetVringKick, flagVersion|flagNeedReply, u64b(0))
		}, true, ErrBadFDs},
		{"call with a stray fd and the poll bit", func(f *frontend) error {
			fd := eventfd(t)
			defer unix.Close(fd)
			return f.send(reqSetVringCall, flagVersion|flagNeedReply, u64b(vringNoFD), fd)
		}, true, nil},
		{"nine fds", func(f *frontend) error {
			var fds []int
			for i := 0; i < 9; i++ {
				fds = append(fds, eventfd(t))
			}
			defer func() {
				for _, fd := range fds {
					unix.Close(fd)
				}
			}()
			return f.send(reqSetVringCall, flagVersion, u64b(0), fds...)
		}, false, ErrBadFDs},
		{"GET_VRING_BASE with a short payload", func(f *frontend) error {
			return f.send(reqGetVringBase, flagVersion, []byte{1})
		}, false, ErrBadMessage},
		{"queue size zero", func(f *frontend) error {
			return f.send(reqSetVringNum, flagVersion|flagNeedReply, stateb(0, 0))
		}, true, ErrBadMessage},
		{"queue size too big", func(f *frontend) error {
			return f.send(reqSetVringNum, flagVersion|flagNeedReply, stateb(0, 65536))
		}, true, ErrBadMessage},
		{"protocol features not offered", func(f *frontend) error {
			return f.send(reqSetProtocolFeatures, flagVersion|flagNeedReply, u64b(1<<ProtoLogShmFD))
		}, true, ErrBadFeatures},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _, _ := newDevice(t, Config{})
			f := connect(t, d)
			if err := tc.send(f); err != nil {
				t.Fatal(err)
			}
			if tc.ack {
				p, err := f.recv(f.lastReq)
				if err != nil || len(p) != 8 {
					t.Fatalf("no ack: %v", err)
				}
				v := binary.LittleEndian.Uint64(p)
				okCase := tc.closed == nil && tc.name != "unknown request with NEED_REPLY"
				if (v == 0) != okCase {
					t.Fatalf("ack %d", v)
				}
			}
			if tc.closed == nil {
				// Still alive and answering.
				if got := f.callU64(reqGetFeatures); got != d.offered {
					t.Fatalf("after the bad message: features %#x", got)
				}
				return
			}
			if err := f.expectClosed(); !errors.Is(err, tc.closed) {
				t.Fatalf("session ended with %v, want %v", err, tc.closed)
			}
			if !errors.Is(d.Info().LastError, tc.closed) {
				t.Fatalf("LastError %v", d.Info().LastError)
			}
		})
	}
	if after := countFDs(t); after != before {
		t.Fatalf("%d fds open before, %d after: received fds leaked", before, after)
	}
}

func TestTruncatedMessage(t *testing.T) {
	d, _, _ := newDevice(t, Config{})
	f := connect(t, d)
	var h [headerSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(reqSetFeatures))
	binary.LittleEndian.PutUint32(h[4:], flagVersion)
	binary.LittleEndian.PutUint32(h[8:], 8)
	if _, err := f.c.Write(append(h[:], 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	_ = f.c.CloseWrite()
	if err := f.expectClosed(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("session ended with %v, want an error", err)
	}
}

func memfd(t testing.TB, size int64) int {
	t.Helper()
	fd, err := unix.MemfdCreate("vhost-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	return fd
}

func eventfd(t testing.TB) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func countFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
