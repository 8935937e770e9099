package qemu

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// GuestRun is what a guest reported, parsed from its report port, plus
// everything needed to explain a failure.
type GuestRun struct {
	// Completed means the guest got to the end of its script.
	Completed bool
	// BeginUptime and EndUptime are the guest's uptime (seconds) when its
	// script started (modules loaded) and ended: the boot and the run.
	BeginUptime, EndUptime float64
	NICs                   []GuestNICReport
	Results                []GuestResult
	// Console is the kernel console (ttyS0), Reports the raw report port
	// (ttyS1), QEMUOutput QEMU's own stdout and stderr.
	Console, Reports, QEMUOutput string
	// Duration is wall time from QEMU's start to its exit.
	Duration time.Duration
	// TimedOut means the harness killed QEMU.
	TimedOut bool
	// ExitErr is QEMU's exit status; not a verdict (see Guest.Wait).
	ExitErr error
}

// GuestNICReport is what the guest saw of one NIC before running commands.
type GuestNICReport struct {
	Index       int
	OK          bool // found by its MAC
	Ifname, MAC string
	Netns       string
	MTU         int
	Carrier     bool
	Features    string // /sys/class/net/<if>/device/features: '0'/'1', bit N at index N
	Detail      string
	Fields      map[string]string // all key=value pairs of the report
}

// GuestResult is the outcome of one GuestCommand.
type GuestResult struct {
	Name string
	Kind GuestCommandKind
	// OK is the command's verdict: exit status 0 for a shell command,
	// every ping answered, every byte arrived intact for GuestTCP.
	OK bool
	// Missing means the guest never reported this command.
	Missing bool
	RC      int
	// Detail explains the verdict in one line.
	Detail string
	// Output is what the command printed (stdout and stderr).
	Output []string
	// Fields are all key=value pairs of the result line.
	Fields map[string]string
	// Ping statistics.
	Transmitted, Received int
	// TCP: bytes and sha256 of what arrived (GuestTCP, GuestTCPReceive)
	// and of what was sent (GuestTCP, GuestTCPSend).
	Bytes, SentBytes   int64
	SHA256, SentSHA256 string
}

// Result returns the named command's result; one the guest never reported
// has Missing and not OK.
func (r *GuestRun) Result(name string) GuestResult {
	for _, res := range r.Results {
		if res.Name == name {
			return res
		}
	}
	return GuestResult{Name: name, Missing: true, Detail: "the guest reported no result"}
}

// NIC returns the report of NIC i (zero value if the guest made none).
func (r *GuestRun) NIC(i int) GuestNICReport {
	for _, n := range r.NICs {
		if n.Index == i {
			return n
		}
	}
	return GuestNICReport{Index: i, Detail: "the guest reported nothing on this NIC"}
}

// HasFeature reports whether the guest's driver negotiated virtio feature
// bit on NIC nic (e.g. 34, VIRTIO_F_RING_PACKED).
func (r *GuestRun) HasFeature(nic, bit int) bool {
	f := r.NIC(nic).Features
	return bit >= 0 && bit < len(f) && f[bit] == '1'
}

// Failures lists, one line each, why the run is not a full success: the
// guest did not finish, a NIC was not found or has no carrier, a command
// failed or is missing. Empty means all is well.
func (r *GuestRun) Failures(cmds []GuestCommand) []string {
	var f []string
	if r.TimedOut {
		f = append(f, fmt.Sprintf("QEMU killed after %v", r.Duration.Round(time.Second)))
	}
	if !r.Completed {
		f = append(f, "the guest did not finish its script")
	}
	for _, n := range r.NICs {
		if !n.OK {
			f = append(f, fmt.Sprintf("nic %d: %s", n.Index, n.Detail))
		} else if !n.Carrier {
			f = append(f, fmt.Sprintf("nic %d (%s): no carrier", n.Index, n.Ifname))
		}
	}
	for _, c := range cmds {
		if res := r.Result(c.Name); !res.OK {
			f = append(f, fmt.Sprintf("%s: %s", c.Name, res.Detail))
		}
	}
	return f
}

// RequireOK fails t unless the guest finished and every command of cfg
// succeeded. (StartGuest's cleanup logs the console and reports of a
// failed test.)
func (r *GuestRun) RequireOK(t testing.TB, cfg GuestConfig) {
	t.Helper()
	if f := r.Failures(cfg.Commands); len(f) > 0 {
		msg := "guest run failed:\n  " + strings.Join(f, "\n  ")
		if !r.Completed && r.QEMUOutput != "" {
			msg += "\nqemu: " + r.QEMUOutput
		}
		t.Fatal(msg)
	}
}

