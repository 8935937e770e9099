package libvirt

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Define defines the domain in file (named name) with schema validation,
// and undefines it again when the test ends; it returns virsh's output.
func (c *Conn) Define(t testing.TB, file, name string) (string, error) {
	t.Helper()
	out, err := Virsh("define", "--validate", file)
	if err == nil {
		t.Cleanup(func() { _, _ = Virsh("undefine", name) })
	}
	return strings.TrimSpace(out), err
}

// Running is a transient domain started by Create.
type Running struct {
	Name  string
	start time.Time
}

// Create starts d as a transient domain (`virsh create`: it is gone once
// the guest powers off) and destroys it when the test ends if it still
// runs. libvirt's QEMU waits, before the guest starts, until a back-end
// connects to each interface of mode "server": start xvswitch first.
func (c *Conn) Create(t testing.TB, d *Domain, dir string) *Running {
	t.Helper()
	if d.Name == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		d.Name = "xvs-" + hex.EncodeToString(b[:])
	}
	file := filepath.Join(dir, d.Name+".xml")
	if err := os.WriteFile(file, []byte(d.XML()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Running{Name: d.Name, start: time.Now()}
	t.Cleanup(func() {
		if r.running() {
			_, _ = Virsh("destroy", r.Name)
		}
		log := filepath.Join(qemuLogDir, r.Name+".log")
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("libvirt's QEMU log of %s:\n%s", r.Name, b)
		}
		os.Remove(log)
	})
	if out, err := Virsh("create", file); err != nil {
		t.Fatalf("%v\n%s", err, d.XML())
	} else {
		t.Logf("%s", strings.TrimSpace(out))
	}
	return r
}

func (r *Running) running() bool {
	_, err := Virsh("domid", r.Name)
	return err == nil
}

// Wait waits until the domain is gone (the guest powered off) or timeout
// passes, and returns how long it ran and whether it ended by itself.
func (r *Running) Wait(timeout time.Duration) (time.Duration, bool) {
	for end := time.Now().Add(timeout); r.running(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(end) {
			return time.Since(r.start), false
		}
	}
	return time.Since(r.start), true
}
