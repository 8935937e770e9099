package qemu

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// This file gets the guest's kernel: the Debian linux-image-6.1.0-*-amd64
// package (from the cache, apt's archive, or apt-get download), and from it
// vmlinuz, the uncompressed vmlinux QEMU can boot directly, and the
// virtio-net modules.

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
