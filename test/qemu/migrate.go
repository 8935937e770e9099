package qemu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// Live migration on one host: the guest runs in a source QEMU with a QMP
// monitor (GuestConfig.Monitor); StartIncoming starts a second QEMU, the
// same machine and the same MACs with its own NICs (another back-end's
// sockets), waiting on a migration URI; Migrate asks the source, over QMP,
// to send the guest there and waits until it has. The guest's script goes
// on in the target, whose serial files take over: MigratedRun joins both
// runs' reports.

// StartIncoming starts the migration target of src: QEMU with cfg, which
// must describe the same guest as src's config (memory, CPUs, NICs in the
// same order) with whatever sockets the target's NICs use, waiting for the
// guest on uri ("unix:/path"). It boots the same kernel and initrd, and
// gives each NIC src's MAC.
func StartIncoming(t testing.TB, src *Guest, cfg GuestConfig, uri string) *Guest {
	t.Helper()
	if len(cfg.NICs) != len(src.macs) {
		t.Fatalf("migration target with %d NICs, the source has %d", len(cfg.NICs), len(src.macs))
	}
	cfg.Incoming = uri
	cfg.Monitor = true
	img := EnsureGuest(t)
	return startQEMU(t, cfg, src.macs, img.Kernel, src.initrd, t.TempDir())
}

// MonitorArgs are the options StartGuest adds to CommandLine's for
// cfg.Monitor (a QMP socket at qmp) and cfg.Incoming. Documentation
// quotes them (docs/vms.md, "Live migration").
func MonitorArgs(cfg GuestConfig, qmp string) []string {
	var args []string
	if cfg.Monitor {
		args = append(args, "-qmp", "unix:"+qmp+",server=on,wait=off")
	}
	if cfg.Incoming != "" {
		args = append(args, "-incoming", cfg.Incoming)
	}
	return args
}

// QMPPath is the guest's QMP socket (GuestConfig.Monitor), or "".
func (g *Guest) QMPPath() string { return g.qmp }

// QMP is a connection to a QEMU's QMP monitor, in command mode.
type QMP struct {
	c net.Conn
	r *bufio.Reader
}

// DialQMP connects to the QMP socket at path, retrying until QEMU listens
// or timeout passes, and leaves capabilities negotiation mode.
func DialQMP(path string, timeout time.Duration) (*QMP, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			q := &QMP{c: c, r: bufio.NewReader(c)}
			if _, err := q.readReply(deadline); err != nil { // the greeting
				c.Close()
				return nil, err
			}
			if _, err := q.Execute("qmp_capabilities", nil, time.Until(deadline)); err != nil {
				c.Close()
				return nil, err
			}
			return q, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("qmp %s: %w", path, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Close closes the connection.
func (q *QMP) Close() error { return q.c.Close() }

// Execute runs a QMP command and returns its "return" value; an "error"
// answer is an error. Asynchronous events on the way are skipped.
func (q *QMP) Execute(cmd string, args any, timeout time.Duration) (json.RawMessage, error) {
	deadline := time.Now().Add(timeout)
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	_ = q.c.SetWriteDeadline(deadline)
	if _, err := q.c.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	for {
		m, err := q.readReply(deadline)
		if err != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		if _, ev := m["event"]; ev {
			continue
		}
		if e, ok := m["error"]; ok {
			return nil, fmt.Errorf("qmp %s: %s", cmd, e)
		}
		return m["return"], nil
	}
}

func (q *QMP) readReply(deadline time.Time) (map[string]json.RawMessage, error) {
	_ = q.c.SetReadDeadline(deadline)
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("%w: %q", err, line)
	}
	return m, nil
}

// Migration is what query-migrate said when the migration ended.
type Migration struct {
	Status string `json:"status"`
	// Milliseconds: the whole migration, the guest stopped at its end
	// (the last dirty pages and the device state), and the setup.
	TotalTime int64 `json:"total-time"`
	Downtime  int64 `json:"downtime"`
	SetupTime int64 `json:"setup-time"`
	RAM       struct {
		Transferred int64 `json:"transferred"`
		Total       int64 `json:"total"`
		Duplicate   int64 `json:"duplicate"`
		Normal      int64 `json:"normal"`
		DirtySync   int64 `json:"dirty-sync-count"`
	} `json:"ram"`
	Error string `json:"error-desc"`
}

// Migrate migrates src's guest to the target listening on uri and waits,
// at most timeout, until the migration completed or failed. The source is
// left paused (QEMU's postmigrate state); the caller stops it.
func Migrate(src *Guest, uri string, timeout time.Duration) (Migration, error) {
	deadline := time.Now().Add(timeout)
	q, err := DialQMP(src.qmp, timeout)
	if err != nil {
		return Migration{}, err
	}
	defer q.Close()
	if _, err := q.Execute("migrate", map[string]any{"uri": uri}, time.Until(deadline)); err != nil {
		return Migration{}, err
	}
	for {
		raw, err := q.Execute("query-migrate", nil, time.Until(deadline))
		if err != nil {
			return Migration{}, err
		}
		var m Migration
		if err := json.Unmarshal(raw, &m); err != nil {
			return Migration{}, err
		}
		switch m.Status {
		case "completed":
			return m, nil
		case "failed", "cancelled":
			return m, fmt.Errorf("migration %s: %s", m.Status, m.Error)
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("migration still %q after %v", m.Status, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MigratedRun waits for dst, the migration target of src, to exit and
// returns what the guest reported in both: its reports before the
// migration are in src's files, the rest in dst's.
func MigratedRun(src, dst *Guest) *GuestRun {
	r := dst.Wait()
	srcRep, _ := os.ReadFile(src.reports)
	srcCon, _ := os.ReadFile(src.console)
	joined := *parseReports(string(srcRep)+r.Reports, dst.cfg.Commands)
	joined.Console = string(srcCon) + r.Console
	joined.Reports = string(srcRep) + r.Reports
	joined.QEMUOutput = "source:\n" + src.qemuOut.String() + "target:\n" + r.QEMUOutput
	joined.Duration, joined.TimedOut, joined.ExitErr = r.Duration, r.TimedOut, r.ExitErr
	return &joined
}
