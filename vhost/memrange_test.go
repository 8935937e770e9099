package vhost_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/guestmem"
	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

const pageSize = 4096

func roundUp(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }

// rangeMappings lists the lines of /proc/self/maps that overlap
// [base, base+n): start, end, permissions and path.
func rangeMappings(t testing.TB, base, n uint64) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 5 {
			continue
		}
		se := strings.SplitN(fs[0], "-", 2)
		s, _ := strconv.ParseUint(se[0], 16, 64)
		e, _ := strconv.ParseUint(se[1], 16, 64)
		if s < base+n && base < e {
			out = append(out, l)
		}
	}
	return out
}

// checkNoHole fails unless [base, base+n) is mapped read-write from end to
// end, as an AF_XDP UMEM registration needs (a PROT_NONE hole: ENOMEM).
func checkNoHole(t testing.TB, l *vhost.MemoryLayout) {
	t.Helper()
	base, n := uint64(l.Base()), l.Len()
	cur := base
	for _, line := range rangeMappings(t, base, n) {
		fs := strings.Fields(line)
		se := strings.SplitN(fs[0], "-", 2)
		s, _ := strconv.ParseUint(se[0], 16, 64)
		e, _ := strconv.ParseUint(se[1], 16, 64)
		if s > cur || !strings.HasPrefix(fs[1], "rw") {
			t.Fatalf("range [%#x, %#x): hole or not read-write at %#x: %q", base, base+n, cur, line)
		}
		cur = e
	}
	if cur < base+n {
		t.Fatalf("range [%#x, %#x) mapped only up to %#x", base, base+n, cur)
	}
}

// stillMapped reports whether anything of a guest memfd is mapped in
// [base, base+n).
func stillMapped(t testing.TB, base, n uint64) bool {
	for _, l := range rangeMappings(t, base, n) {
		if strings.Contains(l, "memfd:drivertest-guest") || strings.Contains(l, "vhosttest") {
			return true
		}
	}
	return false
}

// memfdsOpen counts this process's fds open on guest memfds: the
// front-end's and, with Contiguous, the device's.
func memfdsOpen(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(p, "/memfd:drivertest-guest") {
			n++
		}
	}
	return n
}

// checkLayout compares a layout with the front-end's regions: where each
// lies (whole pages back to back behind the area) and that the range
// shows the guest's bytes, and the guest the range's.
func checkLayout(t *testing.T, l *vhost.MemoryLayout, f *vhosttest.FrontEnd, area, offset uint64) {
	t.Helper()
	if l == nil {
		t.Fatal("no MemoryLayout with Contiguous")
	}
	if off, size := l.Area(); off != 0 || size != roundUp(area, pageSize) {
		t.Fatalf("area at %d of %d bytes, want 0 and %d", off, size, roundUp(area, pageSize))
	}
	if l.Base()%pageSize != 0 || uint64(len(l.Range())) != l.Len() {
		t.Fatalf("range at %#x of %d bytes (slice %d)", l.Base(), l.Len(), len(l.Range()))
	}
	want := f.Regions()
	got := l.Regions()
	if len(got) != len(want) {
		t.Fatalf("layout has %d regions, the table %d", len(got), len(want))
	}
	cur := roundUp(area, pageSize)
	head := offset % pageSize
	for i, r := range got {
		w := want[i]
		if r.GuestAddr != w.GuestAddr || r.Size != w.Size || r.UserAddr != w.UserAddr {
			t.Fatalf("region %d: %+v, table %+v", i, r, w)
		}
		if r.Offset != cur+head {
			t.Fatalf("region %d at range offset %#x, want %#x", i, r.Offset, cur+head)
		}
		cur += roundUp(head+r.Size, pageSize)
		// The guest's bytes, seen through the range, both ways.
		var host []byte
		for _, mr := range f.Mem().Regions {
			if mr.GuestAddr == r.GuestAddr {
				host = mr.Host
			}
		}
		for _, at := range []uint64{0, r.Size / 2, r.Size - 8} {
			copy(host[at:], fmt.Sprintf("g%d@%06x", i, at)[:8])
			if got := string(l.Range()[r.Offset+at:][:8]); got != string(host[at:at+8]) {
				t.Fatalf("region %d byte %#x: range shows %q, guest wrote %q", i, at, got, host[at:at+8])
			}
			copy(l.Range()[r.Offset+at:], "SWITCH!!")
			if string(host[at:at+8]) != "SWITCH!!" {
				t.Fatalf("region %d byte %#x: guest sees %q after the switch wrote the range", i, at, host[at:at+8])
			}
		}
		if o, ok := l.Offset(r.GuestAddr+100, 64); !ok || o != r.Offset+100 {
			t.Fatalf("Offset(region %d + 100) = %#x %v", i, o, ok)
		}
	}
	if l.Len() != cur {
		t.Fatalf("range of %#x bytes, want %#x (area and whole pages of each region)", l.Len(), cur)
	}
	if _, ok := l.Offset(1<<50, 1); ok {
		t.Fatal("Offset of an address outside guest memory succeeded")
	}
	// The area is the switch's, writable.
	copy(l.Range()[:8], "area....")
	checkNoHole(t, l)
}

