package vhost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/virtq"
	"github.com/xvswitch/xvswitch/virtq/drivertest"
)

// frontend plays a vhost-user front-end (QEMU, virtio-user) against a
// Device over a socketpair, with guest memory in memfds.
type frontend struct {
	t    testing.TB
	c    *net.UnixConn
	dev  *Device
	done chan error // ServeConn's result

	mem     *drivertest.Mem
	fds     []int // memfds, one per region
	kickFDs []int // per vring: the kick eventfd we write
	callFDs []int // per vring: the call eventfd we read

	lastReq request // the last request sent
}

const ioTimeout = 5 * time.Second

// newDevice opens a socketless device whose events the frontend records.
func newDevice(t testing.TB, cfg Config) (*Device, *[]Event, *sync.Mutex) {
	t.Helper()
	var mu sync.Mutex
	evs := &[]Event{}
	user := cfg.OnEvent
	cfg.OnEvent = func(e Event) {
		mu.Lock()
		*evs = append(*evs, e)
		mu.Unlock()
		if user != nil {
			user(e)
		}
	}
	if cfg.Name == "" {
		cfg.Name = t.Name()
	}
	if cfg.Logger == nil && !testing.Verbose() {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, evs, &mu
}

// connect serves one end of a new socketpair on d and returns the
// front-end at the other end.
func connect(t testing.TB, d *Device) *frontend {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	back, front := fileConn(t, fds[0]), fileConn(t, fds[1])
	f := &frontend{t: t, c: front, dev: d, done: make(chan error, 1)}
	go func() { f.done <- d.ServeConn(back) }()
	t.Cleanup(func() {
		_ = f.c.Close()
		for _, fd := range append(append(f.fds, f.kickFDs...), f.callFDs...) {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
		}
		if f.mem != nil {
			f.mem.Close()
		}
	})
	return f
}

func fileConn(t testing.TB, fd int) *net.UnixConn {
	t.Helper()
	file := os.NewFile(uintptr(fd), "socketpair")
	c, err := net.FileConn(file)
	_ = file.Close()
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.UnixConn)
}

// send writes one message with the given flags and fds.
func (f *frontend) send(req request, flags uint32, payload []byte, fds ...int) error {
	f.lastReq = req
	b := make([]byte, headerSize+len(payload))
	binary.LittleEndian.PutUint32(b[0:], uint32(req))
	binary.LittleEndian.PutUint32(b[4:], flags)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(payload)))
	copy(b[headerSize:], payload)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_ = f.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, _, err := f.c.WriteMsgUnix(b, oob, nil)
	return err
}

// recv reads one reply to req and checks its header.
func (f *frontend) recv(req request) ([]byte, error) {
	_ = f.c.SetReadDeadline(time.Now().Add(ioTimeout))
	var h [headerSize]byte
	if _, err := io.ReadFull(f.c, h[:]); err != nil {
		return nil, err
	}
	got := request(binary.LittleEndian.Uint32(h[0:]))
	flags := binary.LittleEndian.Uint32(h[4:])
	size := binary.LittleEndian.Uint32(h[8:])
	if got != req {
		return nil, fmt.Errorf("reply to %v, want %v", got, req)
	}
	if flags != replyFlags {
		return nil, fmt.Errorf("reply flags %#x, want exactly %#x", flags, replyFlags)
	}
	p := make([]byte, size)
	if _, err := io.ReadFull(f.c, p); err != nil {
		return nil, err
	}
	return p, nil
}

// call sends a request that has a reply and returns it.
func (f *frontend) call(req request, payload []byte, fds ...int) []byte {
	f.t.Helper()
	if err := f.send(req, flagVersion, payload, fds...); err != nil {
		f.t.Fatalf("%v: %v", req, err)
	}
	p, err := f.recv(req)
	if err != nil {
		f.t.Fatalf("%v: %v", req, err)
	}
	return p
}

// callU64 sends a request whose reply is a u64.
func (f *frontend) callU64(req request) uint64 {
	f.t.Helper()
	p := f.call(req, nil)
	if len(p) != 8 {
		f.t.Fatalf("%v: reply of %d bytes", req, len(p))
	}
	return binary.LittleEndian.Uint64(p)
}

