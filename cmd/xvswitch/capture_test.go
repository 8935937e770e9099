package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/test/require"
)

// The capture command against a stand-in daemon: a control socket that
// answers a capture of "vm1" with known frames, as the switch's stream
// does, then ends as told. No root, no switch.

// captureDaemon serves captures of vm1: frames (at most the request's
// count), then the end: after the count, or reason if given, or when the
// client stops. Every capture drops 3 frames.
func captureDaemon(t *testing.T, frames []ctl.CaptureFrame, reason string) string {
	t.Helper()
	return fakeCtl(t, func(req ctl.Request) ctl.Response {
		if req.Op != ctl.OpCapture {
			return ctl.Response{}
		}
		if req.Name != "vm1" {
			return ctl.Response{Error: `vswitch: no such port: "` + req.Name + `"`}
		}
		return ctl.Response{Capture: &ctl.CaptureInfo{Port: req.Name, Direction: req.Direction, SnapLen: 100},
			Stream: func(ctx context.Context, w io.Writer) error {
				return fakeStream(ctx, ctl.NewCaptureWriter(w), frames, req.Count, reason)
			}}
	})
}

func fakeStream(ctx context.Context, cw *ctl.CaptureWriter, frames []ctl.CaptureFrame, count int, reason string) error {
	if count > 0 && count <= len(frames) {
		frames, reason = frames[:count], ctl.EndCount
	}
	for _, f := range frames {
		if err := cw.Frame(f.Time.UnixNano(), f.Out, f.WireLen, f.Data); err != nil {
			return err
		}
	}
	if err := cw.Flush(); err != nil {
		return err
	}
	if reason == "" {
		<-ctx.Done()
		reason = ctl.EndStopped
	}
	return cw.End(ctl.CaptureEnd{Frames: uint64(len(frames)), Dropped: 3, Reason: reason})
}

// frame is an Ethernet frame: MACs, then type and payload as hex.
func frame(t *testing.T, dst, src, hexBody string) []byte {
	t.Helper()
	var b []byte
	for _, h := range []string{dst, src, hexBody} {
		h = strings.NewReplacer(":", "", " ", "").Replace(h)
		for i := 0; i+1 < len(h); i += 2 {
			var v byte
			for _, c := range h[i : i+2] {
				v = v<<4 | byte(strings.IndexRune("0123456789abcdef", c))
			}
			b = append(b, v)
		}
	}
	return b
}

// testCapture is what the stand-in daemon sends, and what the capture
// command prints for each frame after its time.
func testCapture(t *testing.T) ([]ctl.CaptureFrame, []string) {
	const vm1, vm2, bcast = "52:54:00:00:00:01", "52:54:00:00:00:02", "ff:ff:ff:ff:ff:ff"
	arp := frame(t, bcast, vm1, "0806 0001 0800 06 04 0001 525400000001 0a000001 000000000000 0a000002")
	ping := frame(t, vm2, vm1, "0800 4500 0054 0000 4000 4001 0000 0a000001 0a000002 0800 0000 0007 0001"+strings.Repeat("ab", 56))
	syn := frame(t, vm1, vm2, "8100 0005 86dd 6000 0000 0014 0640 fe800000000000000000000000000002 fe800000000000000000000000000001 1389 0050 00000001 00000000 5002 ffff 0000 0000")
	cut := frame(t, vm1, vm2, "88b5"+strings.Repeat("00", 50))
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_901_234, time.UTC)
	frames := []ctl.CaptureFrame{
		{Time: at, WireLen: len(arp), Data: arp},
		{Time: at.Add(time.Millisecond), WireLen: len(ping), Data: ping[:64]},
		{Time: at.Add(2 * time.Millisecond), Out: true, WireLen: len(syn), Data: syn},
		{Time: at.Add(3 * time.Second), Out: true, WireLen: 1500, Data: cut},
	}
	lines := []string{
		"in  52:54:00:00:00:01 > ff:ff:ff:ff:ff:ff, ARP, Request who-has 10.0.0.2 tell 10.0.0.1, length 42",
		"in  52:54:00:00:00:01 > 52:54:00:00:00:02, IPv4 10.0.0.1 > 10.0.0.2: ICMP echo request, id 7, seq 1, length 98",
		"out 52:54:00:00:00:02 > 52:54:00:00:00:01, vlan 5, IPv6 fe80::2 > fe80::1: TCP 5001 > 80 [S], length 78",
		"out 52:54:00:00:00:02 > 52:54:00:00:00:01, ethertype 0x88b5, length 1500",
	}
	return frames, lines
}

