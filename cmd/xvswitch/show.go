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
		default:
			return enc.Encode(nonNil(resp.Stats))
		}
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	defer tw.Flush()
	switch what {
	case "ports":
		fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tQUEUES\tXCONNECT\tDETAIL")
		for _, p := range resp.Ports {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", p.Name, p.Kind, p.State, p.Queues, dash(p.Peer), p.Detail)
		}
	case "fdb":
		fmt.Fprintln(tw, "MAC\tPORT\tTYPE\tAGE")
		for _, e := range resp.FDB {
			kind := "learned"
			if e.Static {
				kind = "static"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%ds\n", e.MAC, e.Port, kind, e.Age)
		}
	default:
		fmt.Fprintln(tw, "PORT\tQUEUE\tRX PKTS\tRX BYTES\tTX PKTS\tTX BYTES\tDROPS")
		for _, p := range resp.Stats {
			fmt.Fprintf(tw, "%s\t*\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes, drops(p.Drops))
			if len(p.Kernel) > 0 {
				fmt.Fprintf(tw, "\tkernel\t\t\t\t\t%s\n", drops(p.Kernel))
			}
			if p.LearnRefused > 0 {
				// Not drops: the frames went on, their sources unlearned.
				fmt.Fprintf(tw, "\tfdb\t\t\t\t\tlearn_refused=%d\n", p.LearnRefused)
			}
			if len(p.Queues) > 1 {
				for _, q := range p.Queues {
					fmt.Fprintf(tw, "\t%d\t%d\t%d\t%d\t%d\t%s\n", q.Queue, q.RxPackets, q.RxBytes, q.TxPackets, q.TxBytes, drops(q.Drops))
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
