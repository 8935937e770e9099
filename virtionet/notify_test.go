package virtionet

import (
	"encoding/binary"
	"math/rand"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// eventfd returns a non-blocking eventfd and a function reading (and
// clearing) its counter.
func eventfd(t *testing.T) (int, func() uint64) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, func() uint64 {
		var b [8]byte
		if _, err := unix.Read(fd, b[:]); err == unix.EAGAIN {
			return 0
		} else if err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(b[:])
	}
}

func dupFD(t *testing.T, fd int) int {
	t.Helper()
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// newNotifier starts a Notifier the test closes.
func newNotifier(t *testing.T, cfg NotifierConfig) *Notifier {
	t.Helper()
	n, err := NewNotifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Close()
		<-n.Done()
	})
	return n
}

// callLine is a Notifier's only line, on an eventfd whose counter read
// returns: what the guest would see.
func callLine(t *testing.T) (*Line, func() uint64) {
	t.Helper()
	n := newNotifier(t, NotifierConfig{Lines: 1})
	fd, read := eventfd(t)
	n.Line(0).SetFD(dupFD(t, fd))
	return n.Line(0), read
}

// waitCount sums read() until it reaches want, or fails after a while: the
// Notifier writes on its own goroutine.
func waitCount(t *testing.T, what string, read func() uint64, want uint64) uint64 {
	t.Helper()
	var got uint64
	for deadline := time.Now().Add(5 * time.Second); got < want; time.Sleep(time.Millisecond) {
		if got += read(); got >= want || time.Now().After(deadline) {
			break
		}
	}
	if got < want {
		t.Fatalf("%s: eventfd counter %d, want %d", what, got, want)
	}
	return got
}

// TestNotifyOncePerBurst: the call line is raised once per burst when the
// guest asks for interrupts, never when it does not, and the Notifier
// writes the eventfd.
func TestNotifyOncePerBurst(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(9))

			line, read := callLine(t)
			rx, rq := rxCase(t, k, 0, featMrg, 0)
			rq.call = line
			for i := 0; i < 64; i++ {
				rx.post(2048)
			}
			f := &Frames{}
			for i := 0; i < 32; i++ {
				f.AddBytes(frame(rng, 1000))
			}
			rx.interrupts(true)
			if n, _ := rq.Deliver(f); n != 32 {
				t.Fatalf("delivered %d", n)
			}
			waitCount(t, "RX burst with interrupts on", read, 1)
			rx.interrupts(false)
			if n, _ := rq.Deliver(f); n != 32 {
				t.Fatalf("delivered %d", n)
			}
			if s := rq.Snapshot(); s.Notifies != 1 {
				t.Fatalf("Notifies %d, want 1", s.Notifies)
			}

			tx := newGuest(t, k, 256, 0)
			line2, read2 := callLine(t)
			tq := NewTxQueue(tx.ring, QueueConfig{Index: 1, Features: featV1, Call: line2})
			for i := 0; i < 64; i++ {
				tx.send(frame(rng, 100), HeaderLen, hdrCombined)
			}
			tx.interrupts(true)
			tq.Receive(32)
			if err := tq.Complete(); err != nil {
				t.Fatal(err)
			}
			waitCount(t, "TX burst with interrupts on", read2, 1)
			tx.interrupts(false)
			tq.Receive(32)
			if err := tq.Complete(); err != nil {
				t.Fatal(err)
			}
			if s := tq.Snapshot(); s.Notifies != 1 {
				t.Fatalf("TX Notifies %d, want 1", s.Notifies)
			}
			if read()+read2() != 0 {
				t.Fatal("an interrupt after the bursts with interrupts off")
			}
		})
	}
}

// maxCount is the eventfd counter's maximum, as a write's payload: once
// the counter holds it, a write of 1 blocks until someone reads.
var maxCount = [8]byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// fdCount is how many fds the process has open.
func fdCount() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }

