package vswitch

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/test/netns"
	"github.com/xvswitch/xvswitch/test/require"
)

// TestNICPartialChecksums sends TCP between two namespaces whose veths
// keep their checksum offloads at the defaults, across two NIC ports:
// each side's segments leave with partial checksums, and the receiving
// kernel checks them. With csum=auto (a veth: completed) an echoed
// stream comes back whole; with csum=off the connection never opens.
func TestNICPartialChecksums(t *testing.T) {
	require.Root(t)
	for _, tc := range []struct {
		name string
		csum portspec.NICCsum
		ok   bool
	}{{"auto", portspec.CsumAuto, true}, {"off", portspec.CsumOff, false}} {
		t.Run("csum="+tc.name, func(t *testing.T) {
			v1 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.89.0.1/24", KeepOffload: true})
			v2 := netns.NewVeth(t, netns.VethOptions{InnerAddr: "10.89.0.2/24", KeepOffload: true})
			s := startTestSwitch(t, Config{Workers: 1})
			for _, v := range []*netns.Veth{v1, v2} {
				if err := s.AddNIC(portspec.NIC{Name: v.Outer, Ifname: v.Outer, Mode: portspec.ModeCopy, Csum: tc.csum}); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(s.removeAll)

			var ln net.Listener
			if err := v2.NS.Do(func() (err error) { ln, err = net.Listen("tcp4", "10.89.0.2:7001"); return }); err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()

			payload := make([]byte, 256<<10)
			rand.Read(payload)
			var back []byte
			err := v1.NS.Do(func() error {
				c, err := net.DialTimeout("tcp4", "10.89.0.2:7001", 3*time.Second)
				if err != nil {
					return err
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				go func() {
					_, _ = c.Write(payload)
					_ = c.(*net.TCPConn).CloseWrite()
				}()
				back, err = io.ReadAll(c)
				return err
			})
			var fixed uint64
			for _, p := range s.Stats() {
				fixed += p.Kernel[csumCompletedKey]
			}
			if !tc.ok {
				if err == nil {
					t.Errorf("TCP crossed with partial checksums left as they were (csum=off): got %d bytes back", len(back))
				}
				if fixed != 0 {
					t.Errorf("csum=off completed %d checksums", fixed)
				}
				return
			}
			if err != nil || !bytes.Equal(back, payload) {
				t.Fatalf("echo through the switch: %v, %d of %d bytes back (equal: %v); stats %+v", err, len(back), len(payload), bytes.Equal(back, payload), s.Stats())
			}
			if fixed == 0 {
				t.Errorf("the streams crossed but no checksum was completed: %+v", s.Stats())
			}
			for _, p := range s.Ports() {
				if !bytes.Contains([]byte(p.Detail), []byte("csum=fix")) {
					t.Errorf("port %s: detail %q, want csum=fix", p.Name, p.Detail)
				}
			}
		})
	}
}
