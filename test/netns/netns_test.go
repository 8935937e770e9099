package netns

import (
	"net"
	"strings"
	"testing"
)

func TestVethPing(t *testing.T) {
	t.Parallel()
	v := NewVeth(t, VethOptions{Queues: 2, OuterAddr: "10.77.0.1/24", InnerAddr: "10.77.0.2/24"})
	out := v.NS.MustRun(t, "ping", "-c", "1", "-W", "2", "10.77.0.1")
	if !strings.Contains(out, "1 received") {
		t.Fatalf("no reply across the veth pair:\n%s", out)
	}
	// The inner end lives only in the namespace, and Do runs there.
	if _, err := net.InterfaceByName(v.Inner); err == nil {
		t.Fatalf("%s is visible outside its namespace", v.Inner)
	}
	if err := v.NS.Do(func() error {
		_, err := net.InterfaceByName(v.Inner)
		return err
	}); err != nil {
		t.Fatalf("inside the namespace: %v", err)
	}
	q := MustRun(t, "ls", "/sys/class/net/"+v.Outer+"/queues")
	if !strings.Contains(q, "rx-1") {
		t.Fatalf("want 2 rx queues on %s, got %s", v.Outer, q)
	}
}