// pcapRecord is one frame of a pcap file as readPcap finds it.
type pcapRecord struct {
	at      time.Time
	wireLen int
	data    []byte
}

// readPcap reads a little-endian, microsecond pcap file of Ethernet frames.
func readPcap(t *testing.T, b []byte) (snapLen int, recs []pcapRecord) {
	t.Helper()
	le := binary.LittleEndian
	if len(b) < 24 || le.Uint32(b) != 0xa1b2c3d4 || le.Uint16(b[4:]) != 2 || le.Uint16(b[6:]) != 4 || le.Uint32(b[20:]) != 1 {
		t.Fatalf("not a pcap file header: %x", b[:min(len(b), 24)])
	}
	snapLen = int(le.Uint32(b[16:]))
	for b = b[24:]; len(b) > 0; {
		if len(b) < 16 || len(b) < 16+int(le.Uint32(b[8:])) {
			t.Fatalf("a pcap record cut short: %x", b)
		}
		n := int(le.Uint32(b[8:]))
		recs = append(recs, pcapRecord{
			at:      time.Unix(int64(le.Uint32(b)), int64(le.Uint32(b[4:]))*1000),
			wireLen: int(le.Uint32(b[12:])),
			data:    b[16 : 16+n],
		})
		b = b[16+n:]
	}
	return snapLen, recs
}

