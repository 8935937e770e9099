package test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
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
		SkipOrFail(t, err.Error())
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

var kernelDebRE = regexp.MustCompile(`^linux-image-(6\.1\.0-\d+-amd64)_[^/]*_amd64\.deb$`)

// kernelDeb returns a linux-image-6.1.0-*-amd64 .deb: one already in the
// cache or in apt's archive, or else the one linux-image-amd64 depends on,
// fetched with apt-get download into the cache.
func kernelDeb(cacheDir, tmp string, logf func(string, ...any)) (string, error) {
	for _, d := range []string{cacheDir, "/var/cache/apt/archives"} {
		if p := newestDeb(d); p != "" {
			logf("guest: using %s", p)
			return p, nil
		}
	}
	for _, c := range []string{"apt-get", "apt-cache"} {
		if _, err := exec.LookPath(c); err != nil {
			return "", fmt.Errorf("%w: %s not on PATH and no kernel .deb in %s", ErrGuestPrereq, c, cacheDir)
		}
	}
	pkg, err := kernelPackage()
	if err != nil {
		return "", err
	}
	dl := filepath.Join(tmp, "dl")
	if err := os.Mkdir(dl, 0o755); err != nil {
		return "", err
	}
	download := func() ([]byte, error) {
		logf("guest: apt-get download %s (into %s)", pkg, cacheDir)
		cmd := exec.Command("apt-get", "download", "-q", pkg)
		cmd.Dir = dl
		return cmd.CombinedOutput()
	}
	out, err := download()
	if err != nil {
		// A stale index names versions the mirror no longer has.
		logf("guest: download failed (%v); apt-get update and retry", err)
		if uout, uerr := exec.Command("apt-get", "update", "-q").CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("apt-get update: %v\n%s", uerr, uout)
		}
		if pkg, err = kernelPackage(); err != nil {
			return "", err
		}
		if out, err = download(); err != nil {
			return "", fmt.Errorf("apt-get download %s: %v\n%s", pkg, err, out)
		}
	}
	p := newestDeb(dl)
	if p == "" {
		return "", fmt.Errorf("apt-get download %s left no .deb in %s:\n%s", pkg, dl, out)
	}
	final := filepath.Join(cacheDir, filepath.Base(p))
	if err := os.Rename(p, final); err != nil {
		return "", err
	}
	_ = os.Remove(dl)
	return final, nil
}

// newestDeb returns the kernel .deb in dir with the highest ABI number.
func newestDeb(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var best string
	var bestABI int
	for _, e := range ents {
		m := kernelDebRE.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		var abi int
		fmt.Sscanf(strings.TrimPrefix(m[1], "6.1.0-"), "%d", &abi)
		if best == "" || abi > bestABI {
			best, bestABI = filepath.Join(dir, e.Name()), abi
		}
	}
	return best
}

var kernelPkgRE = regexp.MustCompile(`linux-image-6\.1\.0-(\d+)-amd64\b`)

// kernelPackage names the current 6.1 kernel package: what
// linux-image-amd64 depends on, else the highest ABI apt-cache knows.
func kernelPackage() (string, error) {
	out, err := exec.Command("apt-cache", "depends", "linux-image-amd64").Output()
	if err == nil {
		if m := kernelPkgRE.FindString(string(out)); m != "" {
			return m, nil
		}
	}
	out, err = exec.Command("apt-cache", "search", "--names-only", `^linux-image-6\.1\.0-[0-9]+-amd64$`).Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache search: %v", err)
	}
	best, bestABI := "", -1
	for _, m := range kernelPkgRE.FindAllStringSubmatch(string(out), -1) {
		var abi int
		fmt.Sscanf(m[1], "%d", &abi)
		if abi > bestABI {
			best, bestABI = m[0], abi
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: apt knows no linux-image-6.1.0-*-amd64 (apt-get update?)", ErrGuestPrereq)
	}
	return best, nil
}

type guestModule struct {
	name string
	ko   []byte
}

func moduleNames(ms []guestModule) []string {
	n := make([]string, len(ms))
	for i, m := range ms {
		n[i] = m.name
	}
	return n
}

