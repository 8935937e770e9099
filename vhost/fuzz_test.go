package vhost_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/xvswitch/xvswitch/vhost"
	"github.com/xvswitch/xvswitch/vhost/vhosttest"
)

// FuzzMessages feeds arbitrary bytes to a device as a front-end's stream:
// whatever they say, the device answers or closes the connection, ends the
// session once the stream ends, and never panics or hangs.
func FuzzMessages(f *testing.F) {
	msg := vhosttest.Message
	cat := func(ms ...[]byte) []byte {
		var out []byte
		for _, m := range ms {
			out = append(out, m...)
		}
		return out
	}
	f.Add(cat(msg(vhosttest.ReqGetFeatures, 1, nil), msg(vhosttest.ReqSetFeatures, 1, vhosttest.U64(vhosttest.DefaultFeatures))))
	f.Add(cat(msg(vhosttest.ReqGetProtocolFeatures, 1, nil), msg(vhosttest.ReqSetProtocolFeatures, 1, vhosttest.U64(vhosttest.ProtocolQEMU)),
		msg(vhosttest.ReqSetVringNum, 9, vhosttest.VringState(0, 256)), msg(vhosttest.ReqSetVringBase, 9, vhosttest.VringState(1, 0x8000)),
		msg(vhosttest.ReqSetVringAddr, 9, vhosttest.VringAddr(0, 0x1000, 0x3000, 0x2000)), msg(vhosttest.ReqSetVringKick, 9, vhosttest.U64(0x100)),
		msg(vhosttest.ReqSetVringEnable, 9, vhosttest.VringState(0, 1)), msg(vhosttest.ReqGetVringBase, 1, vhosttest.VringState(0, 0))))
	f.Add(cat(msg(vhosttest.ReqGetConfig, 1, make([]byte, 24)), msg(vhosttest.ReqNetSetMTU, 9, vhosttest.U64(9000)), msg(vhosttest.ReqSendRARP, 9, vhosttest.U64(1))))
	f.Add(cat(msg(vhosttest.ReqSetMemTable, 9, vhosttest.MemTable(vhosttest.Region{Size: 4096})), msg(vhosttest.Request(99), 9, nil)))
	f.Add(msg(vhosttest.ReqAddMemReg, 9, make([]byte, 40)))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := vhost.Open(vhost.Config{Name: "fuzz", QueuePairs: 2, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		fe := vhosttest.Connect(t, d)
		front := fe.Conn()
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
		case <-fe.Served():
		case <-time.After(10 * time.Second):
			t.Fatalf("session did not end after the stream ended (%d bytes)", len(data))
		}
		<-drained
	})
}
