package qemu

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/xvswitch/xvswitch/test/require"
)

// GuestImage is a built guest: a Debian 6.1 kernel and a busybox initramfs
// with the virtio-net modules and /init. It is built once into the cache
// directory and reused by every run.
type GuestImage struct {
	Dir           string // the build's directory, <cache>/<guestImageFormat>
	Kernel        string // what QEMU boots: vmlinux (PVH) if it could be extracted, else vmlinuz
	Initrd        string // initramfs.cpio.gz
	KernelVersion string // e.g. 6.1.0-57-amd64
}

// guestImageFormat names the layout of a build. Bump it whenever the base
// image changes (guest/init, the module list, the file layout): a build
// lives in <cache>/<format>, so old builds are simply not used.
const guestImageFormat = "v2"

// GuestCacheEnv overrides the cache directory of guest builds.
const GuestCacheEnv = "XVS_GUEST_CACHE"

// DefaultGuestCache is where guest builds live unless GuestCacheEnv says
// otherwise.
const DefaultGuestCache = "/var/cache/xvswitch/guest"

// guestModules are the virtio-net modules in load order (the .deb has no
// modules.dep, so the order is ours to know). A module missing from the
// kernel package (built in, or gone in a later 6.1) is skipped.
var guestModules = []string{
	"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev",
	"virtio_pci", "failover", "net_failover", "virtio_net",
}

//go:embed guest/init
var guestInit []byte

//go:embed guest/lib.sh
var guestLib []byte

// ErrGuestPrereq marks a build that cannot start on this machine: a tool
// or package is missing, or the cache is not writable. Tests skip (or fail
// under XVS_REQUIRE_PRIV=1) on it; any other build error fails them.
var ErrGuestPrereq = errors.New("guest build prerequisite missing")

// GuestCacheDir returns the cache directory: $XVS_GUEST_CACHE or
// DefaultGuestCache.
func GuestCacheDir() string {
	if d := os.Getenv(GuestCacheEnv); d != "" {
		return d
	}
	return DefaultGuestCache
}

var (
	ensureMu    sync.Mutex
	ensureCache = map[string]*GuestImage{}
)

// EnsureGuest returns the cached guest image, building it first if needed
// (downloading the kernel .deb with apt-get download). It skips (or fails
// under XVS_REQUIRE_PRIV=1) when a prerequisite is missing.
func EnsureGuest(t testing.TB) *GuestImage {
	t.Helper()
	dir := GuestCacheDir()
	ensureMu.Lock()
	defer ensureMu.Unlock()
	if img := ensureCache[dir]; img != nil {
		return img
	}
	img, err := BuildGuestImage(dir, t.Logf)
	if errors.Is(err, ErrGuestPrereq) {
		require.SkipOrFail(t, err.Error())
	}
	if err != nil {
		t.Fatalf("guest image: %v", err)
	}
	ensureCache[dir] = img
	return img
}

