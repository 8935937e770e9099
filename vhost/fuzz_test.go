package vhost

import (
	"encoding/binary"
	"io"
	"log/slog"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FuzzMessages feeds arbitrary bytes to a device as a front-end's stream:
// whatever they say, the device answers or closes the connection, ends the
// session once the stream ends, and never panics or hangs.
func FuzzMessages(f *testing.F) {
	msg := func(req request, flags uint32, payload []byte) []byte {
		b := make([]byte, headerSize+len(payload))
		binary.LittleEndian.PutUint32(b[0:], uint32(req))
		binary.LittleEndian.PutUint32(b[4:], flags)
		binary.LittleEndian.PutUint32(b[8:], uint32(len(payload)))
		copy(b[headerSize:], payload)
		return b
	}
	cat := func(ms ...[]byte) []byte {
		var out []byte
		for _, m := range ms {
			out = append(out, m...)
		}
		return out
	}
	f.Add(cat(msg(reqGetFeatures, 1, nil), msg(reqSetFeatures, 1, u64b(featBase))))
	f.Add(cat(msg(reqGetProtocolFeatures, 1, nil), msg(reqSetProtocolFeatures, 1, u64b(protoQEMU)),
		msg(reqSetVringNum, 9, stateb(0, 256)), msg(reqSetVringBase, 9, stateb(1, 0x8000)),
		msg(reqSetVringAddr, 9, addrb(0, 0x1000, 0x3000, 0x2000)), msg(reqSetVringKick, 9, u64b(0x100)),
		msg(reqSetVringEnable, 9, stateb(0, 1)), msg(reqGetVringBase, 1, stateb(0, 0))))
	f.Add(cat(msg(reqGetConfig, 1, make([]byte, 24)), msg(reqNetSetMTU, 9, u64b(9000)), msg(reqSendRARP, 9, u64b(1))))
	f.Add(cat(msg(reqSetMemTable, 9, memTableb(regionDesc{size: 4096})), msg(request(99), 9, nil)))
	f.Add(msg(reqAddMemReg, 9, make([]byte, 40)))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Open(Config{Name: "fuzz", QueuePairs: 2, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		back, front := fileConn(t, fds[0]), fileConn(t, fds[1])
		defer front.Close()
		done := make(chan error, 1)
		go func() { done <- d.ServeConn(back) }()
		// Drain replies while writing, so neither side can block.
		drained := make(chan struct{})
		go func() {
			_ = front.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.Copy(io.Discard, front)
			close(drained)
		}()
		_ = front.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = front.Write(data)
		_ = front.CloseWrite()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("session did not end after the stream ended (%d bytes)", len(data))
		}
		<-drained
	})
}
