package vhosttest

import (
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/vhost"
)

// SendMsg writes one message with exactly the given flags, payload and fds
// (SCM_RIGHTS), whatever they are: the hostile front-end's primitive.
// Reply then reads the answer to it.
func (f *FrontEnd) SendMsg(req Request, flags uint32, payload []byte, fds ...int) error {
	f.last = req
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_ = f.c.SetWriteDeadline(time.Now().Add(Timeout))
	_, _, err := f.c.WriteMsgUnix(Message(req, flags, payload), oob, nil)
	return err
}

// Reply reads one reply and checks that it answers the last request sent
// and carries exactly ReplyFlags.
func (f *FrontEnd) Reply() ([]byte, error) {
	_ = f.c.SetReadDeadline(time.Now().Add(Timeout))
	var h [HeaderSize]byte
	if _, err := io.ReadFull(f.c, h[:]); err != nil {
		return nil, err
	}
	got := Request(le.Uint32(h[0:]))
	flags := le.Uint32(h[4:])
	size := le.Uint32(h[8:])
	if got != f.last {
		return nil, fmt.Errorf("reply to %v, want %v", got, f.last)
	}
	if flags != ReplyFlags {
		return nil, fmt.Errorf("reply flags %#x, want exactly %#x", flags, ReplyFlags)
	}
	p := make([]byte, size)
	if _, err := io.ReadFull(f.c, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Call sends a request that has a reply of its own (GET_*) and returns the
// reply.
func (f *FrontEnd) Call(req Request, payload []byte, fds ...int) []byte {
	f.t.Helper()
	if err := f.SendMsg(req, FlagVersion, payload, fds...); err != nil {
		f.t.Fatalf("%v: %v", req, err)
	}
	p, err := f.Reply()
	if err != nil {
		f.t.Fatalf("%v: %v", req, err)
	}
	return p
}

// CallU64 is Call for a request whose reply is a u64.
func (f *FrontEnd) CallU64(req Request) uint64 {
	f.t.Helper()
	p := f.Call(req, nil)
	if len(p) != 8 {
		f.t.Fatalf("%v: reply of %d bytes", req, len(p))
	}
	return le.Uint64(p)
}

// Ack sends a request with NEED_REPLY and returns the back-end's u64
// status (0: done).
func (f *FrontEnd) Ack(req Request, payload []byte, fds ...int) (uint64, error) {
	if err := f.SendMsg(req, FlagVersion|FlagNeedReply, payload, fds...); err != nil {
		return 0, err
	}
	p, err := f.Reply()
	if err != nil {
		return 0, err
	}
	if len(p) != 8 {
		return 0, fmt.Errorf("%v: ack of %d bytes", req, len(p))
	}
	return le.Uint64(p), nil
}

// MustAck is Ack that fails the test unless the back-end succeeded.
func (f *FrontEnd) MustAck(req Request, payload []byte, fds ...int) {
	f.t.Helper()
	v, err := f.Ack(req, payload, fds...)
	if err != nil {
		f.t.Fatalf("%v: %v", req, err)
	}
	if v != 0 {
		f.t.Fatalf("%v: back-end answered %d", req, v)
	}
}

// request sends a request without a reply of its own as QEMU does: with
// NEED_REPLY, checked, once REPLY_ACK is negotiated; without it before.
func (f *FrontEnd) request(req Request, payload []byte, fds ...int) {
	f.t.Helper()
	if f.protocol&(1<<vhost.ProtoReplyAck) != 0 {
		f.MustAck(req, payload, fds...)
		return
	}
	if err := f.SendMsg(req, FlagVersion, payload, fds...); err != nil {
		f.t.Fatalf("%v: %v", req, err)
	}
}

// isHangUp reports whether a read error means the peer closed the
// connection.
func isHangUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET)
}
