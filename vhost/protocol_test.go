package vhost_test

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

func TestReplyAck(t *testing.T) {
	d, _, _ := newDevice(t, vhost.Config{MTU: 9000})
	f := vhosttest.Connect(t, d)
	f.Negotiate(vhosttest.DefaultFeatures, vhosttest.ProtocolQEMU)
	// Messages without a reply of their own are acknowledged with 0...
	f.MustAck(vhosttest.ReqSetOwner, nil)
	f.MustAck(vhosttest.ReqNetSetMTU, vhosttest.U64(9000))
	f.MustAck(vhosttest.ReqSetStatus, vhosttest.U64(vhost.StatusAcknowledge))
	f.MustAck(vhosttest.ReqSendRARP, vhosttest.U64(0x563412005452))
	// ...and refused ones with non-zero, and the session goes on.
	for _, mtu := range []uint64{10, 9001, 1 << 40} {
		if v, err := f.Ack(vhosttest.ReqNetSetMTU, vhosttest.U64(mtu)); err != nil || v == 0 {
			t.Fatalf("NET_SET_MTU %d: ack %d, %v", mtu, v, err)
		}
	}
	if v, err := f.Ack(vhosttest.ReqSetConfig, make([]byte, 16)); err != nil || v == 0 {
		t.Fatalf("SET_CONFIG: ack %d, %v", v, err)
	}
	if v, err := f.Ack(vhosttest.Request(99), nil); err != nil || v == 0 {
		t.Fatalf("unknown request with NEED_REPLY: ack %d, %v", v, err)
	}
	// A refused request without NEED_REPLY is not answered (an answer
	// would desynchronise the front-end) and the session goes on.
	if err := f.SendMsg(vhosttest.ReqNetSetMTU, vhosttest.FlagVersion, vhosttest.U64(5)); err != nil {
		t.Fatal(err)
	}
	// Requests with their own reply are answered once, NEED_REPLY or not.
	if err := f.SendMsg(vhosttest.ReqGetFeatures, vhosttest.FlagVersion|vhosttest.FlagNeedReply, nil); err != nil {
		t.Fatal(err)
	}
	if p, err := f.Reply(); err != nil || binary.LittleEndian.Uint64(p) != d.Info().Offered {
		t.Fatalf("GET_FEATURES with NEED_REPLY: %x, %v", p, err)
	}
	if got := f.CallU64(vhosttest.ReqGetStatus); got != vhost.StatusAcknowledge {
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
		send   func(f *vhosttest.FrontEnd) error
		ack    bool  // the front-end expects a u64 ack first: 0 if closed is nil, else non-zero
		closed error // the session ends with this; nil: it goes on
	}{
		{"short vring state", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.ReqSetVringNum, vhosttest.FlagVersion|vhosttest.FlagNeedReply, []byte{0, 0, 0, 0})
		}, true, vhost.ErrBadMessage},
		{"unknown request with NEED_REPLY", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.Request(99), vhosttest.FlagVersion|vhosttest.FlagNeedReply, nil)
		}, true, nil},
		{"unknown request without NEED_REPLY", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.Request(77), vhosttest.FlagVersion, vhosttest.U64(1))
		}, false, vhost.ErrUnknown},
		{"oversize payload", func(f *vhosttest.FrontEnd) error {
			_, err := f.Conn().Write(vhosttest.Header(vhosttest.ReqSetFeatures, vhosttest.FlagVersion, 1<<30))
			return err
		}, false, vhost.ErrOversize},
		{"bad version", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.ReqGetFeatures, 0x2, nil)
		}, false, vhost.ErrBadVersion},
		{"mem table without fds", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.ReqSetMemTable, vhosttest.FlagVersion|vhosttest.FlagNeedReply,
				vhosttest.MemTable(vhosttest.Region{GuestAddr: 0, Size: 1 << 20, UserAddr: 1 << 40}))
		}, true, vhost.ErrBadFDs},
		{"mem table of 9 regions", func(f *vhosttest.FrontEnd) error {
			rs := make([]vhosttest.Region, 9)
			return f.SendMsg(vhosttest.ReqSetMemTable, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.MemTable(rs...))
		}, true, vhost.ErrBadMemTable},
		{"region larger than its file", func(f *vhosttest.FrontEnd) error {
			fd := vhosttest.MemFD(t, 4096)
			defer unix.Close(fd)
			return f.SendMsg(vhosttest.ReqSetMemTable, vhosttest.FlagVersion|vhosttest.FlagNeedReply,
				vhosttest.MemTable(vhosttest.Region{GuestAddr: 0, Size: 1 << 30, UserAddr: 1 << 40}), fd)
		}, true, vhost.ErrBadMemTable},
		{"region past the end of its file by offset", func(f *vhosttest.FrontEnd) error {
			fd := vhosttest.MemFD(t, 1<<20)
			defer unix.Close(fd)
			return f.SendMsg(vhosttest.ReqSetMemTable, vhosttest.FlagVersion|vhosttest.FlagNeedReply,
				vhosttest.MemTable(vhosttest.Region{GuestAddr: 0, Size: 1 << 20, UserAddr: 1 << 40, MmapOffset: 4096}), fd)
		}, true, vhost.ErrBadMemTable},
		{"overlapping regions", func(f *vhosttest.FrontEnd) error {
			a, b := vhosttest.MemFD(t, 1<<20), vhosttest.MemFD(t, 1<<20)
			defer unix.Close(a)
			defer unix.Close(b)
			return f.SendMsg(vhosttest.ReqSetMemTable, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.MemTable(
				vhosttest.Region{GuestAddr: 0, Size: 1 << 20, UserAddr: 1 << 40},
				vhosttest.Region{GuestAddr: 4096, Size: 1 << 20, UserAddr: 2 << 40}), a, b)
		}, true, vhost.ErrBadMemTable},
		{"kick for a queue that does not exist", func(f *vhosttest.FrontEnd) error {
			fd := vhosttest.EventFD(t)
			defer unix.Close(fd)
			return f.SendMsg(vhosttest.ReqSetVringKick, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.U64(200), fd)
		}, true, vhost.ErrBadQueue},
		{"kick without fd or poll bit", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.ReqSetVringKick, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.U64(0))
		}, true, vhost.ErrBadFDs},
		{"call with a stray fd and the poll bit", func(f *vhosttest.FrontEnd) error {
			fd := vhosttest.EventFD(t)
			defer unix.Close(fd)
			return f.SendMsg(vhosttest.ReqSetVringCall, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.U64(vhosttest.VringNoFD), fd)
		}, true, nil},
		// Kick, call and error fds must be eventfds (checkEventFD): a
		// pipe or a memfd could block or mean anything.
		{"kick that is a pipe", func(f *vhosttest.FrontEnd) error {
			return sendPipe(t, f, vhosttest.ReqSetVringKick)
		}, true, vhost.ErrBadFDs},
		{"call that is a pipe", func(f *vhosttest.FrontEnd) error {
			return sendPipe(t, f, vhosttest.ReqSetVringCall)
		}, true, vhost.ErrBadFDs},
		{"error fd that is a memfd", func(f *vhosttest.FrontEnd) error {
			fd := vhosttest.MemFD(t, 4096)
			defer unix.Close(fd)
			return f.SendMsg(vhosttest.ReqSetVringErr, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.U64(0), fd)
		}, true, vhost.ErrBadFDs},
		{"nine fds", func(f *vhosttest.FrontEnd) error {
			var fds []int
			for i := 0; i < 9; i++ {
				fds = append(fds, vhosttest.EventFD(t))
			}
			defer func() {
				for _, fd := range fds {
					unix.Close(fd)
				}
			}()
			return f.SendMsg(vhosttest.ReqSetVringCall, vhosttest.FlagVersion, vhosttest.U64(0), fds...)
		}, false, vhost.ErrBadFDs},
		{"GET_VRING_BASE with a short payload", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.ReqGetVringBase, vhosttest.FlagVersion, []byte{1})
		}, false, vhost.ErrBadMessage},
		{"queue size zero", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.ReqSetVringNum, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.VringState(0, 0))
		}, true, vhost.ErrBadMessage},
		{"queue size too big", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.ReqSetVringNum, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.VringState(0, 65536))
		}, true, vhost.ErrBadMessage},
		{"protocol features not offered", func(f *vhosttest.FrontEnd) error {
			return f.SendMsg(vhosttest.ReqSetProtocolFeatures, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.U64(1<<vhost.ProtoBackendReq))
		}, true, vhost.ErrBadFeatures},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _, _ := newDevice(t, vhost.Config{})
			f := vhosttest.Connect(t, d)
			if err := tc.send(f); err != nil {
				t.Fatal(err)
			}
			if tc.ack {
				p, err := f.Reply()
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
				if got := f.CallU64(vhosttest.ReqGetFeatures); got != d.Info().Offered {
					t.Fatalf("after the bad message: features %#x", got)
				}
				return
			}
			if err := f.WaitClosed(); !errors.Is(err, tc.closed) {
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
	d, _, _ := newDevice(t, vhost.Config{})
	f := vhosttest.Connect(t, d)
	if _, err := f.Conn().Write(append(vhosttest.Header(vhosttest.ReqSetFeatures, vhosttest.FlagVersion, 8), 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	_ = f.Conn().CloseWrite()
	if err := f.WaitClosed(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("session ended with %v, want an error", err)
	}
}

func countFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// sendPipe sends req for vring 0 with the write end of a new pipe.
func sendPipe(t *testing.T, f *vhosttest.FrontEnd, req vhosttest.Request) error {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	return f.SendMsg(req, vhosttest.FlagVersion|vhosttest.FlagNeedReply, vhosttest.U64(0), p[1])
}
