package qemu

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpioEntry is one entry read back by readNewc.
type cpioEntry struct {
	name         string
	mode         uint32
	body         []byte
	rmaj, rminor uint32
}

// readNewc parses a newc archive independently of the writer, checking
// the 4-byte alignment the kernel's unpacker insists on.
func readNewc(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
		if err != nil {
			t.Fatalf("header at %d field %d: %v", off, i, err)
		}
		return uint32(v)
	}
	for {
		if off%4 != 0 {
			t.Fatalf("header at unaligned offset %d", off)
		}
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("bad magic at %d: %q", off, b[off:off+6])
		}
		mode, size, rmaj, rmin, nsize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(nsize)-1])
		off += 110 + int(nsize)
		off = (off + 3) &^ 3
		body := b[off : off+int(size)]
		off = (off + int(size) + 3) &^ 3
		if name == "TRAILER!!!" {
			if len(b)%512 != 0 {
				t.Errorf("archive length %d not padded to 512", len(b))
			}
			return out
		}
		out = append(out, cpioEntry{name, mode, body, rmaj, rmin})
	}
}

func TestCPIOWriter(t *testing.T) {
	var buf bytes.Buffer
	cw := newCPIOWriter(&buf)
	cw.Dir("bin")
	cw.File("bin/hello", 0o755, []byte("#!/bin/sh\necho hi\n"))
	cw.File("odd", 0o644, []byte("12345")) // forces padding after the body
	cw.Symlink("bin/sh", "busybox")
	cw.CharDev("dev/console", 0o600, 5, 1)
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	got := readNewc(t, buf.Bytes())
	want := []cpioEntry{
		{"bin", cpioModeDir | 0o755, nil, 0, 0},
		{"bin/hello", cpioModeReg | 0o755, []byte("#!/bin/sh\necho hi\n"), 0, 0},
		{"odd", cpioModeReg | 0o644, []byte("12345"), 0, 0},
		{"bin/sh", cpioModeLink | 0o777, []byte("busybox"), 0, 0},
		{"dev/console", cpioModeChr | 0o600, nil, 5, 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.name != w.name || g.mode != w.mode || !bytes.Equal(g.body, w.body) || g.rmaj != w.rmaj || g.rminor != w.rminor {
			t.Errorf("entry %d: got %+v, want %+v", i, g, w)
		}
	}
	// GNU cpio, if present, reads the same archive.
	if _, err := exec.LookPath("cpio"); err == nil {
		cmd := exec.Command("cpio", "-it", "--quiet")
		cmd.Stdin = bytes.NewReader(buf.Bytes())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cpio -it: %v\n%s", err, out)
		}
		if g := strings.Fields(string(out)); strings.Join(g, " ") != "bin bin/hello odd bin/sh dev/console" {
			t.Errorf("cpio -it lists %q", g)
		}
	}
}

