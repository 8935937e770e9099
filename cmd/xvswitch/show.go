package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/xvswitch/xvswitch/ctl"
)

var showCommand = &command{
	name:     "show",
	synopsis: "ports|fdb|stats|workers [--json] [--ctl PATH]",
	summary:  "show a running switch's ports, forwarding table, counters, workers",
	about: `Shows what a running switch has, as a table or as JSON:
  ports   each port: kind, state (waiting for a guest, ready, stopped, broken),
          queues, cross-connect, and detail: the XDP and AF_XDP mode of a NIC,
          the socket and the negotiated ring kind of a vhost-user port
  fdb     the MACs the switch learned or was given (mac=), their port and age
  stats   per port, and per queue where it has several: packets and bytes
          received and sent, flood copies (the extra copies of flooded
          frames: rx + flood = tx + drops across the switch), drops by
          reason, the path (zerocopy_frames: sent with no copy by the
          switch; copied_frames, copied_bytes: copied by it, counted at
          the queue that sent them; streamed_frames: of those, frames
          written into a guest's buffers with streaming stores, where
          its ring measured that cheaper), and the kernel's XDP
          counters;
          since start or the last 'xvswitch clear stats', the kernel's
          always since start
  workers each poll worker: its CPU, the queues it polls (PORT/QUEUE), how
          often it slept in epoll, and its busy share: the time it was
          awake (polling, empty polls before it sleeps included) since it
          started, from its own timestamps when it sleeps and wakes
`,
	options: func() []option { return new(showCmd).options() },
	run:     func(args []string, out, _ io.Writer) error { return new(showCmd).run(args, out) },
}

// showCmd is `xvswitch show`.
type showCmd struct {
	json bool
	ctl  string
}

var showOps = map[string]string{"ports": ctl.OpShowPorts, "fdb": ctl.OpShowFDB, "stats": ctl.OpShowStats, "workers": ctl.OpShowWorkers}

var showWhat = []string{"ports", "fdb", "stats", "workers"}

func (c *showCmd) options() []option {
	return []option{
		{name: "json", help: "print JSON instead of a table", set: func(s string) error {
			c.json = s == "true"
			return nil
		}},
		ctlOption(&c.ctl),
	}
}

func (c *showCmd) run(args []string, out io.Writer) error {
	pos, err := parseOptions(args, c.options())
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("show what? want %s", orList(showWhat))
	}
	what := pos[0]
	op := showOps[what]
	if op == "" {
		return usagef("cannot show %q: want %s%s", what, orList(showWhat), suggest(what, showWhat, ""))
	}
	resp, err := ctl.Call(c.ctl, ctl.Request{Op: op})
	if err != nil {
		return err
	}
	return printShow(out, what, resp, c.json)
}

// printShow prints a show command's answer as a table, or as JSON.
func printShow(w io.Writer, what string, resp ctl.Response, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		switch what {
		case "ports":
			return enc.Encode(nonNil(resp.Ports))
		case "fdb":
			return enc.Encode(nonNil(resp.FDB))
		case "workers":
			return enc.Encode(nonNil(resp.Workers))
		default:
			return enc.Encode(nonNil(resp.Stats))
		}
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	defer tw.Flush()
	switch what {
	case "ports":
		fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tQUEUES\tXCONNECT\tVLAN\tDETAIL")
		for _, p := range resp.Ports {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", p.Name, p.Kind, p.State, p.Queues, dash(p.Peer), dash(p.VLAN), p.Detail)
		}
	case "fdb":
		fmt.Fprintln(tw, "MAC\tVLAN\tPORT\tTYPE\tAGE")
		for _, e := range resp.FDB {
			kind := "learned"
			if e.Static {
				kind = "static"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%ds\n", e.MAC, e.VLAN, e.Port, kind, e.Age)
		}
	case "workers":
		fmt.Fprintln(tw, "WORKER\tCPU\tSLEEPS\tBUSY\tQUEUES")
		for _, w := range resp.Workers {
			cpu := "-"
			if w.CPU >= 0 {
				cpu = fmt.Sprint(w.CPU)
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f%%\t%s\n", w.ID, cpu, w.Sleeps, w.BusyPercent, dash(strings.Join(w.Queues, " ")))
		}
	default:
		fmt.Fprintln(tw, "PORT\tQUEUE\tRX PKTS\tRX BYTES\tTX PKTS\tTX BYTES\tFLOOD\tDROPS")
		for _, p := range resp.Stats {
			fmt.Fprintf(tw, "%s\t*\t%d\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes, p.FloodCopies, drops(p.Drops))
			if len(p.Kernel) > 0 {
				fmt.Fprintf(tw, "\tkernel\t\t\t\t\t\t%s\n", drops(p.Kernel))
			}
			if pc := p.PathCounters; pc != (ctl.PathCounters{}) {
				// The switch's copies by path; not the AF_XDP bind mode.
				fmt.Fprintf(tw, "\tpath\t\t\t\t\t\tzerocopy_frames=%d copied_frames=%d copied_bytes=%d streamed_frames=%d\n", pc.ZerocopyFrames, pc.CopiedFrames, pc.CopiedBytes, pc.StreamedFrames)
			}
			if b := p.Bursts; b != (ctl.Bursts{}) {
				// Frames per burst: near 32 the switch sets the
				// pace, well below it the other side does.
				fmt.Fprintf(tw, "\tbursts\t\t\t\t\t\t%s\n", perBurst(p.RxPackets, p.TxPackets, b))
			}
			if p.LearnRefused > 0 {
				// Not drops: the frames went on, their sources unlearned.
				fmt.Fprintf(tw, "\tfdb\t\t\t\t\t\tlearn_refused=%d\n", p.LearnRefused)
			}
			if len(p.Queues) > 1 {
				for _, q := range p.Queues {
					fmt.Fprintf(tw, "\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", q.Queue, q.RxPackets, q.RxBytes, q.TxPackets, q.TxBytes, q.FloodCopies, drops(q.Drops))
				}
			}
		}
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func drops(m map[string]uint64) string {
	if len(m) == 0 {
		return "0"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if m[k] == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}

// perBurst says how many bursts moved frames each way and their average
// size.
func perBurst(rx, tx uint64, b ctl.Bursts) string {
	return fmt.Sprintf("rx_bursts=%d (%.1f frames each) tx_bursts=%d (%.1f frames each)",
		b.RxBursts, ctl.PerBurst(rx, b.RxBursts), b.TxBursts, ctl.PerBurst(tx, b.TxBursts))
}
