package vhost

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes a vhost-user virtio-net device.
type Config struct {
	// Name identifies the device in logs and events.
	Name string
	// Path is the vhost-user socket. In server mode (the default) the
	// device listens there; with Client it connects there (QEMU chardev
	// with server=on). Empty: no socket; hand connections to ServeConn.
	Path   string
	Client bool
	// SocketMode is the socket file's permission bits in server mode
	// (default 0660); SocketGID, when non-zero, its group.
	SocketMode os.FileMode
	SocketGID  int
	// ReconnectMin and ReconnectMax bound the client-mode backoff
	// between connection attempts (defaults 50ms and 2s).
	ReconnectMin, ReconnectMax time.Duration

	// QueuePairs is the number of RX/TX queue pairs offered (default 1,
	// at most MaxQueuePairs). More than one offers VIRTIO_NET_F_MQ.
	QueuePairs int
	// MAC, when set, is offered to the guest (VIRTIO_NET_F_MAC).
	MAC net.HardwareAddr
	// MTU, when non-zero, is offered to the guest (VIRTIO_NET_F_MTU) and
	// bounds what NET_SET_MTU accepts.
	MTU int
	// NoInOrder stops VIRTIO_F_IN_ORDER from being offered. IN_ORDER is
	// offered by default because virtionet completes every queue's chains
	// in the order it popped them (TX Complete and RX Deliver/Flush push in
	// pop order; checked against DPDK's in-order driver on both ring kinds
	// and against drivertest's in-order model). A data path that completes
	// out of order must set it.
	NoInOrder bool
	// NoOffloads stops the checksum and TSO offloads from being offered
	// (a port's offloads=off): guests then checksum and segment every
	// frame themselves.
	NoOffloads bool
	// RxBackoff is the receive queues' back-off after a burst found the
	// guest without buffers (virtionet.QueueConfig.RxBackoff; 0 or
	// negative: none).
	RxBackoff time.Duration
	// DisableFeatures removes virtio feature bits from the offer (for
	// example 1<<virtq.FeatureRingPacked to force the split ring).
	DisableFeatures uint64
	// MaxMemory bounds the address space the guest's memory table may
	// take: the sum of its regions' mappings, each rounded out to whole
	// pages (huge pages on hugetlbfs). A table or ADD_MEM_REG that needs
	// more is refused and the device broken. Default DefaultMaxMemory.
	MaxMemory uint64

	// Contiguous maps the memory table as one range of this process's
	// address space, [switch-owned area | region 0 | region 1 | ...], so
	// that its owner can register it as an AF_XDP UMEM (MemoryLayout,
	// docs/guest-memory.md), and keeps each region's fd open while it is
	// mapped. Off by default: a UMEM registration pins every page of the
	// range, and without it a region is mapped on its own. With it,
	// MaxMemory bounds the whole range.
	Contiguous bool
	// SwitchArea is the size of the switch-owned area at the start of the
	// range (rounded up to a page), with Contiguous.
	SwitchArea uint64
	// OnMemoryChange, with Contiguous, is called whenever the memory table
	// is replaced (SET_MEM_TABLE, ADD_MEM_REG, REM_MEM_REG, the session's
	// end), while the rings are paused and before the old range is
	// unmapped: an owner that registered the old range must let go of it
	// (close its sockets) before it returns. It runs on a goroutine of its
	// own while the control path waits for it, at most
	// MemoryChangeTimeout (default DefaultMemoryChangeTimeout); after that
	// the control path goes on and the old range stays mapped until the
	// call returns. It must not call Device methods other than
	// MemoryLayout, Name and the queue accessors: they wait for the
	// control path, which waits for it.
	OnMemoryChange      func(MemoryChange)
	MemoryChangeTimeout time.Duration
	// OnRxStop, if set, is called on the control path before a running
	// receive ring (virtqueue index, even) is taken from the data path
	// (GET_VRING_BASE, a reset, a memory table replaced, the session's
	// end): one who lent the queue's receive buffers out
	// (virtionet.RxQueue.LendBuffers) must make sure nothing writes them
	// any more and call AbandonLent before it returns, so that the rebind
	// that follows gives them back to the guest on the ring they came
	// from. Same rules as OnMemoryChange for what it may call; it should
	// not take long (the control path waits).
	OnRxStop func(index int)
	// OnTxStop is OnRxStop for a running transmit ring (virtqueue index,
	// odd): one who holds the queue's chains past their burst
	// (virtionet.TxQueue.Hold: their bytes handed to a socket by address)
	// must make sure nothing reads them any more and call AbandonHeld
	// before it returns, so that the rebind that follows gives them back
	// to the guest (used, length 0) on the ring they came from. Same
	// rules as OnRxStop.
	OnTxStop func(index int)

	// OnEvent, if set, receives the device's lifecycle events. It is
	// called from the device's control goroutine, one event at a time; it
	// must not block for long, and may call any Device method.
	OnEvent func(Event)
	// Logger receives one line per lifecycle change and per error
	// (default slog.Default(), with the device's Name as "device"; a
	// Logger given here is used as it is, labelled by its owner).
	Logger *slog.Logger

	// newRing overrides the ring constructor (tests).
	newRing ringFactory
}