// TestContiguousLayout: with Config.Contiguous the two regions of a
// table, at the start of their memfds or at an offset that is not page
// aligned, lie back to back behind the switch's area in one range with no
// hole, the range shows the guest's memory, frames flow both ways through
// the rings over it, and the device holds one fd per region until the
// session ends.
func TestContiguousLayout(t *testing.T) {
	for _, offset := range []uint64{0, 4<<30 + 0x800} {
		t.Run(fmt.Sprintf("offset=%#x", offset), func(t *testing.T) {
			const area = 100000 // not a page multiple: rounded up
			base := memfdsOpen(t)
			s := startSessionWith(t, vhost.Config{Contiguous: true, SwitchArea: area},
				vhosttest.Options{Packed: true, MmapOffset: offset})
			l := s.d.MemoryLayout()
			checkLayout(t, l, s.f, area, offset)
			if got := memfdsOpen(t) - base; got != 4 {
				t.Fatalf("%d memfds open, want 4 (2 regions: the front-end's and the device's)", got)
			}
			s.guestSend(t, frame(60, 1), frame(1500, 2))
			got := s.deviceReceive(t)
			if len(got) != 2 || !bytes.Equal(got[0], frame(60, 1)) || !bytes.Equal(got[1], frame(1500, 2)) {
				t.Fatalf("device received %d frames", len(got))
			}
			s.f.PostRx(0, 4)
			if n := s.deviceDeliver(t, frame(100, 3)); n != 1 {
				t.Fatalf("delivered %d", n)
			}
			if rx := s.f.Receive(0); len(rx) != 1 || !bytes.Equal(rx[0].Frame, frame(100, 3)) {
				t.Fatalf("guest received %+v", rx)
			}
			b, n := uint64(l.Base()), l.Len()
			if err := s.f.Close(); err != nil {
				t.Fatal(err)
			}
			vhosttest.WaitFor(t, "session gone", func() bool { return !s.d.Info().Connected })
			if s.d.MemoryLayout() != nil {
				t.Fatal("a layout after the session ended")
			}
			if stillMapped(t, b, n) {
				t.Fatalf("guest memory still mapped in the old range: %q", rangeMappings(t, b, n))
			}
			if got := memfdsOpen(t) - base; got != 0 {
				t.Fatalf("%d memfds still open after the session", got)
			}
		})
	}
}

// TestContiguousOff: without the option nothing of it shows.
func TestContiguousOff(t *testing.T) {
	base := memfdsOpen(t)
	s := startSession(t, vhost.Config{}, true, vhosttest.DefaultFeatures)
	if s.d.MemoryLayout() != nil {
		t.Fatal("a MemoryLayout without Contiguous")
	}
	if got := memfdsOpen(t) - base; got != 2 {
		t.Fatalf("%d memfds open, want the front-end's 2 only", got)
	}
}

// changeLog records OnMemoryChange calls and what the test checks inside
// them: that the old range was still mapped.
type changeLog struct {
	mu      sync.Mutex
	t       testing.TB
	changes []vhost.MemoryChange
	badOld  []string // old ranges found already unmapped inside the hook
	block   chan struct{}
}

func (c *changeLog) hook(ch vhost.MemoryChange) {
	if ch.Old != nil && !stillMapped(c.t, uint64(ch.Old.Base()), ch.Old.Len()) {
		c.mu.Lock()
		c.badOld = append(c.badOld, fmt.Sprintf("generation %d: old range %#x unmapped before the hook", ch.Generation, ch.Old.Base()))
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.changes = append(c.changes, ch)
	b := c.block
	c.mu.Unlock()
	if b != nil {
		<-b
	}
}

func (c *changeLog) get() ([]vhost.MemoryChange, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]vhost.MemoryChange(nil), c.changes...), append([]string(nil), c.badOld...)
}

