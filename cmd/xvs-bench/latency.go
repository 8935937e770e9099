package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xvswitch/xvswitch/test/hostprobe"
	"github.com/xvswitch/xvswitch/test/netns"
)

// Latency is a round-trip time distribution, in microseconds.
type Latency struct {
	Probes  int     `json:"probes"`
	Lost    int     `json:"lost"`
	P50     float64 `json:"p50_us"`
	P90     float64 `json:"p90_us"`
	P99     float64 `json:"p99_us"`
	P999    float64 `json:"p99_9_us"`
	Max     float64 `json:"max_us"`
	Mean    float64 `json:"mean_us"`
	PerSec  float64 `json:"round_trips_per_s"`
	Warmups int     `json:"warmup_probes_discarded"`
}

// probeEtherType is IEEE's local experimental ethertype: the namespace's
// kernel ignores it, and the switches forward it like any frame.
const probeEtherType = 0x88b5

// probeWarmup probes are sent first and not counted (the switch learns
// the namespace's MAC, caches warm up).
const probeWarmup = 100

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// probeRTT measures round trips from the namespace's interface to the
// guest's MAC and back (the guest's testpmd swaps the MACs), one probe in
// flight at a time, until probes have come back (or limit passed: then
// fewer). The prober's thread is pinned to cpu, and with rt runs at
// SCHED_FIFO priority 1: cpu is the guest's, whose testpmd polls flat out,
// and a prober of normal priority woken by an answer waited there for a
// scheduler slice now and then (milliseconds, in either switch's runs),
// which is the host's scheduler and not the switch. It blocks in read
// between probes, so it takes that CPU only to send and to read. A probe
// not back within 50 ms is lost.
func probeRTT(ns *netns.Namespace, ifname, srcMAC, dstMAC string, cpu int, rt bool, size, probes int, limit time.Duration) (*Latency, error) {
	src, err1 := net.ParseMAC(srcMAC)
	dst, err2 := net.ParseMAC(dstMAC)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	size = max(size, 60) // the minimum Ethernet frame without FCS
	var rtts []time.Duration
	lost, warm := 0, 0
	var start time.Time
	var elapsed time.Duration
	err := ns.Do(func() error {
		if _, err := hostprobe.PinThread(cpu); err != nil {
			return fmt.Errorf("prober: %w", err)
		}
		if rt {
			if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0); err != nil {
				return fmt.Errorf("prober: SCHED_FIFO: %w", err)
			}
		}
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(probeEtherType)))
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(probeEtherType), Ifindex: ifi.Index}); err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		frame := make([]byte, size)
		copy(frame[0:6], dst)
		copy(frame[6:12], src)
		binary.BigEndian.PutUint16(frame[12:], probeEtherType)
		buf := make([]byte, 4096)
		rtts = make([]time.Duration, 0, probes)
		var end time.Time
		for seq := uint64(1); ; seq++ {
			if seq == probeWarmup+1 {
				start = time.Now()
				end = start.Add(limit)
			}
			if len(rtts) >= probes || !end.IsZero() && time.Now().After(end) {
				elapsed = time.Since(start)
				return nil
			}
			binary.BigEndian.PutUint64(frame[14:], seq)
			t0 := time.Now()
			if _, err := unix.Write(fd, frame); err != nil {
				return fmt.Errorf("send: %w", err)
			}
			for {
				n, err := unix.Read(fd, buf)
				if err == unix.EAGAIN || err == unix.EWOULDBLOCK {
					if seq > probeWarmup {
						lost++
					}
					break
				}
				if err == unix.EINTR {
					continue
				}
				if err != nil {
					return fmt.Errorf("receive: %w", err)
				}
				// The guest's answer: the MACs swapped, our sequence.
				if n < 22 || !bytes.Equal(buf[6:12], dst) || !bytes.Equal(buf[0:6], src) ||
					binary.BigEndian.Uint64(buf[14:]) != seq {
					continue
				}
				if seq > probeWarmup {
					rtts = append(rtts, time.Since(t0))
				} else {
					warm++
				}
				break
			}
			if seq == probeWarmup && warm == 0 {
				return fmt.Errorf("none of %d warm-up probes came back", probeWarmup)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	l := summarize(rtts, elapsed)
	l.Lost, l.Warmups = lost, probeWarmup
	return l, nil
}

// summarize turns round-trip times into percentiles (nearest rank).
func summarize(rtts []time.Duration, d time.Duration) *Latency {
	l := &Latency{Probes: len(rtts)}
	if len(rtts) == 0 {
		return l
	}
	s := append([]time.Duration(nil), rtts...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	us := func(x time.Duration) float64 { return float64(x) / float64(time.Microsecond) }
	pct := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1
		return us(s[min(max(i, 0), len(s)-1)])
	}
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	l.P50, l.P90, l.P99, l.P999 = pct(0.50), pct(0.90), pct(0.99), pct(0.999)
	l.Max = us(s[len(s)-1])
	l.Mean = us(sum / time.Duration(len(s)))
	if d > 0 {
		l.PerSec = float64(len(s)) / d.Seconds()
	}
	return l
}
