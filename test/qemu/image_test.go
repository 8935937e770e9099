package qemu

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/xvswitch/xvswitch/test/require"
)

// fakeKernelDeb builds a small stand-in for linux-image-6.1.0-N-amd64 in
// dir: a vmlinuz that is not a real bzImage, the eight virtio-net modules
// (one xz-compressed, as later kernels ship them) and one module the guest
// must not get.
func fakeKernelDeb(t *testing.T, dir string) string {
	t.Helper()
	require.Commands(t, "dpkg-deb", "xz")
	root := filepath.Join(t.TempDir(), "pkg")
	kver := "6.1.0-99-amd64"
	write := func(rel string, body []byte) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("DEBIAN/control", []byte("Package: linux-image-"+kver+"\nVersion: 6.1.0-1\nArchitecture: amd64\n"+
		"Maintainer: test <test@example.com>\nDescription: fake kernel for the guest builder test\n"))
	write("boot/vmlinuz-"+kver, []byte("not really a bzImage"))
	mods := filepath.Join("lib/modules", kver, "kernel")
	for _, m := range append(guestModules, "virtio_balloon") {
		body := []byte("ko:" + m)
		if m == "virtio_pci" {
			cmd := exec.Command("xz", "-c")
			cmd.Stdin = bytes.NewReader(body)
			xz, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			write(filepath.Join(mods, "drivers/virtio", m+".ko.xz"), xz)
			continue
		}
		write(filepath.Join(mods, "drivers/virtio", m+".ko"), body)
	}
	deb := filepath.Join(dir, "linux-image-"+kver+"_6.1.0-1_amd64.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
	}
	return deb
}

// TestBuildGuestImageRace builds the guest from a fake kernel package in
// three goroutines at once into one cache: all must get the same complete
// build, with the modules in load order, decompressed, and nothing else.
func TestBuildGuestImageRace(t *testing.T) {
	if _, err := staticBusybox(); err != nil {
		require.SkipOrFail(t, err.Error())
	}
	cache := t.TempDir()
	fakeKernelDeb(t, cache)
	var wg sync.WaitGroup
	imgs := make([]*GuestImage, 3)
	errs := make([]error, 3)
	for i := range imgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			imgs[i], errs[i] = BuildGuestImage(cache, func(f string, a ...any) { t.Logf("build %d: %s", i, fmt.Sprintf(f, a...)) })
		}()
	}
	wg.Wait()
	for i := range imgs {
		if errs[i] != nil {
			t.Fatalf("build %d: %v", i, errs[i])
		}
		if *imgs[i] != *imgs[0] {
			t.Errorf("build %d got %+v, build 0 %+v", i, imgs[i], imgs[0])
		}
	}
	img := imgs[0]
	if img.KernelVersion != "6.1.0-99-amd64" || filepath.Base(img.Kernel) != "vmlinuz" {
		t.Errorf("image %+v: want kernel 6.1.0-99-amd64 booted from vmlinuz (no PVH vmlinux in a fake)", img)
	}
	// No temporary build directory is left behind.
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".build-") {
			t.Errorf("leftover %s", e.Name())
		}
	}
	gz, err := os.ReadFile(img.Initrd)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	arch, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]cpioEntry{}
	for _, e := range readNewc(t, arch) {
		files[e.name] = e
	}
	if got := string(files["lib/modules/xvs-order"].body); got != strings.Join(guestModules, "\n")+"\n" {
		t.Errorf("module order %q", got)
	}
	for _, m := range guestModules {
		if got := string(files["lib/modules/"+m+".ko"].body); got != "ko:"+m {
			t.Errorf("module %s: %q", m, got)
		}
	}
	if _, ok := files["lib/modules/virtio_balloon.ko"]; ok {
		t.Error("a module outside the list made it into the initramfs")
	}
	if !bytes.Equal(files["init"].body, guestInit) || files["init"].mode != cpioModeReg|0o755 {
		t.Error("/init missing or not executable")
	}
	if c := files["dev/console"]; c.mode != cpioModeChr|0o600 || c.rmaj != 5 || c.rminor != 1 {
		t.Errorf("dev/console: %+v", c)
	}
	if string(files["bin/nsenter"].body) != "busybox" || len(files["bin/busybox"].body) < 100000 {
		t.Error("busybox or its applet links missing")
	}
	// A second call finds the build and does nothing.
	var said []string
	again, err := BuildGuestImage(cache, func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) })
	if err != nil || *again != *img || len(said) != 0 {
		t.Errorf("rebuild: %+v, %v, said %q", again, err, said)
	}
}