// BuildGuestImage returns the guest build in cacheDir, making it if it is
// not there. Two processes may race: each builds in its own temporary
// directory and renames it into place; the loser uses the winner's build.
// logf says what it does.
func BuildGuestImage(cacheDir string, logf func(format string, args ...any)) (*GuestImage, error) {
	dir := filepath.Join(cacheDir, guestImageFormat)
	if img, err := loadGuestImage(dir); err == nil {
		return img, nil
	}
	logf("guest: no build in %s: building one", dir)
	bb, err := staticBusybox()
	if err != nil {
		return nil, err
	}
	for _, c := range []string{"dpkg-deb"} {
		if _, err := exec.LookPath(c); err != nil {
			return nil, fmt.Errorf("%w: %s not on PATH (Debian's dpkg)", ErrGuestPrereq, c)
		}
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: cache directory: %v (set %s to a writable directory)", ErrGuestPrereq, err, GuestCacheEnv)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".build-")
	if err != nil {
		return nil, fmt.Errorf("%w: cache directory not writable: %v (set %s)", ErrGuestPrereq, err, GuestCacheEnv)
	}
	defer os.RemoveAll(tmp)
	deb, err := kernelDeb(cacheDir, tmp, logf)
	if err != nil {
		return nil, err
	}
	logf("guest: extracting vmlinuz and %d virtio-net modules from %s", len(guestModules), filepath.Base(deb))
	kver, mods, err := extractKernel(deb, filepath.Join(tmp, "vmlinuz"))
	if err != nil {
		return nil, err
	}
	kernel := "vmlinuz"
	if err := extractVmlinux(filepath.Join(tmp, "vmlinuz"), filepath.Join(tmp, "vmlinux")); err != nil {
		logf("guest: booting the compressed vmlinuz (slower under TCG): %v", err)
	} else {
		kernel = "vmlinux"
		logf("guest: extracted vmlinux (uncompressed, PVH entry: boots ~8 s faster under TCG)")
	}
	logf("guest: writing initramfs (busybox %s, modules %s)", bb, strings.Join(moduleNames(mods), " "))
	if err := writeBaseInitramfs(filepath.Join(tmp, "initramfs.cpio.gz"), bb, mods); err != nil {
		return nil, err
	}
	stamp := fmt.Sprintf("format=%s\nkernel=%s\nboot=%s\ndeb=%s\nbusybox=%s\nmodules=%s\n",
		guestImageFormat, kver, kernel, filepath.Base(deb), bb, strings.Join(moduleNames(mods), ","))
	if err := os.WriteFile(filepath.Join(tmp, "stamp"), []byte(stamp), 0o644); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Someone else finished first: theirs is as good as ours.
		if img, lerr := loadGuestImage(dir); lerr == nil {
			logf("guest: another build won the race; using %s", dir)
			return img, nil
		}
		return nil, fmt.Errorf("install guest build: %w", err)
	}
	img, err := loadGuestImage(dir)
	if err != nil {
		return nil, err
	}
	logf("guest: built %s (kernel %s)", dir, img.KernelVersion)
	return img, nil
}

// loadGuestImage returns the build in dir if it is complete (the stamp is
// written last, inside the temporary directory, before the rename).
func loadGuestImage(dir string) (*GuestImage, error) {
	stamp, err := os.ReadFile(filepath.Join(dir, "stamp"))
	if err != nil {
		return nil, err
	}
	img := &GuestImage{Dir: dir, Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initramfs.cpio.gz")}
	for _, l := range strings.Split(string(stamp), "\n") {
		if v, ok := strings.CutPrefix(l, "kernel="); ok {
			img.KernelVersion = v
		}
		if v, ok := strings.CutPrefix(l, "boot="); ok && filepath.Base(v) == v && v != "" {
			img.Kernel = filepath.Join(dir, v)
		}
	}
	for _, f := range []string{img.Kernel, img.Initrd} {
		if _, err := os.Stat(f); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// staticBusybox finds busybox-static's binary: it must be statically
// linked, since the initramfs has no libc.
func staticBusybox() (string, error) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, ph := range f.Progs {
			if ph.Type == elf.PT_INTERP {
				static = false
			}
		}
		f.Close()
		if static {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: no statically linked busybox (apt-get install busybox-static)", ErrGuestPrereq)
}

// writeBaseInitramfs writes the cached initramfs: busybox with a symlink
// per applet, /dev/console (the kernel opens it for init before devtmpfs
// is mounted), the modules and their load order, and /init.
func writeBaseInitramfs(path, busybox string, mods []guestModule) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	list, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	applets := strings.Fields(string(list))
	sort.Strings(applets)

	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	cw := newCPIOWriter(zw)
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp", "etc", "lib", "lib/modules", "xvs"} {
		cw.Dir(d)
	}
	cw.CharDev("dev/console", 0o600, 5, 1)
	cw.CharDev("dev/null", 0o666, 1, 3)
	cw.File("bin/busybox", 0o755, bb)
	for _, a := range applets {
		if a != "busybox" {
			cw.Symlink("bin/"+a, "busybox")
		}
	}
	cw.Symlink("sbin", "bin")
	cw.Symlink("usr", ".")
	cw.File("init", 0o755, guestInit)
	var order strings.Builder
	for _, m := range mods {
		cw.File("lib/modules/"+m.name+".ko", 0o644, m.ko)
		order.WriteString(m.name + "\n")
	}
	cw.File("lib/modules/xvs-order", 0o644, []byte(order.String()))
	if err := cw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