// extractKernel streams the .deb's data archive (dpkg-deb --fsys-tarfile)
// and keeps only vmlinuz and the modules: dpkg -x would write ~400 MB.
func extractKernel(deb, vmlinuz string) (kver string, mods []guestModule, err error) {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	defer func() {
		_ = pipe.Close()
		if werr := cmd.Wait(); werr != nil && err == nil {
			err = fmt.Errorf("dpkg-deb --fsys-tarfile %s: %v\n%s", deb, werr, stderr.String())
		}
	}()
	want := map[string]bool{}
	for _, m := range guestModules {
		want[m] = true
	}
	found := map[string][]byte{}
	tr := tar.NewReader(pipe)
	for {
		h, terr := tr.Next()
		if terr == io.EOF {
			break
		}
		if terr != nil {
			return "", nil, fmt.Errorf("read %s: %w", deb, terr)
		}
		name := strings.TrimPrefix(h.Name, "./")
		base := filepath.Base(name)
		switch {
		case strings.HasPrefix(name, "boot/vmlinuz-"):
			kver = strings.TrimPrefix(base, "vmlinuz-")
			if err := writeFileFrom(vmlinuz, tr); err != nil {
				return "", nil, err
			}
		case strings.HasPrefix(name, "lib/modules/") && strings.Contains(base, ".ko"):
			mod, ext, _ := strings.Cut(base, ".ko")
			if !want[mod] {
				continue
			}
			ko, derr := decompressModule(tr, ext)
			if derr != nil {
				return "", nil, fmt.Errorf("module %s: %w", base, derr)
			}
			found[mod] = ko
		}
	}
	if kver == "" {
		return "", nil, fmt.Errorf("%s has no boot/vmlinuz-*", deb)
	}
	for _, m := range guestModules {
		if ko, ok := found[m]; ok {
			mods = append(mods, guestModule{m, ko})
		}
	}
	if len(mods) == 0 || mods[len(mods)-1].name != "virtio_net" {
		return "", nil, fmt.Errorf("%s has no virtio_net module", deb)
	}
	return kver, mods, nil
}

func writeFileFrom(path string, r io.Reader) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// decompressModule returns the .ko; ext is what follows ".ko" in the file
// name. Debian's 6.1 ships them uncompressed; later kernels use xz or zstd.
func decompressModule(r io.Reader, ext string) ([]byte, error) {
	var tool string
	switch ext {
	case "":
		return io.ReadAll(r)
	case ".xz":
		tool = "xz"
	case ".zst":
		tool = "zstd"
	default:
		return nil, fmt.Errorf("unknown module compression %q", ext)
	}
	if _, err := exec.LookPath(tool); err != nil {
		return nil, fmt.Errorf("%w: %s (to decompress kernel modules)", ErrGuestPrereq, tool)
	}
	cmd := exec.Command(tool, "-dc")
	cmd.Stdin = r
	return cmd.Output()
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

// extractVmlinux writes the uncompressed kernel inside a bzImage, if it is
// xz-compressed (Debian's is) and has a PVH entry note. QEMU boots such an
// ELF directly (-kernel vmlinux), skipping the real-mode setup and the
// decompressor, which under TCG takes ~8 s of a ~13 s boot.
func extractVmlinux(bzImage, out string) error {
	data, err := os.ReadFile(bzImage)
	if err != nil {
		return err
	}
	i := bytes.Index(data, []byte("\xfd7zXZ\x00"))
	if i < 0 {
		return errors.New("no xz payload in the bzImage")
	}
	if _, err := exec.LookPath("xz"); err != nil {
		return errors.New("xz not on PATH (apt-get install xz-utils)")
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	// --single-stream: the payload is followed by the bzImage's trailer.
	cmd := exec.Command("xz", "-dc", "--single-stream")
	cmd.Stdin = bytes.NewReader(data[i:])
	cmd.Stdout = f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		os.Remove(out)
		return fmt.Errorf("xz: %v %s", err, stderr.Bytes())
	}
	if err := hasPVHNote(out); err != nil {
		os.Remove(out)
		return err
	}
	return nil
}

// hasPVHNote checks for XEN_ELFNOTE_PHYS32_ENTRY (type 18), which QEMU
// needs to boot an ELF kernel on x86.
func hasPVHNote(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("vmlinux: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return err
		}
		for len(b) >= 12 {
			nsz := int(f.ByteOrder.Uint32(b[0:]))
			dsz := int(f.ByteOrder.Uint32(b[4:]))
			typ := f.ByteOrder.Uint32(b[8:])
			name := b[12:min(len(b), 12+nsz)]
			if typ == 18 && bytes.HasPrefix(name, []byte("Xen")) {
				return nil
			}
			next := 12 + (nsz+3)&^3 + (dsz+3)&^3
			if next > len(b) {
				break
			}
			b = b[next:]
		}
	}
	return errors.New("vmlinux has no PVH entry note (CONFIG_PVH)")
}