// ack sends a request with NEED_REPLY and returns the u64 status.
func (f *frontend) ack(req request, payload []byte, fds ...int) (uint64, error) {
	if err := f.send(req, flagVersion|flagNeedReply, payload, fds...); err != nil {
		return 0, err
	}
	p, err := f.recv(req)
	if err != nil {
		return 0, err
	}
	if len(p) != 8 {
		return 0, fmt.Errorf("%v: ack of %d bytes", req, len(p))
	}
	return binary.LittleEndian.Uint64(p), nil
}

// mustAck sends a request with NEED_REPLY and fails unless it succeeded.
func (f *frontend) mustAck(req request, payload []byte, fds ...int) {
	f.t.Helper()
	v, err := f.ack(req, payload, fds...)
	if err != nil {
		f.t.Fatalf("%v: %v", req, err)
	}
	if v != 0 {
		f.t.Fatalf("%v: back-end answered %d", req, v)
	}
}

// expectClosed waits for the back-end to close the connection.
func (f *frontend) expectClosed() error {
	f.t.Helper()
	_ = f.c.SetReadDeadline(time.Now().Add(ioTimeout))
	var b [64]byte
	for {
		_, err := f.c.Read(b[:])
		if errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) {
			break
		}
		if err != nil {
			f.t.Fatalf("waiting for the back-end to close: %v", err)
		}
	}
	select {
	case err := <-f.done:
		return err
	case <-time.After(ioTimeout):
		f.t.Fatal("ServeConn did not return after the connection closed")
		return nil
	}
}

func u64b(v uint64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, v)
	return b
}

func stateb(index, num uint32) []byte { return vringState{index, num}.bytes() }

func addrb(index uint32, desc, used, avail uint64) []byte {
	b := make([]byte, vringAddrSize)
	binary.LittleEndian.PutUint32(b[0:], index)
	binary.LittleEndian.PutUint64(b[8:], desc)
	binary.LittleEndian.PutUint64(b[16:], used)
	binary.LittleEndian.PutUint64(b[24:], avail)
	return b
}

func regionb(r regionDesc) []byte {
	b := make([]byte, memRegionDescSize)
	binary.LittleEndian.PutUint64(b[0:], r.guestAddr)
	binary.LittleEndian.PutUint64(b[8:], r.size)
	binary.LittleEndian.PutUint64(b[16:], r.userAddr)
	binary.LittleEndian.PutUint64(b[24:], r.mmapOffset)
	return b
}

func memTableb(rs ...regionDesc) []byte {
	b := make([]byte, memTableHeaderSize)
	binary.LittleEndian.PutUint32(b, uint32(len(rs)))
	for _, r := range rs {
		b = append(b, regionb(r)...)
	}
	return b
}

// negotiate does what QEMU does first: features, protocol features, owner.
func (f *frontend) negotiate(features, protocol uint64) {
	f.t.Helper()
	offered := f.callU64(reqGetFeatures)
	if features&^offered != 0 {
		f.t.Fatalf("device offers %#x, test wants %#x", offered, features)
	}
	if err := f.send(reqSetOwner, flagVersion, nil); err != nil {
		f.t.Fatal(err)
	}
	if virtq.Has(features, FeatureProtocolFeatures) {
		if p := f.callU64(reqGetProtocolFeatures); protocol&^p != 0 {
			f.t.Fatalf("device offers protocol %#x, test wants %#x", p, protocol)
		}
		if err := f.send(reqSetProtocolFeatures, flagVersion, u64b(protocol)); err != nil {
			f.t.Fatal(err)
		}
	}
	f.mustAckOrSend(reqSetFeatures, u64b(features), protocol)
}

// mustAckOrSend asks for an ack when REPLY_ACK is negotiated, as QEMU does.
func (f *frontend) mustAckOrSend(req request, payload []byte, protocol uint64, fds ...int) {
	f.t.Helper()
	if protocol&(1<<ProtoReplyAck) != 0 {
		f.mustAck(req, payload, fds...)
		return
	}
	if err := f.send(req, flagVersion, payload, fds...); err != nil {
		f.t.Fatal(err)
	}
}

