package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/xvswitch/xvswitch/test/netns"
)

// pingResult is what ping said it sent and got back.
type pingResult struct {
	Transmitted int `json:"transmitted"`
	Received    int `json:"received"`
}

var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// ping runs ping in the namespace as a user would (ip netns exec) and
// prints its output.
func ping(s *session, ns *netns.Namespace, count int, target string) pingResult {
	args := []string{"netns", "exec", ns.Name, "ping", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "3", target}
	s.cmdline("ip", args...)
	out, _ := ns.Exec("ping", args[4:]...).CombinedOutput()
	s.indent(string(out))
	var r pingResult
	if m := pingSummary.FindStringSubmatch(string(out)); m != nil {
		r.Transmitted, _ = strconv.Atoi(m[1])
		r.Received, _ = strconv.Atoi(m[2])
	}
	return r
}

// transfer is one TCP stream and what each end saw of it.
type transfer struct {
	SentBytes      int64  `json:"sent_bytes"`
	SentSHA256     string `json:"sent_sha256"`
	ReceivedBytes  int64  `json:"received_bytes"`
	ReceivedSHA256 string `json:"received_sha256"`
}

func (t transfer) ok() bool {
	return t.SentBytes > 0 && t.SentBytes == t.ReceivedBytes && t.SentSHA256 == t.ReceivedSHA256
}

// sendTo connects from the namespace to addr and sends n random bytes; it
// returns their count and sha256.
func sendTo(ctx context.Context, ns *netns.Namespace, addr string, n int) (int64, string, error) {
	payload := make([]byte, n)
	_, _ = rand.Read(payload)
	sum := sha256.Sum256(payload)
	var sent int
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: 10 * time.Second}
		c, err := d.DialContext(ctx, "tcp4", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
		sent, err = c.Write(payload)
		return err
	})
	return int64(sent), hex.EncodeToString(sum[:]), err
}

// received is what a listener got from its one connection.
type received struct {
	bytes  int64
	sha256 string
	err    error
}

// receiveOne listens in the namespace on addr and, in the background,
// accepts one connection and hashes everything it carries. The listener
// exists when it returns (so a peer may dial at once) and closes when the
// session ends.
func receiveOne(s *session, ns *netns.Namespace, addr string) <-chan received {
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp4", addr); return }); err != nil {
		s.Fatalf("listen on %s in namespace %s: %v", addr, ns.Name, err)
	}
	s.Cleanup(func() { ln.Close() })
	stop := context.AfterFunc(s.ctx, func() { ln.Close() })
	got := make(chan received, 1)
	go func() {
		defer stop()
		c, err := ln.Accept()
		if err != nil {
			got <- received{err: fmt.Errorf("accept: %w", err)}
			return
		}
		defer c.Close()
		closeOnEnd := context.AfterFunc(s.ctx, func() { c.Close() })
		defer closeOnEnd()
		h := sha256.New()
		n, err := io.Copy(h, c)
		got <- received{bytes: n, sha256: hex.EncodeToString(h.Sum(nil)), err: err}
	}()
	return got
}

// poke connects to addr from the namespace and sends one byte (the
// guest's hold ends with it).
func poke(ctx context.Context, ns *netns.Namespace, addr string) error {
	return ns.Do(func() error {
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err := d.DialContext(ctx, "tcp4", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte{1})
		return err
	})
}
