package vswitch

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

type fakeCtl struct {
	added []string
}

func (f *fakeCtl) Ports() []PortInfo {
	return []PortInfo{{Name: "vm1", Kind: "vhost", State: "ready", Queues: 1}}
}
func (f *fakeCtl) FDB() []FDBRow { return []FDBRow{{MAC: "52:54:00:00:00:01", Port: "vm1"}} }
func (f *fakeCtl) Stats() []PortCounters {
	return []PortCounters{SumQueues("vm1", []QueueCounters{{RxPackets: 3, Drops: map[string]uint64{"no_rx_buffers": 1}}})}
}
func (f *fakeCtl) AddNIC(n NICSpec) error     { f.added = append(f.added, "nic:"+n.Name); return nil }
func (f *fakeCtl) AddVhost(v VhostSpec) error { f.added = append(f.added, "vhost:"+v.Name); return nil }
func (f *fakeCtl) DelPort(name string) error {
	if name != "vm1" {
		return errors.New("no such port")
	}
	return nil
}

func TestControlRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeCtl{}
	done := make(chan error)
	go func() { done <- ServeControl(ctx, path, f) }()
	var resp Response
	var err error
	for i := 0; i < 100; i++ {
		if resp, err = Call(path, Request{Op: "show-stats"}); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || len(resp.Stats) != 1 || resp.Stats[0].RxPackets != 3 || resp.Stats[0].Drops["no_rx_buffers"] != 1 {
		t.Fatalf("show-stats: %+v %v", resp, err)
	}
	if _, err := Call(path, Request{Op: "add-port", Vhost: "/tmp/vm2.sock,queues=2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Call(path, Request{Op: "add-port", NIC: "eth9,mode=bogus"}); err == nil {
		t.Fatal("bad spec accepted")
	}
	if _, err := Call(path, Request{Op: "del-port", Name: "nope"}); err == nil {
		t.Fatal("deleting an unknown port succeeded")
	}
	if _, err := Call(path, Request{Op: "frobnicate"}); err == nil {
		t.Fatal("unknown op accepted")
	}
	if len(f.added) != 1 || f.added[0] != "vhost:vm2" {
		t.Fatalf("added %v", f.added)
	}
	// A second server on the same path refuses to steal it.
	if err := ServeControl(ctx, path, f); err == nil {
		t.Fatal("second server took over a live control socket")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