var pingStatsRE = regexp.MustCompile(`(\d+) packets transmitted, (\d+) packets received`)

// parseReports turns the report port's lines into a GuestRun. Lines are
// "XVS-<KIND> key=value ..." where a detail= value runs to the end of the
// line, and "XVS-OUT <name> <text>" carries command output.
func parseReports(s string, cmds []GuestCommand) *GuestRun {
	r := &GuestRun{}
	kinds := map[string]GuestCommand{}
	for _, c := range cmds {
		kinds[c.Name] = c
	}
	outputs := map[string][]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "XVS-OUT":
			name, text, _ := strings.Cut(rest, " ")
			outputs[name] = append(outputs[name], text)
		case "XVS-BEGIN":
			r.BeginUptime, _ = strconv.ParseFloat(reportFields(rest)["uptime"], 64)
		case "XVS-END":
			r.Completed = true
			r.EndUptime, _ = strconv.ParseFloat(reportFields(rest)["uptime"], 64)
		case "XVS-NIC":
			f := reportFields(rest)
			n := GuestNICReport{OK: f["ok"] == "1", Ifname: f["ifname"], MAC: f["mac"], Netns: f["ns"],
				Carrier: f["carrier"] == "1", Features: f["features"], Detail: f["detail"], Fields: f}
			n.Index, _ = strconv.Atoi(f["idx"])
			n.MTU, _ = strconv.Atoi(f["mtu"])
			r.NICs = append(r.NICs, n)
		case "XVS-RESULT":
			f := reportFields(rest)
			res := GuestResult{Name: f["name"], OK: f["ok"] == "1", Fields: f, SHA256: f["sha256"], SentSHA256: f["sent_sha256"]}
			res.RC, _ = strconv.Atoi(f["rc"])
			res.Bytes, _ = strconv.ParseInt(f["bytes"], 10, 64)
			res.SentBytes, _ = strconv.ParseInt(f["sent_bytes"], 10, 64)
			res.Kind = kinds[res.Name].Kind
			res.Output = outputs[res.Name]
			judge(&res, kinds[res.Name])
			r.Results = append(r.Results, res)
		}
	}
	return r
}

// judge sets a result's Detail, and applies what the guest cannot judge
// alone (ping's exit status is 0 when any reply came back).
func judge(res *GuestResult, c GuestCommand) {
	switch res.Kind {
	case CmdPing:
		for _, l := range res.Output {
			if m := pingStatsRE.FindStringSubmatch(l); m != nil {
				res.Transmitted, _ = strconv.Atoi(m[1])
				res.Received, _ = strconv.Atoi(m[2])
			}
		}
		want := c.Count
		if want <= 0 {
			want = 3
		}
		res.OK = res.OK && res.Transmitted == want && res.Received == want
		res.Detail = fmt.Sprintf("ping %s: %d transmitted, %d received (want %d), rc=%d",
			c.Target, res.Transmitted, res.Received, want, res.RC)
	case CmdTCP:
		res.Detail = fmt.Sprintf("tcp to %s:%d: sent %d bytes sha256 %.12s, server got %d bytes sha256 %.12s, client rc=%s server rc=%s",
			c.Target, c.Port, res.SentBytes, res.SentSHA256, res.Bytes, res.SHA256, res.Fields["rc"], res.Fields["server_rc"])
	case CmdTCPReceive:
		res.Detail = fmt.Sprintf("tcp receive on port %d: got %d bytes sha256 %.12s, rc=%s",
			c.Port, res.Bytes, res.SHA256, res.Fields["server_rc"])
	case CmdTCPSend:
		res.Detail = fmt.Sprintf("tcp send to %s:%d: %d bytes sha256 %.12s, rc=%d",
			c.Target, c.Port, res.SentBytes, res.SentSHA256, res.RC)
	default:
		res.Detail = fmt.Sprintf("exit status %d", res.RC)
	}
	if !res.OK && len(res.Output) > 0 {
		res.Detail += "; output: " + strings.Join(lastN(res.Output, 5), " | ")
	}
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// reportFields splits "k=v k=v detail=free text" into a map.
func reportFields(s string) map[string]string {
	f := map[string]string{}
	for s != "" {
		var tok string
		if strings.HasPrefix(s, "detail=") {
			tok, s = s, ""
		} else {
			tok, s, _ = strings.Cut(s, " ")
		}
		if k, v, ok := strings.Cut(tok, "="); ok {
			f[k] = v
		}
	}
	return f
}
