package bpf

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// XDPMode is how the program is attached to the interface.
type XDPMode int

const (
	// XDPAuto tries the driver's native hook and falls back to generic mode
	// with a warning.
	XDPAuto XDPMode = iota
	// XDPDriver is native XDP only: fail where the driver has none.
	XDPDriver
	// XDPGeneric is the kernel's generic (skb) hook: works on every device,
	// after the skb is built, so it is slower and AF_XDP is copy mode only.
	XDPGeneric
)

func (m XDPMode) String() string {
	switch m {
	case XDPAuto:
		return "auto"
	case XDPDriver:
		return "driver"
	case XDPGeneric:
		return "generic"
	}
	return fmt.Sprintf("XDPMode(%d)", int(m))
}

// Options shape Attach. The zero value attaches in XDPAuto mode with
// ModeNone: the program steers nothing until SetPolicy.
type Options struct {
	// Policy is written before the program is attached, so the first frame
	// already sees it.
	Policy Policy
	// XDPMode chooses the hook (default XDPAuto).
	XDPMode XDPMode
	// Logger gets the generic-mode fallback warning, stale-pin replacement
	// and bpffs mounting (default slog.Default()).
	Logger *slog.Logger
}

// Steering is the steering program attached to one interface, with its
// maps. Its methods are control-plane operations, safe for concurrent use;
// the data path never calls them.
type Steering struct {
	ifname  string
	ifindex int
	dir     string
	xdpMode XDPMode
	progID  uint32 // the loaded program's kernel id
	log     *slog.Logger

	mu      sync.Mutex
	closed  bool
	objs    steerObjects
	link    link.Link
	lockFD  int
	sockets map[uint32]int // our record of the XSKMAP: the kernel won't tell
	tracker *tracker       // the running TrackHostAddrs, if any

	// onSubscribe, if set (by tests, before TrackHostAddrs), sees every
	// rtnetlink subscription the tracker makes.
	onSubscribe func(*netSub)
}

// Attach loads a fresh instance of the steering program and its maps,
// attaches it to the interface and pins everything under
// PinRoot/<ifname>/. Pins left there by a crashed run are detached and
// replaced (and logged); an interface a live process (this one included)
// has attached to gives ErrBusy.
//
// The host address maps start empty and Attach does not fill them: call
// TrackHostAddrs (or SetHostAddrs) right after, before steering broadcast
// and multicast takes the host's address resolution away.
func Attach(ifname string, o Options) (*Steering, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := o.Policy.validate(); err != nil {
		return nil, err
	}
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInterface, ifname, err)
	}
	if err := ensureBPFFS(log); err != nil {
		return nil, err
	}
	s := &Steering{
		ifname:  ifname,
		ifindex: ifc.Index,
		dir:     filepath.Join(PinRoot, ifname),
		log:     log,
		lockFD:  -1,
		sockets: make(map[uint32]int),
	}
	if s.lockFD, err = lockPinDir(s.dir); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.teardown()
		}
	}()
	if err := removeStale(s.dir, ifname, log); err != nil {
		return nil, err
	}
	if err := loadSteerObjects(&s.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("%w: %+v", ErrLoad, ve)
		}
		return nil, fmt.Errorf("%w: %v", ErrLoad, err)
	}
	if info, err := s.objs.XvsSteer.Info(); err == nil {
		if id, ok := info.ID(); ok {
			s.progID = uint32(id)
		}
	}
	if err := s.writePolicy(o.Policy); err != nil {
		return nil, err
	}
	if s.xdpMode, err = s.attach(o.XDPMode); err != nil {
		return nil, err
	}
	if err := s.pinAll(); err != nil {
		return nil, err
	}
	ok = true
	log.Info("bpf: steering attached", "ifname", ifname, "xdp_mode", s.xdpMode, "policy", o.Policy, "pins", s.dir)
	return s, nil
}

