// Command udpseq runs inside a test guest (built static by
// qemu.GuestTool, laid into the guest by GuestConfig.Files). It receives
// sequence-numbered UDP datagrams, each an 8-byte big-endian sequence
// number and padding, echoes every one back to its sender (so the sender
// can time the stream), and counts them: the guest's own record of which
// frames its NIC delivered, and how often. A datagram with sequence
// number 2^64-1 ends the run, as does -timeout. It then prints one line:
//
//	udpseq name=NAME received=N distinct=D dups=K first=F last=L missing=M gaps=A-B,C-D,...
//
// (gaps: runs of sequence numbers in [first, last] that never arrived,
// the first 256 of them).
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

const stopSeq = ^uint64(0)

func main() {
	port := flag.Int("port", 7000, "UDP port to listen on")
	name := flag.String("name", "udpseq", "name for the report line")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	maxSeq := flag.Uint64("max", 1<<22, "largest sequence number counted")
	flag.Parse()

	c, err := net.ListenUDP("udp", &net.UDPAddr{Port: *port})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	seen := make([]uint8, *maxSeq+1)
	var received, distinct, dups uint64
	first, last := stopSeq, uint64(0)
	buf := make([]byte, 2048)
	deadline := time.Now().Add(*timeout)
	for time.Now().Before(deadline) {
		_ = c.SetReadDeadline(deadline)
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			break
		}
		if n < 8 {
			continue
		}
		_, _ = c.WriteToUDP(buf[:n], from)
		seq := binary.BigEndian.Uint64(buf)
		if seq == stopSeq {
			break
		}
		if seq > *maxSeq {
			continue
		}
		received++
		if seen[seq] != 0 {
			dups++
		} else {
			distinct++
		}
		if seen[seq] < 255 {
			seen[seq]++
		}
		first, last = min(first, seq), max(last, seq)
	}
	var gaps []string
	missing := uint64(0)
	for s := first; received > 0 && s <= last; s++ {
		if seen[s] != 0 {
			continue
		}
		e := s
		for e+1 <= last && seen[e+1] == 0 {
			e++
		}
		missing += e - s + 1
		if len(gaps) < 256 {
			gaps = append(gaps, fmt.Sprintf("%d-%d", s, e))
		}
		s = e
	}
	if received == 0 {
		first = 0
	}
	fmt.Printf("udpseq name=%s received=%d distinct=%d dups=%d first=%d last=%d missing=%d gaps=%s\n",
		*name, received, distinct, dups, first, last, missing, strings.Join(gaps, ","))
}
