package vhost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// message is one front-end request. payload aliases the connection's read
// buffer and is valid until the next read; fds are owned by whoever handles
// the message, and every one not kept must be closed (closeFDs).
type message struct {
	req     request
	flags   uint32
	payload []byte
	fds     []int
}

// needReply reports whether the front-end set NEED_REPLY.
func (m *message) needReply() bool { return m.flags&flagNeedReply != 0 }

// takeFD removes and returns the message's only fd, or -1.
func (m *message) takeFD() int {
	if len(m.fds) == 0 {
		return -1
	}
	fd := m.fds[0]
	m.fds = m.fds[1:]
	return fd
}

// closeFDs closes every fd the handler did not take.
func (m *message) closeFDs() {
	for _, fd := range m.fds {
		_ = unix.Close(fd)
	}
	m.fds = nil
}

// writeTimeout bounds a reply write: a front-end that stops reading its
// socket must not wedge the device's control goroutine.
const writeTimeout = 5 * time.Second

// msgConn frames vhost-user messages over a Unix stream socket. It is used
// by one goroutine at a time (the device's serve loop).
type msgConn struct {
	c   *net.UnixConn
	hdr [headerSize]byte
	buf [maxPayload]byte
	oob [256]byte // room for maxFDs fds (CmsgSpace(8*4) = 48) and slack
	out [headerSize + maxPayload]byte
	fds []int
}

func newMsgConn(c *net.UnixConn) *msgConn { return &msgConn{c: c} }

// read reads one message. On error every fd received so far is closed.
// io.EOF means the front-end closed the connection cleanly.
func (mc *msgConn) read() (*message, error) {
	mc.fds = mc.fds[:0]
	if err := mc.readFull(mc.hdr[:]); err != nil {
		mc.dropFDs()
		return nil, err
	}
	req := request(binary.LittleEndian.Uint32(mc.hdr[0:]))
	flags := binary.LittleEndian.Uint32(mc.hdr[4:])
	size := binary.LittleEndian.Uint32(mc.hdr[8:])
	if flags&flagVersionMk != flagVersion {
		mc.dropFDs()
		return nil, fmt.Errorf("%w: %v with flags %#x", ErrBadVersion, req, flags)
	}
	if size > maxPayload {
		mc.dropFDs()
		return nil, fmt.Errorf("%w: %v carries %d bytes (max %d)", ErrOversize, req, size, maxPayload)
	}
	if err := mc.readFull(mc.buf[:size]); err != nil {
		mc.dropFDs()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: connection closed inside %v", ErrBadMessage, req)
		}
		return nil, err
	}
	m := &message{req: req, flags: flags, payload: mc.buf[:size:size]}
	if len(mc.fds) > 0 {
		m.fds = append([]int(nil), mc.fds...)
	}
	return m, nil
}

func (mc *msgConn) dropFDs() {
	for _, fd := range mc.fds {
		_ = unix.Close(fd)
	}
	mc.fds = mc.fds[:0]
}

// readFull fills b, collecting the fds that arrive with any of its bytes.
func (mc *msgConn) readFull(b []byte) error {
	got := 0
	for got < len(b) {
		n, oobn, flags, _, err := mc.c.ReadMsgUnix(b[got:], mc.oob[:])
		if oobn > 0 {
			if perr := mc.collectFDs(mc.oob[:oobn]); perr != nil && err == nil {
				err = perr
			}
		}
		if err == nil && flags&unix.MSG_CTRUNC != 0 {
			// The kernel dropped fds that did not fit: the message is
			// unusable and the sender is not a front-end we understand.
			err = fmt.Errorf("%w: ancillary data truncated (more than %d fds)", ErrBadFDs, maxFDs)
		}
		got += n
		if err != nil {
			if errors.Is(err, io.EOF) && got > 0 && got < len(b) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		if n == 0 {
			return io.EOF
		}
	}
	return nil
}

func (mc *msgConn) collectFDs(oob []byte) error {
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return fmt.Errorf("%w: ancillary data: %v", ErrBadFDs, err)
	}
	for i := range cmsgs {
		if cmsgs[i].Header.Level != unix.SOL_SOCKET || cmsgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		fds, err := unix.ParseUnixRights(&cmsgs[i])
		if err != nil {
			return fmt.Errorf("%w: SCM_RIGHTS: %v", ErrBadFDs, err)
		}
		mc.fds = append(mc.fds, fds...)
	}
	if len(mc.fds) > maxFDs {
		return fmt.Errorf("%w: %d fds in one message (max %d)", ErrBadFDs, len(mc.fds), maxFDs)
	}
	return nil
}

// reply sends a reply to req with the given payload. Its flags are exactly
// REPLY|VERSION.
func (mc *msgConn) reply(req request, payload []byte) error {
	binary.LittleEndian.PutUint32(mc.out[0:], uint32(req))
	binary.LittleEndian.PutUint32(mc.out[4:], replyFlags)
	binary.LittleEndian.PutUint32(mc.out[8:], uint32(len(payload)))
	n := copy(mc.out[headerSize:], payload)
	if err := mc.c.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	_, err := mc.c.Write(mc.out[:headerSize+n])
	return err
}

// replyU64 sends a reply whose payload is one u64.
func (mc *msgConn) replyU64(req request, v uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return mc.reply(req, b[:])
}
