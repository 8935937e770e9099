package vhost

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// session is the state of one front-end connection: what was negotiated
// and mapped. It dies with the connection; the next one starts afresh.
// Guarded by Device.mu.
type session struct {
	id       uint64
	mc       *msgConn
	features uint64
	protocol uint64
	status   uint8
	mtu      int
	maps     []*mapping
	mem      *guestmem.Memory
	rng      *memRange // the range maps lie in (Config.Contiguous), else nil
	ready    bool
	pairsUp  []bool // by queue pair, from 1: running (logged when it changes)
	ending   bool   // endSession is tearing it down
	broken   error
	events   []Event
	// notify writes the session's call and error eventfds (lines
	// 0..n-1: queue i's call; n..2n-1: its error eventfd), off the
	// workers and the control path.
	notify *virtionet.Notifier
	nq     int
}

func (s *session) callLine(q int) *virtionet.Line { return s.notify.Line(q) }
func (s *session) errLine(q int) *virtionet.Line  { return s.notify.Line(s.nq + q) }

func (s *session) packed() bool { return virtq.Has(s.features, virtq.FeatureRingPacked) }

func (s *session) hasProto(bit uint) bool { return s.protocol&(1<<bit) != 0 }

func (s *session) event(e Event) { s.events = append(s.events, e) }

// ServeConn serves one front-end connection until it ends, then tears its
// state down. Open's accept and dial loops use it; an owner with an
// already connected socket (socket activation, a test's socketpair) may
// call it directly. It returns ErrBusy (and closes c) while another
// connection is being served, ErrClosed after Close, and otherwise why
// the connection ended (nil: the front-end closed it).
func (d *Device) ServeConn(c *net.UnixConn) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		_ = c.Close()
		return ErrClosed
	}
	if d.sess != nil {
		d.mu.Unlock()
		_ = c.Close()
		return ErrBusy
	}
	d.nextSID++
	s := &session{id: d.nextSID, mc: newMsgConn(c), nq: len(d.queues)}
	n, err := d.newNotifier(s)
	if err != nil {
		d.mu.Unlock()
		_ = c.Close()
		return fmt.Errorf("vhost %s: %w", d.cfg.Name, err)
	}
	s.notify = n
	d.sess = s
	d.curSID.Store(s.id)
	// Close waits for the session's teardown.
	d.wg.Add(1)
	defer d.wg.Done()
	for _, q := range d.queues {
		q.ctl.reset()
	}
	d.breakMu.Lock()
	d.connOf[s.id] = c
	d.breakMu.Unlock()
	d.mu.Unlock()

	d.emit(Event{Kind: EventConnected, session: s.id})
	err = d.serve(s)
	return d.endSession(s, err)
}

// serve reads and handles messages until the connection fails.
func (d *Device) serve(s *session) error {
	for {
		m, err := s.mc.read()
		if err != nil {
			return err
		}
		d.mu.Lock()
		reply, herr := d.handleProtected(s, m)
		m.closeFDs()
		evs := s.events
		s.events = nil
		d.mu.Unlock()
		for _, e := range evs {
			d.emit(e)
		}
		if err := d.respond(s, m, reply, herr); err != nil {
			return err
		}
	}
}

// respond sends what the front-end expects for m and decides whether the
// session survives herr.
func (d *Device) respond(s *session, m *message, reply []byte, herr error) error {
	soft := errors.Is(herr, ErrRejected) || errors.Is(herr, ErrUnknown)
	switch {
	case m.req.hasReply():
		if herr == nil {
			if err := s.mc.reply(m.req, reply); err != nil {
				return err
			}
			return nil
		}
		if m.req == reqGetConfig && soft {
			// GET_CONFIG signals failure with an empty payload.
			if err := s.mc.reply(m.req, nil); err != nil {
				return err
			}
			d.log.Info("vhost request refused", "req", m.req.String(), "err", herr)
			return nil
		}
		// There is no way to say "error" in these replies: close.
		return herr
	case m.needReply():
		v := uint64(0)
		if herr != nil {
			v = 1
		}
		if err := s.mc.replyU64(m.req, v); err != nil {
			return err
		}
	}
	if herr == nil {
		return nil
	}
	if soft && (m.needReply() || errors.Is(herr, ErrRejected)) {
		d.log.Info("vhost request refused", "req", m.req.String(), "err", herr)
		return nil
	}
	return herr
}

// endSession tears a session down after its connection failed with err.
func (d *Device) endSession(s *session, err error) error {
	if errors.Is(err, io.EOF) {
		err = nil // the front-end hung up
	}
	d.breakMu.Lock()
	c := d.connOf[s.id]
	delete(d.connOf, s.id)
	d.breakMu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	if be := d.takeBreak(s.id); be != nil {
		err = be
	} else if errors.Is(err, net.ErrClosed) {
		err = nil // Close() hung up on it
	}
	broken := err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !isConnReset(err)

	if broken {
		// Say so while the session is still visible (Info shows
		// NEEDS_RESET), before tearing it down.
		d.mu.Lock()
		s.broken = err
		if s.hasProto(ProtoStatus) {
			s.status |= StatusNeedsReset
		}
		d.signalErr(s)
		d.mu.Unlock()
		d.emit(Event{Kind: EventBroken, Err: err})
	}
	d.mu.Lock()
	s.ending = true
	released := d.resetRings()
	d.changeMemory(s.rng, nil, s.maps, released)
	if released {
		// No poller can reach the session's queues any more, so none
		// signals its Notifier again. Otherwise it stays, like the
		// mappings, rather than close an fd a poller may still write.
		s.notify.Close()
	}
	s.maps, s.mem, s.rng = nil, nil, nil
	d.updateReady(s)
	d.curSID.Store(0)
	d.lastErr = err
	evs := s.events
	s.events = nil
	d.mu.Unlock()
	if released {
		d.awaitNotifier(s.notify)
	}
	for _, e := range evs {
		e.quiet = true // the disconnect's line says it
		d.emit(e)
	}
	d.emit(Event{Kind: EventGone, Err: err, quiet: broken})
	// Only now may the next front-end's session start: every event of
	// this one has been delivered, so an owner never sees this session's
	// Gone after the next one's Ready (TestSoak caught a port left
	// "waiting" under a ready guest that way).
	d.mu.Lock()
	d.sess = nil
	d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("vhost %s: %w", d.cfg.Name, err)
	}
	return nil
}

func isConnReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !errors.Is(err, net.ErrClosed)
}