// MaxQueuePairs bounds Config.QueuePairs: vring indexes are 8 bits wide in
// SET_VRING_KICK/CALL/ERR.
const MaxQueuePairs = 128

// Device is one vhost-user virtio-net device: a socket, at most one
// front-end connection at a time, and 2*QueuePairs virtqueues.
type Device struct {
	cfg     Config
	log     *slog.Logger
	churn   eventChurn // holds back the lines of a front-end failing in a loop (eventchurn.go)
	offered uint64     // virtio features offered
	proto   uint64     // protocol features offered
	queues  []*Queue

	// mu guards the session state below and the queues' ctl; the serve
	// goroutine holds it while it handles a message.
	mu      sync.Mutex
	sess    *session      // nil when no front-end is connected
	curSID  atomic.Uint64 // sess.id, or 0, for Break without d.mu
	lastErr error         // why the last session ended
	nextSID uint64
	memGen  uint64                       // the last MemoryChange.Generation
	layout  atomic.Pointer[MemoryLayout] // the current range's (Contiguous)
	closed  bool
	wg      sync.WaitGroup
	stop    chan struct{}
	ln      *net.UnixListener

	// breakMu guards the pending break of the current session, which the
	// data path may set from any goroutine without waiting for mu.
	breakMu  sync.Mutex
	breakSID uint64
	breakErr error
	connOf   map[uint64]*net.UnixConn
}

// Open creates the device and starts serving its socket: in server mode it
// listens on cfg.Path (replacing a stale socket file, refusing one a live
// process listens on); in client mode it connects to cfg.Path in the
// background, retrying with backoff.
func Open(cfg Config) (*Device, error) {
	if cfg.QueuePairs == 0 {
		cfg.QueuePairs = 1
	}
	if cfg.QueuePairs < 0 || cfg.QueuePairs > MaxQueuePairs {
		return nil, fmt.Errorf("vhost: %d queue pairs (1..%d)", cfg.QueuePairs, MaxQueuePairs)
	}
	if cfg.MAC != nil && len(cfg.MAC) != 6 {
		return nil, fmt.Errorf("vhost: MAC %v is not 6 bytes", cfg.MAC)
	}
	if cfg.MTU != 0 && (cfg.MTU < minMTU || cfg.MTU > maxMTU) {
		return nil, fmt.Errorf("vhost: MTU %d (%d..%d)", cfg.MTU, minMTU, maxMTU)
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Path
	}
	if cfg.SocketMode == 0 {
		cfg.SocketMode = 0o660
	}
	if cfg.ReconnectMin <= 0 {
		cfg.ReconnectMin = 50 * time.Millisecond
	}
	if cfg.ReconnectMax < cfg.ReconnectMin {
		cfg.ReconnectMax = 2 * time.Second
		if cfg.ReconnectMax < cfg.ReconnectMin {
			cfg.ReconnectMax = cfg.ReconnectMin
		}
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = DefaultMaxMemory
	}
	if cfg.Contiguous && cfg.SwitchArea >= cfg.MaxMemory {
		return nil, fmt.Errorf("vhost: a switch area of %d bytes leaves no room for guest memory in MaxMemory %d", cfg.SwitchArea, cfg.MaxMemory)
	}
	if cfg.MemoryChangeTimeout <= 0 {
		cfg.MemoryChangeTimeout = DefaultMemoryChangeTimeout
	}
	if cfg.newRing == nil {
		cfg.newRing = defaultRing
	}
	d := &Device{cfg: cfg, stop: make(chan struct{}), connOf: map[uint64]*net.UnixConn{}}
	d.log = cfg.Logger
	if d.log == nil {
		d.log = slog.Default().With("device", cfg.Name)
	}
	d.offered = offeredFeatures(&cfg)
	d.proto = offeredProtocolFeatures
	for i := 0; i < 2*cfg.QueuePairs; i++ {
		q, err := newQueue(d, i)
		if err != nil {
			d.closeQueues()
			return nil, fmt.Errorf("vhost: queue %d: %w", i, err)
		}
		d.queues = append(d.queues, q)
	}
	if cfg.Path != "" {
		if cfg.Client {
			d.wg.Add(1)
			go d.dialLoop()
		} else {
			ln, err := listen(cfg.Path, cfg.SocketMode, cfg.SocketGID)
			if err != nil {
				d.closeQueues()
				return nil, err
			}
			d.ln = ln
			d.wg.Add(1)
			go d.acceptLoop()
		}
	}
	return d, nil
}