// TestCapturePcap: -w FILE and -w - write pcap of the frames the daemon
// sends, cut where it cut them, with their times to the microsecond, and
// -c stops after COUNT; the summary goes to stderr; tcpdump reads the file.
func TestCapturePcap(t *testing.T) {
	frames, _ := testCapture(t)
	sock := captureDaemon(t, frames, "")
	file := filepath.Join(t.TempDir(), "vm1.pcap")
	var out, errOut bytes.Buffer
	if code := cli([]string{"capture", "vm1", "-w", file, "-c", "4", "--ctl", sock}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if want := "capturing on vm1, direction both, link-type EN10MB (Ethernet), snapshot length 100 bytes\n4 packets captured\n3 packets dropped by xvswitch (capture buffer full)\n"; errOut.String() != want || out.Len() != 0 {
		t.Errorf("stdout %q, stderr:\n%s\nwant\n%s", out.String(), errOut.String(), want)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	snap, recs := readPcap(t, b)
	if snap != 100 || len(recs) != len(frames) {
		t.Fatalf("snapshot length %d, %d records", snap, len(recs))
	}
	for i, f := range frames {
		r := recs[i]
		if !r.at.Equal(f.Time.Truncate(time.Microsecond)) || r.wireLen != f.WireLen || !bytes.Equal(r.data, f.Data) {
			t.Errorf("record %d: %v, %d of %d bytes; want %v, %d of %d", i, r.at, len(r.data), r.wireLen, f.Time, len(f.Data), f.WireLen)
		}
	}

	out.Reset()
	errOut.Reset()
	if code := cli([]string{"capture", "vm1", "-w", "-", "-c", "2", "--direction", "in", "--ctl", sock}, &out, &errOut); code != exitOK {
		t.Fatalf("-w -: exit %d: %s", code, errOut.String())
	}
	if _, recs := readPcap(t, out.Bytes()); len(recs) != 2 || !bytes.Equal(recs[1].data, frames[1].Data) {
		t.Errorf("-w - -c 2: %d records", len(recs))
	}
	if !strings.Contains(errOut.String(), "direction in,") {
		t.Errorf("stderr: %s", errOut.String())
	}

	t.Run("tcpdump", func(t *testing.T) {
		require.Commands(t, "tcpdump")
		got, err := exec.Command("tcpdump", "-n", "-e", "-r", file).CombinedOutput()
		if err != nil {
			t.Fatalf("tcpdump -r: %v\n%s", err, got)
		}
		for _, want := range []string{
			"reading from file " + file + ", link-type EN10MB (Ethernet), snapshot length 100",
			"Request who-has 10.0.0.2 tell 10.0.0.1",
			"10.0.0.1 > 10.0.0.2: ICMP echo request, id 7, seq 1",
			"vlan 5",
			"fe80::2.5001 > fe80::1.80: Flags [S]",
			"ethertype Unknown (0x88b5), length 1500",
		} {
			if !strings.Contains(string(got), want) {
				t.Errorf("tcpdump -r says\n%s\nwithout %q", got, want)
			}
		}
	})
}

// TestCaptureLines: without -w, a line per frame on stdout, as tcpdump -e
// would print it, in local time.
func TestCaptureLines(t *testing.T) {
	frames, lines := testCapture(t)
	sock := captureDaemon(t, frames, ctl.EndPortRemoved)
	var out, errOut bytes.Buffer
	// The daemon ends the capture: the port was removed.
	if code := cli([]string{"capture", "vm1", "--ctl", sock}, &out, &errOut); code != exitFail {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != len(lines) {
		t.Fatalf("stdout:\n%s", out.String())
	}
	for i, want := range lines {
		if want = frames[i].Time.Format("15:04:05.000000") + " " + want; got[i] != want {
			t.Errorf("line %d:\n%s\nwant\n%s", i, got[i], want)
		}
	}
	if !strings.HasSuffix(errOut.String(), "3 packets dropped by xvswitch (capture buffer full)\nxvswitch capture: the capture ended: port vm1 was removed from the switch\n") {
		t.Errorf("stderr:\n%s", errOut.String())
	}
	errOut.Reset()
	if code := cli([]string{"capture", "vm2", "--ctl", sock}, &out, &errOut); code != exitFail || errOut.String() != "xvswitch capture: vswitch: no such port: \"vm2\"\n" {
		t.Errorf("capture of a missing port: exit %d, %q", code, errOut.String())
	}
}

// TestCaptureStopsOnSIGINT: Ctrl-C ends a capture cleanly: the daemon is
// asked to stop, sends its end, and the file holds every frame.
func TestCaptureStopsOnSIGINT(t *testing.T) {
	frames, _ := testCapture(t)
	sock := captureDaemon(t, frames, "")
	file := filepath.Join(t.TempDir(), "vm1.pcap")
	cmd := exec.Command(buildXvswitch(t), "capture", "vm1", "-w", file, "--ctl", sock)
	errOut := startCapture(t, cmd)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(errOut)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("capture after SIGINT: %v\n%s", err, rest)
	}
	if !strings.HasPrefix(string(rest), "4 packets captured\n") {
		t.Errorf("stderr after SIGINT: %s", rest)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, recs := readPcap(t, b); len(recs) != len(frames) {
		t.Errorf("%d records after SIGINT", len(recs))
	}
}

// startCapture starts cmd, an xvswitch capture, and reads its stderr up to
// the "capturing on" line (after which Ctrl-C ends it cleanly); it returns
// the rest of stderr, to be read before cmd.Wait.
func startCapture(t *testing.T, cmd *exec.Cmd) *bufio.Reader {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	r := bufio.NewReader(stderr)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "capturing on ") {
		rest, _ := io.ReadAll(r)
		t.Fatalf("capture said %q%s (%v)", line, rest, err)
	}
	return r
}
