package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// This file adds to a profile where inside its hottest functions the
// samples sit: `perf annotate` gives each instruction's share of its
// function's samples, and `go tool addr2line` the Go source line of each
// hot one, so that a reader sees "64% of forward's samples wait on the
// load of a frame's first byte" without the perf.data (which stays in the
// run's work directory, gone unless -keep). perf charges a stalled load to
// the instruction after it (skid), so each hot instruction is printed
// with the one before it.

// hotspotFuncs is how many of the top functions get their hot
// instructions listed; hotspotMin is the share of a function's samples
// an instruction needs to be listed.
const (
	hotspotFuncs = 3
	hotspotMin   = 2.0
)

// annotatedInsn is one instruction of perf annotate's listing.
type annotatedInsn struct {
	pct  float64
	addr uint64
	text string
}

// hotspots returns the hot-instruction section for the top functions of
// a profile (skipping the Go runtime's, whose hot spots say nothing about
// xvswitch's code), or why it could not.
func hotspots(data, binary string, top []ProfileEntry) string {
	var b strings.Builder
	b.WriteString("\n## Where the samples sit in the top functions (perf annotate; instructions with at least ")
	fmt.Fprintf(&b, "%.0f%% of their function's samples, each after the one before it, which perf's skid makes the likely culprit; source lines by go tool addr2line)\n", hotspotMin)
	done := 0
	for _, e := range top {
		if done == hotspotFuncs {
			break
		}
		if strings.HasPrefix(e.Symbol, "runtime.") {
			continue
		}
		done++
		out, err := exec.Command("taskset", "-c", strconv.Itoa(guestCPU), "perf", "annotate", "-i", data, "--stdio", "-s", e.Symbol).Output()
		if err != nil {
			fmt.Fprintf(&b, "\n%s: perf annotate: %v\n", e.Symbol, err)
			continue
		}
		shown := hotAndBefore(parseAnnotate(out))
		lines := sourceLines(binary, shown)
		fmt.Fprintf(&b, "\n%s (%.1f%% of the worker's samples):\n\n", e.Symbol, e.SelfPercent)
		for _, in := range shown {
			mark := "   "
			if in.pct >= hotspotMin {
				mark = "  >"
			}
			fmt.Fprintf(&b, "%s %6.2f%%  %-28s %x: %s\n", mark, in.pct, lines[in.addr], in.addr, in.text)
		}
	}
	return b.String()
}

// hotAndBefore is the instructions to print: each with at least
// hotspotMin, and the one before it unless already there.
func hotAndBefore(insns []annotatedInsn) []annotatedInsn {
	var shown []annotatedInsn
	for i, in := range insns {
		if in.pct < hotspotMin {
			continue
		}
		if i > 0 && insns[i-1].pct < hotspotMin {
			shown = append(shown, insns[i-1])
		}
		shown = append(shown, in)
	}
	return shown
}

// parseAnnotate reads perf annotate --stdio's instruction lines,
// "   64.05 :   89782b: mov    %r15d,%r11d", in address order.
func parseAnnotate(out []byte) []annotatedInsn {
	var insns []annotatedInsn
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		pctStr, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		pct, err := strconv.ParseFloat(strings.TrimSpace(pctStr), 64)
		if err != nil {
			continue
		}
		addrStr, text, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		addr, err := strconv.ParseUint(strings.TrimSpace(addrStr), 16, 64)
		if err != nil {
			continue
		}
		insns = append(insns, annotatedInsn{pct: pct, addr: addr, text: strings.Join(strings.Fields(text), " ")})
	}
	return insns
}

// sourceLines maps the instructions' addresses to "file.go:line" with go
// tool addr2line (empty without a Go toolchain).
func sourceLines(binary string, insns []annotatedInsn) map[uint64]string {
	lines := map[uint64]string{}
	if len(insns) == 0 {
		return lines
	}
	addrs := make([]uint64, len(insns))
	var in bytes.Buffer
	for i, insn := range insns {
		addrs[i] = insn.addr
		fmt.Fprintf(&in, "0x%x\n", insn.addr)
	}
	cmd := exec.Command("go", "tool", "addr2line", binary)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		return lines
	}
	// Two lines per address: the function, then file:line.
	ls := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := 0; i+1 < len(ls) && i/2 < len(addrs); i += 2 {
		file, line, _ := strings.Cut(ls[i+1], ":")
		if j := strings.LastIndex(file, "/"); j >= 0 {
			// The package directory and file: enough to find it.
			if k := strings.LastIndex(file[:j], "/"); k >= 0 {
				file = file[k+1:]
			}
		}
		lines[addrs[i/2]] = file + ":" + line
	}
	return lines
}