// attach hooks the loaded program to the interface in the wanted mode
// and returns the mode it got: the caller records it (XDPMode is read
// without the lock, so it is written only by Attach).
func (s *Steering) attach(want XDPMode) (XDPMode, error) {
	try := func(flags link.XDPAttachFlags) (link.Link, error) {
		return link.AttachXDP(link.XDPOptions{Program: s.objs.XvsSteer, Interface: s.ifindex, Flags: flags})
	}
	var l link.Link
	var err error
	var mode XDPMode
	switch want {
	case XDPDriver, XDPAuto:
		l, err = try(link.XDPDriverMode)
		mode = XDPDriver
		if err != nil && want == XDPAuto && !isBusy(err) {
			s.log.Warn("bpf: native XDP unavailable, falling back to generic mode (slower, copy-mode AF_XDP only)",
				"ifname", s.ifname, "err", err)
			l, err = try(link.XDPGenericMode)
			mode = XDPGeneric
		}
	case XDPGeneric:
		l, err = try(link.XDPGenericMode)
		mode = XDPGeneric
	default:
		return 0, fmt.Errorf("%w: unknown XDP mode %d", ErrAttach, int(want))
	}
	if err != nil {
		if isBusy(err) {
			return 0, fmt.Errorf("%w: %s (an XDP program not pinned by xvswitch is attached): %v", ErrBusy, s.ifname, err)
		}
		return 0, fmt.Errorf("%w: %s in %s mode: %v", ErrAttach, s.ifname, mode, err)
	}
	s.link = l
	return mode, nil
}

// isBusy tells "another program holds the hook" from "this mode is not
// available here".
func isBusy(err error) bool {
	return errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST)
}

// pinAll pins the link first: a crash right after it leaves a link the next
// run finds and detaches; one before it leaves no link at all (an unpinned
// link detaches when its process dies).
func (s *Steering) pinAll() error {
	pins := []struct {
		name string
		pin  func(string) error
	}{
		{pinLink, s.link.Pin},
		{pinProg, s.objs.XvsSteer.Pin},
		{steerMapXsks, s.objs.Xsks.Pin},
		{steerMapMacs, s.objs.Macs.Pin},
		{steerMapConfig, s.objs.Config.Pin},
		{steerMapCounters, s.objs.Counters.Pin},
		{steerMapHostV4, s.objs.HostV4.Pin},
		{steerMapHostV6, s.objs.HostV6.Pin},
		{steerMapQueueOwners, s.objs.QueueOwners.Pin},
	}
	for _, p := range pins {
		if err := p.pin(filepath.Join(s.dir, p.name)); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrPin, p.name, err)
		}
	}
	return nil
}

// Close stops TrackHostAddrs, detaches the program, removes the pins and
// the interface's pin directory, and closes the maps (which empties the
// XSKMAP; the sockets themselves are the caller's). Closing twice is a
// no-op.
func (s *Steering) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	t := s.tracker
	s.mu.Unlock()
	// Outside the lock: the tracker takes it to write the maps (and then
	// finds them closed).
	stopTracking(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.teardown()
	s.log.Info("bpf: steering detached", "ifname", s.ifname)
	return err
}

// teardown undoes whatever part of Attach happened; errors are collected,
// not stopped at, so one failure leaves as little behind as possible.
func (s *Steering) teardown() error {
	var errs []error
	if s.link != nil {
		_ = s.link.Unpin()
		// Detach even if someone else holds an fd of the link.
		if err := s.link.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
			errs = append(errs, fmt.Errorf("detach %s: %w", s.ifname, err))
		}
		_ = s.link.Close()
		s.link = nil
	}
	if s.objs.XvsSteer != nil { // LoadAndAssign sets all objects or none
		for _, p := range []interface{ Unpin() error }{s.objs.XvsSteer, s.objs.Xsks, s.objs.Macs, s.objs.Config, s.objs.Counters, s.objs.HostV4, s.objs.HostV6, s.objs.QueueOwners} {
			_ = p.Unpin()
		}
		_ = s.objs.Close()
		s.objs = steerObjects{}
	}
	if s.lockFD >= 0 {
		// The directory should be empty now; anything left is not ours
		// to delete, so use Remove, not RemoveAll.
		if err := os.Remove(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%w: remove %s: %v", ErrPin, s.dir, err))
		}
		unix.Close(s.lockFD)
		s.lockFD = -1
	}
	return errors.Join(errs...)
}
