package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file profiles xvswitch's worker thread during a measured window
// with perf (-profile DIR, scenarios 1-3 and 5): `perf record -g -t <worker>`
// from the window's start to its end, then `perf report --no-children`,
// written as DIR/profile-<scenario>-<ring>-<size>.txt. Go binaries carry
// their symbol table, so perf names Go functions without help. The
// profiled run is an extra run of xvswitch after the case's rounds, left
// out of the medians and bests: sampling with call chains at 2999 Hz
// costs the worker a little of its time.

// perfHz is the sampling rate: odd, so samples do not fall into step with
// periodic work (docs/profiling.md).
const perfHz = 2999

// profileTopN is how many functions the report lists per profiled case.
const profileTopN = 10

// Profile is a worker's CPU profile over one window.
type Profile struct {
	File    string         `json:"file,omitempty"` // the perf report, in the -profile directory
	TID     int            `json:"worker_tid,omitempty"`
	Samples uint64         `json:"samples"`
	Top     []ProfileEntry `json:"top,omitempty"` // by self share, highest first
	Error   string         `json:"error,omitempty"`
}

// ProfileEntry is one function's share of the worker's samples, its own
// code only (perf's --no-children "Overhead").
type ProfileEntry struct {
	Symbol      string  `json:"symbol"`
	SelfPercent float64 `json:"self_percent"`
	Samples     uint64  `json:"samples"`
}

// profiled says whether -profile covers scenario s: the VM scenarios 1-3,
// and VM -> NIC (5), whose worker spends most of its time in the kernel's
// AF_XDP transmit (perf samples the kernel's stacks too).
func profiled(s int) bool { return s >= 1 && s <= 3 || s == 5 }

// profileName is the file name of case c's profile.
func profileName(c Case) string {
	s := fmt.Sprintf("profile-s%d", c.Scenario)
	if c.Mode != "" {
		s += "-" + c.Mode
	}
	return fmt.Sprintf("%s-%s-%d.txt", s, c.Ring, c.Size)
}

// checkPerf fails unless perf is installed and may record here, so a
// long run does not find out at its first profile.
func checkPerf(dir string) error {
	if _, err := exec.LookPath("perf"); err != nil {
		return fmt.Errorf("-profile: perf is not on PATH (Debian: apt-get install --no-install-recommends linux-perf; docs/profiling.md)")
	}
	data := filepath.Join(dir, "perf-check.data")
	defer os.Remove(data)
	out, err := exec.Command("perf", "record", "-q", "-F", strconv.Itoa(perfHz), "-g", "-o", data, "--", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("-profile: perf cannot record here (%v): %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// perfRecording is a perf record of one thread, running.
type perfRecording struct {
	cmd    *exec.Cmd
	data   string
	tid    int
	out    bytes.Buffer
	exited chan struct{}
	err    error
}

// startPerf starts recording thread tid's call chains into dir, perf
// itself on cpu (the guest's, away from the worker). The caller stops it
// with stop, or kill on the way out.
func startPerf(dir string, tid, cpu int) (*perfRecording, error) {
	p := &perfRecording{data: filepath.Join(dir, "perf.data"), tid: tid, exited: make(chan struct{})}
	p.cmd = exec.Command("taskset", "-c", strconv.Itoa(cpu),
		"perf", "record", "-q", "-F", strconv.Itoa(perfHz), "-g", "-t", strconv.Itoa(tid), "-o", p.data)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf record: %w", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	return p, nil
}

// stop ends the recording: perf writes its file on SIGINT.
func (p *perfRecording) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exited:
		// perf may exit non-zero after SIGINT; its file says whether it
		// recorded.
		if st, err := os.Stat(p.data); err != nil || st.Size() == 0 {
			return fmt.Errorf("perf record: %v: %s", p.err, strings.TrimSpace(p.out.String()))
		}
		return nil
	case <-time.After(30 * time.Second):
		p.kill()
		return fmt.Errorf("perf record did not stop in 30 s")
	}
}

// kill ends perf at once, if it still runs.
func (p *perfRecording) kill() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// report writes the profile's text to path (a header, the functions by
// self share, the call chains into the hottest ones, then where in the
// top functions the samples sit: hotspots.go) and returns its summary.
// binary is the profiled xvswitch, for the source lines.
func (p *perfRecording) report(path, header, binary string) *Profile {
	prof := &Profile{File: filepath.Base(path), TID: p.tid}
	base := []string{"-c", strconv.Itoa(guestCPU), "perf", "report", "-i", p.data, "--stdio", "--no-children", "--sort", "symbol"}
	flat, err := exec.Command("taskset", append(base, "-n", "-g", "none", "--percent-limit", "0.3")...).Output()
	if err != nil {
		prof.Error = fmt.Sprintf("perf report: %v", err)
		return prof
	}
	graph, err := exec.Command("taskset", append(base, "-g", "graph,0.5,caller", "--percent-limit", "2")...).Output()
	if err != nil {
		graph = []byte(fmt.Sprintf("perf report (call graph): %v\n", err))
	}
	prof.Top, prof.Samples = parsePerfFlat(flat)
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("\n## Functions by self share (perf report --no-children --sort symbol -n -g none)\n\n")
	b.Write(flat)
	b.WriteString("\n## Call chains into the functions above 2% (perf report --no-children --sort symbol -g graph,0.5,caller)\n\n")
	b.Write(graph)
	b.WriteString(hotspots(p.data, binary, prof.Top))
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		prof.Error = err.Error()
	}
	return prof
}

// parsePerfFlat reads `perf report --stdio -n --sort symbol -g none`:
// lines "    25.61%          1234  [.] runtime.memmove   -   -". It returns the
// first profileTopN functions and the total samples, from the first
// function's count and share (the listing stops at --percent-limit).
func parsePerfFlat(out []byte) ([]ProfileEntry, uint64) {
	var top []ProfileEntry
	var total uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		f := strings.Fields(l)
		if len(f) < 4 || !strings.HasSuffix(f[0], "%") || !strings.HasPrefix(f[2], "[") {
			continue
		}
		pct, err1 := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
		n, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if len(top) == 0 && pct > 0 {
			total = uint64(float64(n)*100/pct + 0.5)
		}
		// Without branch records perf prints its IPC columns as "-".
		sym := f[3:]
		for len(sym) > 1 && sym[len(sym)-1] == "-" {
			sym = sym[:len(sym)-1]
		}
		if len(top) < profileTopN {
			top = append(top, ProfileEntry{Symbol: strings.Join(sym, " "), SelfPercent: pct, Samples: n})
		}
	}
	return top, total
}
