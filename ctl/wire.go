package ctl

// DefaultPath is where the daemon listens for the CLI.
const DefaultPath = "/run/xvswitch/ctl.sock"

// The requests the daemon answers (Request.Op).
const (
	OpShowPorts = "show-ports"
	OpShowFDB   = "show-fdb"
	OpShowStats = "show-stats"
	// OpShowWorkers: each poll worker, its queues, sleeps and busy share.
	OpShowWorkers = "show-workers"
	// OpClearStats zeroes the switch's own counters (every queue's, and
	// refused learning); the kernel's (PortCounters.Kernel) stay since
	// start: the switch cannot reset them.
	OpClearStats = "clear-stats"
	OpAddPort    = "add-port" // Request.NIC or Request.Vhost: a port spec
	OpDelPort    = "del-port" // Request.Name
	// OpCapture streams a port's frames (Request.Name, Direction,
	// Count): the response line is followed by the capture stream of
	// capture.go, until the capture ends.
	OpCapture = "capture"
)

// Request is one control-socket request: a JSON object on one line.
type Request struct {
	Op    string `json:"op"`              // one of the Op constants
	NIC   string `json:"nic,omitempty"`   // add-port: a --nic spec
	Vhost string `json:"vhost,omitempty"` // add-port: a --vhost spec
	Name  string `json:"name,omitempty"`  // del-port; capture: the port
	// Direction is what a capture takes: DirIn, DirOut or DirBoth (also
	// when empty).
	Direction string `json:"direction,omitempty"`
	// Count ends a capture after that many frames (0: when stopped).
	Count int `json:"count,omitempty"`
}

// Response answers a Request. Error is set when the request failed.
type Response struct {
	Error string         `json:"error,omitempty"`
	Ports []PortInfo     `json:"ports,omitempty"`
	FDB   []FDBRow       `json:"fdb,omitempty"`
	Stats []PortCounters `json:"stats,omitempty"`
	// Workers answers OpShowWorkers.
	Workers []WorkerInfo `json:"workers,omitempty"`
	// Capture says what a capture request started; its frames follow.
	Capture *CaptureInfo `json:"capture,omitempty"`
	// Stream, set by a handler, is never on the wire: it is what follows
	// the response on the connection (OpCapture). Serve calls it once the
	// response is written, and always calls it (with its context already
	// done if the response could not be written), so a handler may hold
	// resources for the stream and release them there.
	Stream Stream `json:"-"`
}

// PortInfo is one row of `xvswitch show ports`.
type PortInfo struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "nic", "vhost", or "gen" (the benchmark-only generator)
	State  string `json:"state"`
	Queues int    `json:"queues"`
	Detail string `json:"detail"` // interface and XDP/AF_XDP mode, or socket path and negotiated ring
	Peer   string `json:"xconnect,omitempty"`
	// VLAN is the port's VLAN settings as its spec writes them
	// ("vlan=10", "trunk=10+20", "vlan=5,trunk=10+20"); empty: none, the
	// port carries every VLAN as it comes.
	VLAN string `json:"vlan,omitempty"`
}

// FDBRow is one row of `xvswitch show fdb`: a MAC and the port it is on.
type FDBRow struct {
	MAC    string `json:"mac"`
	VLAN   int    `json:"vlan"` // 0: untagged on ports without VLAN settings
	Port   string `json:"port"`
	Static bool   `json:"static"`
	Age    uint32 `json:"age_seconds"`
}

// WorkerInfo is one row of `xvswitch show workers`: a poll worker, the
// queues it polls, and how it spent its time, from its own timestamps
// taken when it goes to sleep in epoll and when it wakes.
type WorkerInfo struct {
	ID  int `json:"id"`
	CPU int `json:"cpu"` // the CPU it is pinned to, -1 if none
	// Queues are the receive queues it polls, as PORT/QUEUE.
	Queues []string `json:"queues"`
	// Sleeps is how many times it went idle and slept in epoll.
	Sleeps uint64 `json:"sleeps"`
	// RunningNs is how long it has run, IdleNs how much of that it slept.
	RunningNs int64 `json:"running_ns"`
	IdleNs    int64 `json:"idle_ns"`
	// BusyPercent is 100 * (RunningNs - IdleNs) / RunningNs: the share of
	// its time awake, polling (empty polls before it sleeps included).
	BusyPercent float64 `json:"busy_percent"`
}