func TestGuestScriptSyntax(t *testing.T) {
	cfg := GuestConfig{
		NICs: []GuestNIC{
			{Socket: "/tmp/a.sock", Addr: "10.0.0.1/24", Neigh: map[string]string{"10.0.0.9": "02:00:00:00:00:09", "10.0.0.3": "02:00:00:00:00:03"}},
			{Netdev: "hubport,hubid=0", Addr: "10.0.0.2/24", Netns: "far", IPv6: true, CarrierWait: 2 * time.Second},
		},
		Commands: []GuestCommand{
			GuestPing("p", "", "10.0.0.2", 0, 0),
			GuestTCP("t", "far", "10.0.0.2", "", 7, 1000),
			GuestTCPReceive("r", "far", 8, 0),
			GuestTCPSend("s", "", "10.0.0.5", 9, 10),
			GuestShell("sh", "far", `echo 'quoted' "$x"; exit 2`),
		},
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	s := guestScript(&cfg, []string{"52:54:00:00:00:00", "52:54:00:00:00:01"})
	for _, want := range []string{
		"nic 0 '52:54:00:00:00:00' '10.0.0.1/24' '' 10 0 '10.0.0.3' '02:00:00:00:00:03' '10.0.0.9' '02:00:00:00:00:09'\n",
		"nic 1 '52:54:00:00:00:01' '10.0.0.2/24' 'far' 2 1\n",
		"run p '' 20 ping -c 3 -s 56 -i 0.200 -W 3 '10.0.0.2'\n",
		"tcp t 'far' '10.0.0.2' '' 7 1000 20\n",
		"tcp_recv r 'far' 8 0 20\n",
		"tcp_send s '' '10.0.0.5' 9 10 20\n",
		`run sh 'far' 20 sh -c 'echo '\''quoted'\'' "$x"; exit 2'` + "\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	// The guest's shell is busybox sh: check lib.sh and the script parse.
	sh := "busybox"
	if _, err := exec.LookPath(sh); err != nil {
		t.Skip("no busybox to check the shell syntax with")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "all.sh")
	if err := os.WriteFile(f, append(append(append([]byte{}, guestInit...), guestLib...), s...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sh, "sh", "-n", f).CombinedOutput(); err != nil {
		t.Fatalf("busybox sh -n: %v\n%s", err, out)
	}
}

func TestGuestConfigValidate(t *testing.T) {
	long := "/" + strings.Repeat("x", 107)
	for _, c := range []GuestConfig{
		{NICs: []GuestNIC{{}}},
		{NICs: []GuestNIC{{Socket: long}}},
		{NICs: []GuestNIC{{Socket: "/s", Netns: "a b"}}},
		{NICs: []GuestNIC{{Socket: "/s", Server: true, Reconnect: 1}}},
		{Commands: []GuestCommand{GuestShell("a;b", "", "true")}},
		{Commands: []GuestCommand{GuestShell("a", "", "true"), GuestShell("a", "", "true")}},
	} {
		if err := c.validate(); err == nil {
			t.Errorf("config accepted: %+v", c)
		}
	}
}

func TestQEMUArgs(t *testing.T) {
	cfg := GuestConfig{NICs: []GuestNIC{
		{Socket: "/run/a.sock", Packed: true, MrgRxbuf: ToggleOff, IndirectDesc: ToggleOn, EventIdx: ToggleOff, MTU: 9000, Queues: 2},
		{Socket: "/run/b.sock", Server: true},
		{Socket: "/run/c.sock", Reconnect: 1, DeviceOpts: []string{"csum=off"}},
	}}
	args := strings.Join(qemuArgs(&cfg, []string{"m0", "m1", "m2"}, "K", "I", "C", "R"), " ")
	for _, want := range []string{
		"-accel tcg", "-no-reboot", "-nographic", "-m 256M", "-smp 2",
		"-object memory-backend-memfd,id=mem,size=256M,share=on -numa node,memdev=mem",
		"-kernel K -initrd I", "-serial file:C -serial file:R",
		"-chardev socket,id=c0,path=/run/a.sock -netdev vhost-user,id=n0,chardev=c0,queues=2 ",
		"-device virtio-net-pci,netdev=n0,mac=m0,addr=0x10,disable-legacy=on,romfile=,vectors=0,packed=on,mrg_rxbuf=off,indirect_desc=on,event_idx=off,host_mtu=9000,mq=on ",
		"-chardev socket,id=c1,path=/run/b.sock,server=on,wait=off ",
		"netdev=n1,mac=m1,addr=0x11,disable-legacy=on,romfile=,vectors=0,packed=off ",
		"-chardev socket,id=c2,path=/run/c.sock,reconnect=1 ",
		"packed=off,csum=off",
	} {
		if !strings.Contains(args+" ", want) {
			t.Errorf("qemu args lack %q:\n%s", want, args)
		}
	}
}

func TestParseReports(t *testing.T) {
	cmds := []GuestCommand{
		GuestPing("p", "", "10.0.0.2", 3, 56),
		GuestPing("lossy", "", "10.0.0.2", 3, 56),
		GuestTCP("t", "far", "10.0.0.2", "", 7, 1000),
		GuestShell("missing", "", "true"),
	}
	feat := strings.Repeat("0", 32) + "10" + "1" + strings.Repeat("0", 29)
	log := strings.Join([]string{
		"XVS-BEGIN uptime=3.50",
		"XVS-NIC idx=0 ok=1 ifname=eth0 mac=52:54:00:00:00:00 mtu=1500 carrier=1 ns= features=" + feat,
		"XVS-NIC idx=1 ok=0 mac=52:54:00:00:00:01 detail=no interface has this MAC",
		"XVS-OUT p PING 10.0.0.2 (10.0.0.2): 56 data bytes",
		"XVS-OUT p 3 packets transmitted, 3 packets received, 0% packet loss",
		"XVS-RESULT name=p ok=1 rc=0 start=3.6 end=4.1",
		"XVS-OUT lossy 3 packets transmitted, 2 packets received, 33% packet loss",
		"XVS-RESULT name=lossy ok=1 rc=0 start=4.1 end=4.9",
		"XVS-RESULT name=t ok=1 rc=0 server_rc=0 bytes=1000 sha256=abc sent_bytes=1000 sent_sha256=abc start=5 end=6",
		"XVS-END uptime=6.25",
		"",
	}, "\r\n")
	r := parseReports(log, cmds)
	if !r.Completed || r.BeginUptime != 3.5 || r.EndUptime != 6.25 {
		t.Errorf("run: completed %v, uptimes %v %v", r.Completed, r.BeginUptime, r.EndUptime)
	}
	if p := r.Result("p"); !p.OK || p.Transmitted != 3 || p.Received != 3 || len(p.Output) != 2 {
		t.Errorf("p: %+v", p)
	}
	if l := r.Result("lossy"); l.OK || l.Received != 2 {
		t.Errorf("a ping with a lost reply must fail: %+v", l)
	}
	if tc := r.Result("t"); !tc.OK || tc.Bytes != 1000 || tc.SHA256 != "abc" || tc.SentSHA256 != "abc" {
		t.Errorf("t: %+v", tc)
	}
	if m := r.Result("missing"); m.OK || !m.Missing {
		t.Errorf("missing: %+v", m)
	}
	if !r.HasFeature(0, 32) || r.HasFeature(0, 33) || !r.HasFeature(0, 34) || r.HasFeature(0, 64) || r.HasFeature(1, 32) {
		t.Errorf("HasFeature wrong for %s", feat)
	}
	if n := r.NIC(1); n.OK || n.Detail != "no interface has this MAC" {
		t.Errorf("nic 1: %+v", n)
	}
	f := r.Failures(cmds)
	want := []string{"nic 1: no interface has this MAC", "lossy: ", "missing: the guest reported no result"}
	if len(f) != len(want) {
		t.Fatalf("failures %q, want %d", f, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(f[i], w) {
			t.Errorf("failure %d = %q, want prefix %q", i, f[i], w)
		}
	}
}

func TestWriteRunInitrd(t *testing.T) {
	dir := t.TempDir()
	// A stand-in base image: any gzip'd archive.
	var base bytes.Buffer
	zw := gzip.NewWriter(&base)
	cw := newCPIOWriter(zw)
	cw.File("init", 0o755, []byte("base"))
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	img := &GuestImage{Initrd: filepath.Join(dir, "base.gz")}
	if err := os.WriteFile(img.Initrd, base.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(dir, "tool")
	if err := os.WriteFile(tool, []byte("\x7fELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run.img")
	if err := writeRunInitrd(out, img, "echo run\n", map[string]string{"tool": tool}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if !bytes.HasPrefix(b, base.Bytes()) {
		t.Fatal("run initrd does not start with the base image")
	}
	// The appended member is a gzip'd archive with lib.sh and run.sh.
	zr, err := gzip.NewReader(bytes.NewReader(b[base.Len():]))
	if err != nil {
		t.Fatal(err)
	}
	var arch bytes.Buffer
	if _, err := arch.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range readNewc(t, arch.Bytes()) {
		got[e.name] = string(e.body)
		if e.name == "xvs/tool" && e.mode&0o111 == 0 {
			t.Errorf("xvs/tool mode %o: not executable", e.mode)
		}
	}
	if got["xvs/run.sh"] != "echo run\n" || got["xvs/lib.sh"] != string(guestLib) || got["xvs/tool"] != "\x7fELF" {
		t.Errorf("run archive: %v", func() []string {
			var n []string
			for k := range got {
				n = append(n, fmt.Sprintf("%s(%d)", k, len(got[k])))
			}
			return n
		}())
	}
}