// shareMemory creates guest memory in memfds and sends SET_MEM_TABLE.
func (f *frontend) shareMemory(protocol uint64, sizes ...uint64) {
	f.t.Helper()
	m, fds, err := drivertest.NewSharedMem(sizes...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mem, f.fds = m, fds
	f.mustAckOrSend(reqSetMemTable, memTableb(f.regions()...), protocol, fds...)
}

func (f *frontend) regions() []regionDesc {
	var rs []regionDesc
	for _, r := range f.mem.Regions {
		rs = append(rs, regionDesc{guestAddr: r.GuestAddr, size: r.Size, userAddr: r.UserAddr})
	}
	return rs
}

// guestRing is a driver model of either kind, seen through what the tests
// need: chains in, completions out.
type guestRing struct {
	p *drivertest.PackedDriver
	s *drivertest.SplitDriver
}

type completion struct {
	id  uint16
	len uint32
}

func newGuestRing(m *drivertest.Mem, packed bool, size uint16) *guestRing {
	if packed {
		return &guestRing{p: drivertest.NewPackedDriver(m, 0, size)}
	}
	return &guestRing{s: drivertest.NewSplitDriver(m, 0, size)}
}

func (g *guestRing) config() virtq.Config {
	if g.p != nil {
		return g.p.Config(0)
	}
	return g.s.Config(0)
}

// add makes a chain of buffers available.
func (g *guestRing) add(bufs ...drivertest.PackedBuf) (uint16, error) {
	if g.p != nil {
		return g.p.Add(bufs)
	}
	var sb []drivertest.SplitBuf
	for _, b := range bufs {
		sb = append(sb, drivertest.SplitBuf(b))
	}
	id, err := g.s.AddChain(sb, nil)
	if err == nil {
		g.s.Publish()
	}
	return id, err
}

func (g *guestRing) reap() ([]completion, error) {
	var out []completion
	if g.p != nil {
		cs, err := g.p.Reap(nil)
		for _, c := range cs {
			out = append(out, completion{c.ID, c.Len})
		}
		return out, err
	}
	for {
		u, ok, err := g.s.Reap()
		if err != nil || !ok {
			return out, err
		}
		out = append(out, completion{u.ID, u.Len})
	}
}

// setupRing sends what QEMU sends to start vring idx over g: num, base,
// addr, kick, call (and enable, with protocol features).
func (f *frontend) setupRing(idx uint32, g *guestRing, protocol uint64, enable bool) {
	f.t.Helper()
	cfg := g.config()
	for len(f.kickFDs) <= int(idx) {
		f.kickFDs = append(f.kickFDs, -1)
		f.callFDs = append(f.callFDs, -1)
	}
	kick, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		f.t.Fatal(err)
	}
	call, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		f.t.Fatal(err)
	}
	f.kickFDs[idx], f.callFDs[idx] = kick, call
	f.mustAckOrSend(reqSetVringNum, stateb(idx, uint32(cfg.Size)), protocol)
	f.mustAckOrSend(reqSetVringBase, stateb(idx, cfg.Base), protocol)
	f.mustAckOrSend(reqSetVringAddr, addrb(idx, cfg.Desc, cfg.Device, cfg.Driver), protocol)
	f.mustAckOrSend(reqSetVringKick, u64b(uint64(idx)), protocol, kick)
	f.mustAckOrSend(reqSetVringCall, u64b(uint64(idx)), protocol, call)
	if enable {
		f.mustAckOrSend(reqSetVringEnable, stateb(idx, 1), protocol)
	}
}

// interrupts reads (and clears) the call eventfd of vring idx.
func (f *frontend) interrupts(idx int) uint64 {
	var b [8]byte
	n, err := unix.Read(f.callFDs[idx], b[:])
	if err != nil || n != 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

func (f *frontend) kickRing(idx int) {
	_, _ = unix.Write(f.kickFDs[idx], u64b(1))
}

// waitFor polls cond until it holds, failing the test after a deadline
// (the control path runs on its own goroutine).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func hasEvent(mu *sync.Mutex, evs *[]Event, k EventKind) bool {
	mu.Lock()
	defer mu.Unlock()
	for _, e := range *evs {
		if e.Kind == k {
			return true
		}
	}
	return false
}
