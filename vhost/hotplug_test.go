package vhost_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
	"github.com/xvswitch/xvswitch/virtq"
)

// txPoller plays the switch on a device's TX queue 0 on a goroutine of its
// own: it takes the guest's frames, checks each is frame(n, byte(n)), and
// breaks the device on a ring error, as the switch does.
type txPoller struct {
	got, bad atomic.Int64
	mu       sync.Mutex
	err      error // the ring error it broke the device with
	stop     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

func startTxPoller(t *testing.T, d *vhost.Device) *txPoller {
	p := &txPoller{stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		q := d.TxQueue(0)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			a := q.Begin()
			if a == nil {
				continue
			}
			_, err := a.Tx.Receive(virtq.MaxBurst)
			fr := a.Tx.Frames()
			for i := 0; i < fr.Len(); i++ {
				b := make([]byte, fr.FrameLen(i))
				fr.Peek(i, b)
				if !bytes.Equal(b, frame(len(b), byte(len(b)))) {
					p.bad.Add(1)
				}
			}
			p.got.Add(int64(fr.Len()))
			if cerr := a.Tx.Complete(); err == nil {
				err = cerr
			}
			if err != nil {
				p.mu.Lock()
				if p.err == nil {
					p.err = err
				}
				p.mu.Unlock()
				a.Break(err)
			}
			q.End()
		}
	}()
	t.Cleanup(p.halt)
	return p
}

func (p *txPoller) halt() { p.once.Do(func() { close(p.stop) }); p.wg.Wait() }

