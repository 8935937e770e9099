package guestmem_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/xvswitch/xvswitch/guestmem"
)

// logArea returns an 8-byte aligned area of words 64-bit words.
func logArea(words int) ([]byte, []uint64) {
	w := make([]uint64, words)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*words), w
}

func TestDirtyLogMarksPages(t *testing.T) {
	area, words := logArea(4) // 256 pages: 1 MiB of guest memory
	l, err := guestmem.NewDirtyLog(area)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Covers(); got != 1<<20 {
		t.Fatalf("Covers = %#x, want 1 MiB", got)
	}
	cases := []struct {
		gpa, n uint64
		pages  []uint64 // pages that must be marked
	}{
		{0, 1, []uint64{0}},
		{0xfff, 2, []uint64{0, 1}},
		{0x3f000, 0x2000, []uint64{63, 64}}, // across a word
		{0x41000, 0x1000, []uint64{65}},     // exactly one page
		{0x80000, 0x41000, nil},             // 65 pages from 128: checked below
		{0x50000, 0, nil},                   // empty: nothing
		{0xff000, 0x1000, []uint64{255}},    // the last page
	}
	want := map[uint64]bool{}
	for _, c := range cases {
		l.Mark(c.gpa, c.n)
		for _, p := range c.pages {
			want[p] = true
		}
	}
	for p := uint64(128); p < 128+65; p++ {
		want[p] = true
	}
	for p := uint64(0); p < 256; p++ {
		got := words[p/64]&(1<<(p%64)) != 0
		if got != want[p] {
			t.Errorf("page %d: dirty %v, want %v", p, got, want[p])
		}
		if l.IsDirty(p<<12) != got {
			t.Errorf("page %d: IsDirty disagrees with the bitmap", p)
		}
	}
	if l.Missed() != 0 {
		t.Errorf("Missed = %d, want 0", l.Missed())
	}
}

// A log smaller than the memory it should cover: marks beyond it are
// counted, never written.
func TestDirtyLogBeyondTheLog(t *testing.T) {
	w := make([]uint64, 3) // a canary word each side of the log
	area := unsafe.Slice((*byte)(unsafe.Pointer(&w[1])), 8)
	l, err := guestmem.NewDirtyLog(area)
	if err != nil {
		t.Fatal(err)
	}
	l.Mark(63<<12, 3<<12) // page 63 in the log, 64 and 65 beyond
	l.Mark(1<<40, 1)
	l.Mark(^uint64(0)-10, 100) // wraps the address space
	if w[0] != 0 || w[2] != 0 {
		t.Fatalf("wrote outside the log: %#x %#x", w[0], w[2])
	}
	if w[1] != 1<<63 {
		t.Fatalf("log word %#x, want page 63 only", w[1])
	}
	if got := l.Missed(); got != 2+1+1 {
		t.Errorf("Missed = %d, want 4", got)
	}
}

func TestDirtyLogRejects(t *testing.T) {
	area, _ := logArea(2)
	for name, a := range map[string][]byte{
		"empty": area[:0], "not a multiple of 8": area[:12], "misaligned": area[4:12],
	} {
		if _, err := guestmem.NewDirtyLog(a); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The front-end clears words while the device marks: no bit the device set
// after the front-end's last clear may be lost (each mark is an atomic OR).
func TestDirtyLogConcurrentClear(t *testing.T) {
	area, words := logArea(1)
	l, _ := guestmem.NewDirtyLog(area)
	var seen [64]atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the front-end: exchange with zero, as QEMU does
		defer wg.Done()
		for {
			v := atomic.SwapUint64(&words[0], 0)
			for p := 0; p < 64; p++ {
				if v&(1<<p) != 0 {
					seen[p].Store(true)
				}
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	for i := 0; i < 100000; i++ {
		l.Mark(uint64(i%64)<<12, 1)
	}
	close(stop)
	wg.Wait()
	v := atomic.LoadUint64(&words[0])
	for p := 0; p < 64; p++ {
		if !seen[p].Load() && v&(1<<p) == 0 {
			t.Errorf("page %d marked but neither seen by the clearer nor left set", p)
		}
	}
}

func TestLogWriteTranslatesHostBytes(t *testing.T) {
	r0 := region(0, 0x4000, 0x7f0000000000)
	r1 := region(0x100000000, 0x4000, 0x7f1000000000)
	m, err := guestmem.New([]guestmem.Region{r0, r1})
	if err != nil {
		t.Fatal(err)
	}
	area, _ := logArea((0x100000000>>12)/64 + 1)
	l, _ := guestmem.NewDirtyLog(area)
	m.LogWrite(r1.Host[:8]) // not logging: nothing
	lm := m.WithLog(l)
	if m.Log() != nil || lm.Log() != l {
		t.Fatal("WithLog changed the original or lost the log")
	}
	b, _ := lm.Translate(0x100000000+0x1ff0, 0x20)
	lm.LogWrite(b)
	lm.LogWritten([][]byte{r0.Host[0x10:0x20], r0.Host[0x3000:0x3010]}, 0x11)
	lm.LogWrite(make([]byte, 8)) // not guest memory
	for gpa, want := range map[uint64]bool{
		0x100000000: false, 0x100001000: true, 0x100002000: true, 0x100003000: false,
		0: true, 0x3000: true, 0x1000: false,
	} {
		if l.IsDirty(gpa) != want {
			t.Errorf("page of %#x: dirty %v, want %v", gpa, !want, want)
		}
	}
	if !lm.ContainsHost(uintptr(unsafe.Pointer(&area[8]))) || m.ContainsHost(uintptr(unsafe.Pointer(&area[8]))) {
		t.Error("ContainsHost should cover the log area of a logged table only")
	}
}

func TestDirtyLogMarkAllocs(t *testing.T) {
	area, _ := logArea(64)
	l, _ := guestmem.NewDirtyLog(area)
	r := region(0, 1<<20, 0x7f0000000000)
	m, _ := guestmem.New([]guestmem.Region{r})
	lm := m.WithLog(l)
	segs := [][]byte{r.Host[100:2000], r.Host[5000:70000]}
	if n := testing.AllocsPerRun(100, func() { lm.LogWritten(segs, 60000); l.Mark(12345, 65536) }); n != 0 {
		t.Errorf("%v allocations per mark", n)
	}
}