// TestNotifierStuckLine: a write that blocks (a blocking eventfd the
// front-end filled) holds up only the Notifier's goroutine. Signal keeps
// returning at once; what is raised meanwhile, on that line and on
// others, is written once the front-end reads its eventfd, coalesced;
// left full, the line is reported stalled; Close frees the blocked write
// and every fd.
func TestNotifierStuckLine(t *testing.T) {
	fds := fdCount()
	stalled := make(chan int, 1)
	n, err := NewNotifier(NotifierConfig{Lines: 2, StallAfter: 50 * time.Millisecond, Stalled: func(l int) { stalled <- l }})
	if err != nil {
		t.Fatal(err)
	}
	full, err := unix.Eventfd(0, unix.EFD_CLOEXEC) // blocking
	if err != nil {
		t.Fatal(err)
	}
	fill := func() {
		if _, err := unix.Write(full, maxCount[:]); err != nil {
			t.Fatal(err)
		}
	}
	fill()
	other, readOther := eventfd(t)
	n.Line(0).SetFD(dupFD(t, full))
	n.Line(1).SetFD(dupFD(t, other))

	start := time.Now()
	for i := 0; i < 1000; i++ {
		if !n.Line(0).Signal() || !n.Line(1).Signal() {
			t.Fatal("Signal on a line with an fd reports none")
		}
	}
	t.Logf("2000 Signals with the notifier stuck: %v", time.Since(start))

	// The front-end reads its eventfd: the blocked write goes through,
	// then what was raised meanwhile, once per line.
	readFull := func() uint64 {
		c, err := ReadEventFD(full)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := readFull(); c != 0xffff_ffff_ffff_fffe {
		t.Fatalf("full eventfd counter %#x", c)
	}
	got := waitCount(t, "the stuck line after the front-end read", readFull, 1)
	waitCount(t, "the other line", readOther, 1)
	time.Sleep(20 * time.Millisecond)
	if got += readFull(); got > 2 {
		t.Fatalf("1000 Signals during the stall made %d interrupts, want at most 2", got)
	}
	if c := readOther(); c != 0 {
		t.Fatalf("other line: %d more interrupts", c)
	}

	// Full again and left so: reported stalled.
	fill()
	n.Line(0).Signal()
	select {
	case l := <-stalled:
		if l != 0 {
			t.Fatalf("stalled line %d, want 0", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write blocked on a full eventfd was not reported")
	}

	// Close frees the blocked write; the goroutine exits with every fd
	// closed.
	n.Close()
	select {
	case <-n.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the notifier did not exit after Close")
	}
	unix.Close(full)
	unix.Close(other)
	if now := fdCount(); now != fds {
		t.Fatalf("fds %d before, %d after", fds, now)
	}
}

// TestNotifierSetFD: replacing a line's fd (and setting none) while
// another goroutine signals: every fd handed over is closed exactly once
// by the time the Notifier is done, and signals reach the fd in place.
func TestNotifierSetFD(t *testing.T) {
	fds := fdCount()
	n, err := NewNotifier(NotifierConfig{Lines: 1})
	if err != nil {
		t.Fatal(err)
	}
	fd, read := eventfd(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				n.Line(0).Signal()
			}
		}
	}()
	for i := 0; i < 200; i++ {
		if i%3 == 0 {
			n.Line(0).SetFD(-1)
		} else {
			n.Line(0).SetFD(dupFD(t, fd))
		}
	}
	n.Line(0).SetFD(dupFD(t, fd))
	read()
	waitCount(t, "a signal on the last fd", read, 1)
	close(stop)
	wg.Wait()
	n.Close()
	<-n.Done()
	if n.Line(0).Signal() {
		t.Fatal("a line of a closed notifier has an fd")
	}
	if now := fdCount(); now != fds+1 {
		t.Fatalf("fds %d before (and the test's eventfd), %d after", fds, now)
	}
}

// TestSignalAllocs: an interrupt allocates nothing, neither raising the
// line nor the Notifier's round that writes it (AllocsPerRun counts the
// whole process's allocations).
func TestSignalAllocs(t *testing.T) {
	line, read := callLine(t)
	a := testing.AllocsPerRun(1000, func() {
		line.Signal()
		for read() == 0 {
		}
	})
	if a != 0 && !raceEnabled {
		t.Fatalf("%v allocations per interrupt", a)
	}
}

// TestReadEventFD: reading a blocking eventfd never blocks: an empty one
// reads 0 at once.
func TestReadEventFD(t *testing.T) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if c, err := ReadEventFD(fd); c != 0 || err != nil {
		t.Fatalf("empty: %d, %v", c, err)
	}
	unix.Write(fd, []byte{5, 0, 0, 0, 0, 0, 0, 0})
	if c, err := ReadEventFD(fd); c != 5 || err != nil {
		t.Fatalf("after a write of 5: %d, %v", c, err)
	}
	if c, err := ReadEventFD(fd); c != 0 || err != nil {
		t.Fatalf("read again: %d, %v", c, err)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = ReadEventFD(fd) }); a != 0 && !raceEnabled {
		t.Fatalf("%v allocations per read", a)
	}
}
