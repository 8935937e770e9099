package afpacket

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeRing is a ring over anonymous memory, filled the way the kernel
// fills a TPACKET_V2 ring, so the process's side runs unprivileged.
func fakeRing(t *testing.T, slots int) (*ring, []byte) { return fakeRingTB(t, slots) }

func fakeRingTB(t testing.TB, slots int) (*ring, []byte) {
	t.Helper()
	slotSize, n, _ := ringShape(1522, slots, 4096)
	mem, err := unix.Mmap(-1, 0, n*slotSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	r, err := newRing(mem, slotSize, n)
	if err != nil {
		t.Fatal(err)
	}
	return r, mem
}

// macOff is where the kernel puts a 14-byte MAC header with 4 bytes
// reserved (tpacket_rcv: TPACKET_ALIGN(52 + 16) + 4 - 14).
const macOff = 70

// put writes frame f into slot i as the kernel would, with status st
// (TP_STATUS_USER added) and, if vlan, the tag fields.
func put(r *ring, i int, f []byte, wire int, st uint32, tci, tpid uint16) {
	slot := r.mem[i*r.slotSize : (i+1)*r.slotSize]
	ne := binary.NativeEndian
	ne.PutUint32(slot[offLen:], uint32(wire))
	ne.PutUint32(slot[offSnaplen:], uint32(len(f)))
	ne.PutUint16(slot[offMac:], macOff)
	ne.PutUint16(slot[offVLANTCI:], tci)
	ne.PutUint16(slot[offVLANTPID:], tpid)
	copy(slot[macOff:], f)
	r.status[i].Store(st | unix.TP_STATUS_USER)
}

func testFrame(n int, tag byte) []byte {
	f := make([]byte, n)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, tag, 0x08, 0x00})
	for i := 14; i < n; i++ {
		f[i] = byte(i) ^ tag
	}
	return f
}

// Frames come out in ring order, at most a burst and never more than the
// ring holds, and go back to the kernel in order, across the wrap.
func TestRingOrderAndWrap(t *testing.T) {
	r, _ := fakeRing(t, 4)
	slots := len(r.status)
	var out [3]Frame
	next := 0 // next slot the "kernel" fills
	for round := 0; round < 3*slots; round++ {
		f := testFrame(60+round, byte(round))
		put(r, next%slots, f, len(f), 0, 0, 0)
		next++
		if got := r.receive(out[:]); got != 1 {
			t.Fatalf("round %d: received %d, want 1", round, got)
		}
		if !bytes.Equal(out[0].Data, f) || out[0].WireLen != len(f) || out[0].Truncated() {
			t.Fatalf("round %d: frame %x (wire %d), want %x", round, out[0].Data, out[0].WireLen, f)
		}
		if got := r.receive(out[:]); got != 0 {
			t.Fatalf("round %d: a second receive found %d", round, got)
		}
		r.release()
		if st := r.status[(next-1)%slots].Load(); st != unix.TP_STATUS_KERNEL {
			t.Fatalf("round %d: released slot has status %#x", round, st)
		}
	}
	// A full ring: bursts of 3, then what is left, then nothing until
	// released.
	for i := 0; i < slots; i++ {
		put(r, (next+i)%slots, testFrame(64, byte(i)), 64, 0, 0, 0)
	}
	total := 0
	for n := r.receive(out[:]); n > 0; n = r.receive(out[:]) {
		total += n
	}
	if total != slots {
		t.Fatalf("received %d of a full ring of %d", total, slots)
	}
	r.release()
	for i, w := range r.status {
		if w.Load() != unix.TP_STATUS_KERNEL {
			t.Fatalf("slot %d not given back", i)
		}
	}
}

// A tag the kernel took out is put back, TPID and TCI as the kernel
// recorded them (802.1Q when it recorded no TPID).
func TestRingVLANReinserted(t *testing.T) {
	r, _ := fakeRing(t, 4)
	f := testFrame(80, 7)
	put(r, 0, f, len(f), unix.TP_STATUS_VLAN_VALID, 0x2064, 0)
	put(r, 1, f, len(f), unix.TP_STATUS_VLAN_VALID|unix.TP_STATUS_VLAN_TPID_VALID, 0x0005, 0x88a8)
	var out [4]Frame
	if n := r.receive(out[:]); n != 2 {
		t.Fatalf("received %d", n)
	}
	for i, want := range [][]byte{
		append(append(append([]byte{}, f[:12]...), 0x81, 0x00, 0x20, 0x64), f[12:]...),
		append(append(append([]byte{}, f[:12]...), 0x88, 0xa8, 0x00, 0x05), f[12:]...),
	} {
		if !bytes.Equal(out[i].Data, want) || out[i].WireLen != len(want) {
			t.Errorf("frame %d: %x (wire %d), want %x", i, out[i].Data, out[i].WireLen, want)
		}
	}
}