// TestContiguousGenerations: every table (SET_MEM_TABLE again, the
// session's end) is a new generation, announced by OnMemoryChange with the
// old layout still mapped, which is unmapped once the hook returned.
func TestContiguousGenerations(t *testing.T) {
	cl := &changeLog{t: t}
	s := startSessionWith(t, vhost.Config{Contiguous: true, SwitchArea: 4096, OnMemoryChange: cl.hook}, vhosttest.Options{Packed: true})
	l1 := s.d.MemoryLayout()
	s.f.SetMemTable()
	l2 := s.d.MemoryLayout()
	if l1 == nil || l2 == nil || l2.Generation() <= l1.Generation() || l2.Base() == l1.Base() {
		t.Fatalf("layouts %v then %v: want a new range with a higher generation", l1, l2)
	}
	checkLayout(t, l2, s.f, 4096, 0)
	if stillMapped(t, uint64(l1.Base()), l1.Len()) {
		t.Fatal("the replaced range is still mapped")
	}
	s.guestSend(t, frame(80, 8))
	if got := s.deviceReceive(t); len(got) != 1 || !bytes.Equal(got[0], frame(80, 8)) {
		t.Fatalf("after the table change the device received %d frames", len(got))
	}
	if err := s.f.Close(); err != nil {
		t.Fatal(err)
	}
	chs, bad := cl.get()
	if len(bad) != 0 {
		t.Fatal(bad)
	}
	if len(chs) != 3 {
		t.Fatalf("%d changes, want 3 (first table, replaced, session end): %+v", len(chs), chs)
	}
	if chs[0].Old != nil || chs[0].New != l1 || chs[1].Old != l1 || chs[1].New != l2 || chs[2].Old != l2 || chs[2].New != nil {
		t.Fatalf("changes %+v", chs)
	}
	for i := 1; i < 3; i++ {
		if chs[i].Generation <= chs[i-1].Generation {
			t.Fatalf("generations %d then %d", chs[i-1].Generation, chs[i].Generation)
		}
	}
	if s.d.MemoryLayout() != nil {
		t.Fatal("a layout after the session ended")
	}
}

// TestContiguousHookBounded: a hook that does not return holds the control
// path for MemoryChangeTimeout only: the table change completes, frames
// flow over the new table, and the old range stays mapped until the hook
// returns, then goes.
func TestContiguousHookBounded(t *testing.T) {
	cl := &changeLog{t: t}
	s := startSessionWith(t, vhost.Config{Contiguous: true, OnMemoryChange: cl.hook, MemoryChangeTimeout: 100 * time.Millisecond},
		vhosttest.Options{Packed: true})
	l1 := s.d.MemoryLayout()
	block := make(chan struct{})
	cl.mu.Lock()
	cl.block = block
	cl.mu.Unlock()
	start := time.Now()
	s.f.SetMemTable()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("SET_MEM_TABLE took %v with a stuck hook", d)
	}
	s.guestSend(t, frame(90, 9))
	if got := s.deviceReceive(t); len(got) != 1 || !bytes.Equal(got[0], frame(90, 9)) {
		t.Fatalf("with the hook stuck the device received %d frames", len(got))
	}
	if !stillMapped(t, uint64(l1.Base()), l1.Len()) {
		t.Fatal("the old range was unmapped while the hook had not returned")
	}
	cl.mu.Lock()
	cl.block = nil
	cl.mu.Unlock()
	close(block)
	vhosttest.WaitFor(t, "old range unmapped after the hook returned", func() bool {
		return !stillMapped(t, uint64(l1.Base()), l1.Len())
	})
	if _, bad := cl.get(); len(bad) != 0 {
		t.Fatal(bad)
	}
}

// TestContiguousMemoryFault: a front-end that truncates its memfd under a
// table mapped as one range faults the control path's next touch of its
// rings (a new kick fd rebinds the running queue, which no poller does
// here): the fault is recognised as this guest's, within the range, and
// breaks only this device; the next front-end starts clean.
func TestContiguousMemoryFault(t *testing.T) {
	s := startSessionWith(t, vhost.Config{Contiguous: true, SwitchArea: 4096}, vhosttest.Options{Packed: true})
	s.f.TruncateMemory(0)
	_ = s.f.SendMsg(vhosttest.ReqSetVringKick, vhosttest.FlagVersion, vhosttest.U64(0), vhosttest.EventFD(t))
	if err := s.f.WaitClosed(); !errors.Is(err, guestmem.ErrFault) {
		t.Fatalf("session ended with %v, want a guest memory fault", err)
	}
	if s.d.MemoryLayout() != nil {
		t.Fatal("a layout after the broken session")
	}
	g := vhosttest.Connect(t, s.d)
	g.Start(vhosttest.Options{Packed: true})
	vhosttest.WaitFor(t, "the next front-end ready", func() bool { return s.d.Info().Ready })
	if s.d.MemoryLayout() == nil {
		t.Fatal("no layout for the next front-end")
	}
}
