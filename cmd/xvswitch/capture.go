package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/xvswitch/xvswitch/ctl"
)

var captureCommand = &command{
	name:     "capture",
	synopsis: "PORT [-w FILE] [-c COUNT] [--direction in|out|both] [--ctl PATH]",
	summary:  "capture a port's frames, as pcap for tcpdump or a line each",
	about: `Captures the frames of one port of a running switch, as tcpdump does on an
interface: tcpdump on a NIC does not see the frames its XDP program sends
to the switch, and a VM's vhost-user port has no interface at all.
  in    what the port received: a VM sent it, or the NIC took it off the
        wire (frames the switch then dropped included)
  out   what the switch handed the port to send, before it sends it: a frame
        the port then drops (no room in the guest's buffers, say) is there
        too, and counted in 'xvswitch show stats'
Without -w each frame is a line on stdout; with -w the capture is written as
pcap, which tcpdump -r and Wireshark read. It runs until COUNT frames or
Ctrl-C (SIGINT, or SIGTERM), then says on stderr how many frames it
captured, and how many the switch dropped because the capture's buffer was
full: the switch never waits for a capture.

examples:
  xvswitch capture vm1 -w vm1.pcap
  xvswitch capture nic0 -w - --direction in | tcpdump -n -r -
  xvswitch capture vm1 -c 10
`,
	options: func() []option { return new(captureCmd).options() },
	run:     func(args []string, out, errOut io.Writer) error { return new(captureCmd).run(args, out, errOut) },
}

// captureCmd is `xvswitch capture`.
type captureCmd struct {
	file  string
	count int
	dir   string
	ctl   string
}

func (c *captureCmd) options() []option {
	c.dir = ctl.DirBoth
	return []option{
		{name: "write", short: "w", value: "FILE", help: "write the frames to FILE as pcap (- for stdout), instead of a line each", set: func(s string) error {
			if s == "" {
				return fmt.Errorf("want a file name, or - for stdout")
			}
			c.file = s
			return nil
		}},
		{name: "count", short: "c", value: "COUNT", help: "stop after COUNT frames", set: func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return fmt.Errorf("want a number of frames, 1 or more")
			}
			c.count = n
			return nil
		}},
		{name: "direction", value: "in|out|both", help: "the frames the port received (in), those the switch handed it to send (out), or both", def: ctl.DirBoth,
			set: func(s string) error {
				if s != ctl.DirIn && s != ctl.DirOut && s != ctl.DirBoth {
					return fmt.Errorf("want in, out or both")
				}
				c.dir = s
				return nil
			}},
		ctlOption(&c.ctl),
	}
}

func (c *captureCmd) run(args []string, out, errOut io.Writer) error {
	pos, err := parseOptions(args, c.options())
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("capture takes one port name, as 'xvswitch show ports' lists it")
	}
	s, err := ctl.Capture(c.ctl, ctl.Request{Name: pos[0], Direction: c.dir, Count: c.count})
	if err != nil {
		return err
	}
	defer s.Close()
	sink, err := c.openSink(out, s.Info)
	if err != nil {
		return err
	}
	stop := stopOnSignal(s)
	defer stop()
	// Said once Ctrl-C would end the capture cleanly.
	fmt.Fprintf(errOut, "capturing on %s, direction %s, link-type EN10MB (Ethernet), snapshot length %d bytes\n", s.Info.Port, s.Info.Direction, s.Info.SnapLen)
	err = copyFrames(s, sink)
	if cerr := sink.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	end := s.End()
	fmt.Fprintf(errOut, "%d packets captured\n%d packets dropped by xvswitch (capture buffer full)\n", end.Frames, end.Dropped)
	switch end.Reason {
	case ctl.EndPortRemoved:
		return fmt.Errorf("the capture ended: port %s was removed from the switch", s.Info.Port)
	case ctl.EndShutdown:
		return fmt.Errorf("the capture ended: xvswitch stopped")
	}
	return nil
}

// stopOnSignal makes SIGINT or SIGTERM end the capture: the switch sends
// what it still holds, then the end. A second one drops the connection.
// The returned func stops listening.
func stopOnSignal(s *ctl.CaptureStream) func() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			select {
			case <-sigs:
			case <-done:
				return
			}
			if n == 0 {
				_ = s.Stop()
			} else {
				_ = s.Close()
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// copyFrames writes the stream's frames to sink until it ends, flushing
// whenever no frame is waiting, so a reader of -w - sees each promptly.
func copyFrames(s *ctl.CaptureStream, sink frameSink) error {
	for {
		f, err := s.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := sink.frame(f); err != nil {
			return err
		}
		if !s.Buffered() {
			if err := sink.flush(); err != nil {
				return err
			}
		}
	}
}

// frameSink is where captured frames go: a pcap file or stream, or a
// line each.
type frameSink interface {
	frame(ctl.CaptureFrame) error
	flush() error
	close() error
}

func (c *captureCmd) openSink(out io.Writer, info ctl.CaptureInfo) (frameSink, error) {
	if c.file == "" {
		return &lineSink{w: bufio.NewWriter(out)}, nil
	}
	var wc io.WriteCloser = nopCloser{out}
	if c.file != "-" {
		file, err := os.Create(c.file)
		if err != nil {
			return nil, err
		}
		wc = file
	}
	p := &pcapSink{file: wc, w: bufio.NewWriterSize(wc, 64<<10)}
	pw, err := newPcapWriter(p.w, info.SnapLen)
	if err != nil {
		wc.Close()
		return nil, err
	}
	p.pcap = pw
	return p, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// pcapSink writes pcap (pcap.go).
type pcapSink struct {
	file io.WriteCloser
	w    *bufio.Writer
	pcap *pcapWriter
}

func (p *pcapSink) frame(f ctl.CaptureFrame) error {
	return p.pcap.frame(f.Time, f.WireLen, f.Data)
}

func (p *pcapSink) flush() error { return p.w.Flush() }

func (p *pcapSink) close() error {
	err := p.w.Flush()
	if cerr := p.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// lineSink prints a line per frame (frameLine).
type lineSink struct{ w *bufio.Writer }

func (l *lineSink) frame(f ctl.CaptureFrame) error {
	_, err := fmt.Fprintln(l.w, frameLine(f))
	return err
}

func (l *lineSink) flush() error { return l.w.Flush() }
func (l *lineSink) close() error { return l.w.Flush() }