// What the kernel's header says is checked against the slot: a frame it
// does not fit is no frame (nil Data), never a view outside the slot.
func TestRingBadHeader(t *testing.T) {
	r, _ := fakeRing(t, 4)
	f := testFrame(60, 1)
	put(r, 0, f, len(f), 0, 0, 0)
	binary.NativeEndian.PutUint32(r.mem[offSnaplen:], uint32(r.slotSize)) // past the slot
	put(r, 1, f, len(f), 0, 0, 0)
	binary.NativeEndian.PutUint16(r.mem[r.slotSize+offMac:], 10) // inside the header
	put(r, 2, f[:8], len(f), unix.TP_STATUS_VLAN_VALID, 1, 0)    // a tag but no MACs to put it after
	put(r, 3, f[:40], 1500, unix.TP_STATUS_CSUMNOTREADY, 0, 0)   // truncated
	var out [4]Frame
	if n := r.receive(out[:]); n != 4 {
		t.Fatalf("received %d", n)
	}
	for i := 0; i < 3; i++ {
		if out[i].Data != nil {
			t.Errorf("frame %d: %d bytes from a bad header", i, len(out[i].Data))
		}
	}
	if !out[3].Truncated() || !bytes.Equal(out[3].Data, f[:40]) || !out[3].CsumPartial {
		t.Errorf("truncated frame: %+v", out[3])
	}
}

func TestRingShape(t *testing.T) {
	for _, tc := range []struct{ maxFrame, slots, slot, n, block int }{
		{1522, 1024, 2048, 1024, 4096},
		{1522, 3, 2048, 4, 4096},
		{9022, 100, 16384, 100, 16384},
		{100, 5, 256, 16, 4096},
	} {
		slot, n, block := ringShape(tc.maxFrame, tc.slots, 4096)
		if slot != tc.slot || n != tc.n || block != tc.block {
			t.Errorf("ringShape(%d, %d) = %d, %d, %d; want %d, %d, %d", tc.maxFrame, tc.slots, slot, n, block, tc.slot, tc.n, tc.block)
		}
		if slot < macOff+tc.maxFrame {
			t.Errorf("slot %d cannot hold a %d-byte frame at %d", slot, tc.maxFrame, macOff)
		}
	}
}

// A burst in and out costs no allocation.
func TestRingNoAllocs(t *testing.T) {
	r, _ := fakeRing(t, 64)
	f := testFrame(64, 3)
	var out [32]Frame
	next := 0
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 32; i++ {
			put(r, next%len(r.status), f, len(f), unix.TP_STATUS_VLAN_VALID, 9, 0)
			next++
		}
		if n := r.receive(out[:]); n != 32 {
			t.Fatalf("received %d", n)
		}
		r.release()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per burst", allocs)
	}
}

// BenchmarkRingBurst32 is the process's side of a burst of 32 frames:
// reading the slots the kernel handed over and giving them back (the
// kernel's side, here one store per slot to hand it over, is included).
func BenchmarkRingBurst32(b *testing.B) {
	for _, vlan := range []bool{false, true} {
		name := map[bool]string{false: "untagged", true: "tag-reinserted"}[vlan]
		b.Run(name, func(b *testing.B) {
			r, _ := fakeRingTB(b, 64)
			f := testFrame(64, 3)
			for i := range r.status {
				put(r, i, f, len(f), 0, 0, 0)
			}
			st := uint32(unix.TP_STATUS_USER)
			if vlan {
				st |= unix.TP_STATUS_VLAN_VALID
			}
			var out [32]Frame
			next := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := 0; i < 32; i++ {
					slot := (next + i) % len(r.status)
					binary.NativeEndian.PutUint16(r.mem[slot*r.slotSize+offMac:], macOff)
					r.status[slot].Store(st)
				}
				next += 32
				if r.receive(out[:]) != 32 {
					b.Fatal("short burst")
				}
				r.release()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/frame")
		})
	}
}