// Name returns the device's name.
func (d *Device) Name() string { return d.cfg.Name }

// NumQueuePairs returns the number of queue pairs the device offers.
func (d *Device) NumQueuePairs() int { return d.cfg.QueuePairs }

// RxQueue returns the handle of queue pair p's RX virtqueue (index 2p):
// the device fills it with frames for the guest.
func (d *Device) RxQueue(p int) *Queue { return d.queues[2*p] }

// TxQueue returns the handle of queue pair p's TX virtqueue (index 2p+1):
// the guest fills it with frames it sends.
func (d *Device) TxQueue(p int) *Queue { return d.queues[2*p+1] }

// Queue returns the handle of virtqueue i (0 <= i < 2*NumQueuePairs).
func (d *Device) Queue(i int) *Queue { return d.queues[i] }

// Info is a snapshot of a device's negotiated state, for the control plane
// and for logs.
type Info struct {
	Connected bool
	Ready     bool   // queue pair 0 runs both rings
	Running   []bool // per virtqueue: started and enabled
	Features  uint64 // negotiated virtio features
	Protocol  uint64 // negotiated protocol features
	Packed    bool   // the rings are packed (VIRTIO_F_RING_PACKED)
	MTU       int    // from NET_SET_MTU, else Config.MTU
	Status    uint8  // virtio device status (SET_STATUS), with NEEDS_RESET once broken
	Regions   int    // guest memory regions mapped
	Offered   uint64 // virtio features offered
	// Logging: the device's writes go to a dirty log (the guest is
	// migrating away: VHOST_F_LOG_ALL and SET_LOG_BASE).
	Logging bool
	// LastError is why the last session ended, if it did not end cleanly
	// (the device was broken, or the connection failed).
	LastError error
}

// Info returns the device's current state.
func (d *Device) Info() Info {
	d.mu.Lock()
	defer d.mu.Unlock()
	inf := Info{Offered: d.offered, MTU: d.cfg.MTU, Running: make([]bool, len(d.queues)), LastError: d.lastErr}
	for i, q := range d.queues {
		inf.Running[i] = q.ctl.act != nil
	}
	s := d.sess
	if s == nil || s.ending {
		return inf
	}
	inf.Connected = true
	inf.Ready = s.ready
	inf.Features = s.features
	inf.Protocol = s.protocol
	inf.Packed = s.packed()
	if s.mtu != 0 {
		inf.MTU = s.mtu
	}
	inf.Status = s.status
	inf.Regions = len(s.maps)
	inf.Logging = s.logging()
	return inf
}

// Break marks the device's current session broken (the data path found
// the guest misbehaving) and closes its connection. It does not wait.
// Prefer Active.Break, which cannot hit a later session.
func (d *Device) Break(reason error) {
	// No d.mu here: a worker may call Break while the control path holds
	// d.mu waiting for that worker's burst to end.
	if sid := d.curSID.Load(); sid != 0 {
		d.breakSession(sid, -1, reason)
	}
}

// breakSession records reason for session sid, if it is still current,
// and closes its connection; the serve goroutine then tears it down.
func (d *Device) breakSession(sid uint64, queue int, reason error) {
	if reason == nil {
		reason = errors.New("broken by the data path")
	}
	if queue >= 0 {
		reason = fmt.Errorf("queue %d: %w", queue, reason)
	}
	d.breakMu.Lock()
	c := d.connOf[sid]
	if c != nil && d.breakSID != sid {
		d.breakSID, d.breakErr = sid, reason
	}
	d.breakMu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// takeBreak returns the data path's break reason for session sid, if any.
func (d *Device) takeBreak(sid uint64) error {
	d.breakMu.Lock()
	defer d.breakMu.Unlock()
	if d.breakSID == sid {
		return d.breakErr
	}
	return nil
}

// Close stops the device: no more connections, the current one closed,
// its rings stopped, guest memory unmapped, the socket file removed
// (server mode). Queue handles must not be used afterwards.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.stop)
	ln := d.ln
	d.mu.Unlock()
	if ln != nil {
		_ = ln.Close() // unlinks the socket file
	}
	d.breakMu.Lock()
	for _, c := range d.connOf {
		_ = c.Close()
	}
	d.breakMu.Unlock()
	d.wg.Wait()
	d.closeQueues()
	return nil
}

func (d *Device) closeQueues() {
	for _, q := range d.queues {
		q.closeFDs()
	}
}

// emit logs an event (eventlog.go) and delivers it to the owner. Called
// without mu held.
func (d *Device) emit(e Event) {
	e.Device = d
	d.logEvent(e)
	if d.cfg.OnEvent != nil {
		d.cfg.OnEvent(e)
	}
}