func (p *txPoller) ringErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// sendAndWait sends n frames of varying length from the guest and waits
// until the poller has them all.
func sendAndWait(t *testing.T, s *testSession, p *txPoller, n int) {
	t.Helper()
	want := p.got.Load() + int64(n)
	for i := 0; i < n; i++ {
		l := 60 + (i*37)%1400
		s.guestSend(t, frame(l, byte(l)))
	}
	vhosttest.WaitFor(t, "the guest's frames", func() bool { return p.got.Load() >= want })
	if _, err := s.tx().Reap(); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryHotPlug adds and removes guest memory (ADD_MEM_REG, REM_MEM_REG
// with CONFIGURE_MEM_SLOTS, as QEMU does for a DIMM or a memory backend)
// while a poller takes the guest's frames, on both ring kinds, with the
// memory table mapped region by region and as one range (Contiguous):
//   - every frame sent before, between and after arrives exactly once,
//     intact, from buffers in the old region and then in the added one;
//   - the device delivers into receive buffers in the added region;
//   - a removed region is unmapped by the device; with Contiguous each
//     change is a new generation, announced before the old range goes;
//   - a descriptor into the removed region afterwards is a bad address:
//     the device is broken with it, nothing outside memory is touched.
func TestMemoryHotPlug(t *testing.T) {
	for _, contiguous := range []bool{false, true} {
		for _, packed := range []bool{true, false} {
			t.Run(fmt.Sprintf("contiguous=%v/packed=%v", contiguous, packed), func(t *testing.T) {
				testMemoryHotPlug(t, contiguous, packed)
			})
		}
	}
}

func testMemoryHotPlug(t *testing.T, contiguous, packed bool) {
	cl := &changeLog{t: t}
	cfg := vhost.Config{Contiguous: contiguous}
	if contiguous {
		cfg.OnMemoryChange = cl.hook
	}
	s := startSessionWith(t, cfg, vhosttest.Options{Packed: packed})
	p := startTxPoller(t, s.d)
	gen := func() uint64 {
		if l := s.d.MemoryLayout(); l != nil {
			return l.Generation()
		}
		return 0
	}
	deviceMaps := func(name string) int { return len(mappingsOf(t, name)) - 1 } // less the front-end's own

	sendAndWait(t, s, p, 50) // buffers in region 1
	g0 := gen()

	// Plug 4 MiB and move the guest's buffers there.
	k := s.f.AddRegion(4 << 20)
	if k != 2 || s.d.Info().Regions != 3 {
		t.Fatalf("added region %d, device has %d regions", k, s.d.Info().Regions)
	}
	added := s.f.Regions()[k]
	if contiguous {
		if gen() <= g0 {
			t.Fatalf("generation %d after ADD_MEM_REG, was %d", gen(), g0)
		}
		checkLayout(t, s.d.MemoryLayout(), s.f, 0, 0)
	}
	s.f.UseBufferRegion(k)
	sendAndWait(t, s, p, 50)
	s.f.PostRx(0, 4)
	rx := frame(300, 0x33)
	if n := s.deviceDeliver(t, rx); n != 1 {
		t.Fatalf("delivered %d frames into the added region's buffers", n)
	}
	got := s.f.Receive(0)
	if len(got) != 1 || !bytes.Equal(got[0].Frame, rx) {
		t.Fatalf("guest received %+v", got)
	}
	if !bytes.Contains(s.f.Mem().Regions[2].Host, rx) {
		t.Fatal("the frame the device delivered is not in the added region")
	}

	// Unplug the old buffer region, every buffer of it given back.
	old := s.f.Regions()[1]
	g1 := gen()
	if deviceMaps("drivertest-guest-1") != 1 {
		t.Fatalf("device mappings of region 1 before REM_MEM_REG: %d", deviceMaps("drivertest-guest-1"))
	}
	s.f.RemoveRegion(1)
	if inf := s.d.Info(); inf.Regions != 2 || !inf.Ready {
		t.Fatalf("after REM_MEM_REG: %+v", inf)
	}
	if n := deviceMaps("drivertest-guest-1"); n != 0 {
		t.Fatalf("the device still maps the removed region %d times", n)
	}
	if contiguous {
		if gen() <= g1 {
			t.Fatalf("generation %d after REM_MEM_REG, was %d", gen(), g1)
		}
		l := s.d.MemoryLayout()
		checkLayout(t, l, s.f, 0, 0)
		if rs := l.Regions(); rs[1].GuestAddr != added.GuestAddr {
			t.Fatalf("layout after REM_MEM_REG: %+v", rs)
		}
	}
	sendAndWait(t, s, p, 50)
	if p.bad.Load() != 0 || p.got.Load() != 150 || p.ringErr() != nil {
		t.Fatalf("poller: %d frames, %d bad, error %v; want 150, 0, none", p.got.Load(), p.bad.Load(), p.ringErr())
	}

	// A descriptor into the removed region: a bad address, the device
	// broken with it.
	if _, err := s.tx().Add(vhosttest.Buf{Addr: old.GuestAddr + 0x100, Len: 200}); err != nil {
		t.Fatal(err)
	}
	s.f.Kick(1)
	if err := s.f.WaitClosed(); !errors.Is(err, virtq.ErrBadAddress) {
		t.Fatalf("session ended with %v, want ErrBadAddress", err)
	}
	if !errors.Is(p.ringErr(), virtq.ErrBadAddress) {
		t.Fatalf("poller saw %v", p.ringErr())
	}
	if contiguous {
		chs, bad := cl.get()
		if len(bad) != 0 {
			t.Fatal(bad)
		}
		// First table, ADD, REM, the session's end.
		if len(chs) != 4 || chs[3].New != nil || chs[1].New.Generation() != chs[1].Generation ||
			len(chs[1].New.Regions()) != 3 || len(chs[2].New.Regions()) != 2 {
			t.Fatalf("changes %+v", chs)
		}
		if s.d.MemoryLayout() != nil {
			t.Fatal("a layout after the session ended")
		}
	}
}

// TestRemoveRingRegion: a front-end that unplugs the region its rings are
// in leaves rings that cannot run: the device is broken with the reason
// (the rings are not rebuilt over memory that is gone), with the memory
// table mapped either way.
func TestRemoveRingRegion(t *testing.T) {
	for _, contiguous := range []bool{false, true} {
		t.Run(fmt.Sprintf("contiguous=%v", contiguous), func(t *testing.T) {
			s := startSessionWith(t, vhost.Config{Contiguous: contiguous}, vhosttest.Options{Packed: true})
			s.guestSend(t, frame(100, 1))
			if got := s.deviceReceive(t); len(got) != 1 {
				t.Fatalf("received %d frames", len(got))
			}
			if v, err := s.f.Ack(vhosttest.ReqRemMemReg, vhosttest.MemReg(s.f.Regions()[0])); err == nil && v == 0 {
				t.Fatal("REM_MEM_REG of the rings' region acknowledged as done")
			}
			if err := s.f.WaitClosed(); !errors.Is(err, vhost.ErrBadMessage) {
				t.Fatalf("session ended with %v", err)
			}
			if n := len(mappingsOf(t, "drivertest-guest-0")); n != 1 {
				t.Fatalf("%d mappings of the rings' region, want the front-end's only", n)
			}
		})
	}
}
