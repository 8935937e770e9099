package qemu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kernelArgs is the guest kernel's command line.
func kernelArgs(c *GuestConfig) []string {
	kargs := []string{
		"console=ttyS0", "panic=-1", "loglevel=4", "rdinit=/init", "edd=off",
		// Crypto self-tests: ~1 s of a TCG boot (kdf108 ignores notests).
		"cryptomgr.notests", "initcall_blacklist=crypto_kdf108_init",
		// The guest's clock must follow real time (command timeouts in the
		// guest are real seconds): under TCG on a loaded host the TSC
		// calibration can come out several times too low, and a trusted
		// TSC then ran a guest's clock 5x fast. HPET is QEMU's own clock.
		"clocksource=hpet",
		// Faster boot under TCG: nothing here needs these.
		"mitigations=off", "no_timer_check",
		"i8042.noaux", "i8042.nomux", "i8042.nopnp", "i8042.dumbkbd",
	}
	return append(kargs, c.KernelArgs...)
}

// memoryBackend is the guest's RAM as a QEMU -object: a memfd, shared
// (share=on) because a vhost-user back-end maps the guest's memory from
// its fd, on 2 MiB huge pages when the config asks.
func memoryBackend(c *GuestConfig, size string) string {
	s := fmt.Sprintf("memory-backend-memfd,id=mem,size=%s,share=on", size)
	if c.HugePages {
		s += ",hugetlb=on,hugetlbsize=2M"
	}
	return s
}

// KernelCmdline is the guest kernel's command line for cfg, as StartGuest
// and PrepareBoot give it.
func KernelCmdline(cfg GuestConfig) string { return strings.Join(kernelArgs(&cfg), " ") }

// CommandLine is QEMU's command line for cfg exactly as StartGuest builds
// it, booting kernel and initrd with the console and report serial ports
// written to those files. Documentation quotes it (docs/vms.md), and a
// test checks the quote; NICs without a MAC get a random one.
func CommandLine(cfg GuestConfig, kernel, initrd, console, reports string) []string {
	return qemuArgs(&cfg, guestMACs(cfg.NICs), kernel, initrd, console, reports)
}

// Boot is a guest made ready for a launcher other than StartGuest (libvirt,
// test/libvirt): the cached kernel, an initrd carrying the run's script,
// the kernel command line and the NICs' MAC addresses. The launcher gives
// the guest two serial ports writing to files, the kernel console (ttyS0)
// and the report port (ttyS1), and RAM a vhost-user back-end can map; the
// NICs are the launcher's, in cfg's order (the guest finds them by MAC).
// Run reads what the guest reported.
type Boot struct {
	Kernel, Initrd string
	Cmdline        string
	MACs           []string
	cfg            GuestConfig
}

// PrepareBoot builds the run's initrd for cfg into dir and returns the
// Boot. The guest image is built first if needed (EnsureGuest).
func PrepareBoot(t testing.TB, cfg GuestConfig, dir string) *Boot {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatalf("guest config: %v", err)
	}
	img := EnsureGuest(t)
	b := &Boot{Kernel: img.Kernel, Initrd: filepath.Join(dir, "initrd.img"),
		Cmdline: KernelCmdline(cfg), MACs: guestMACs(cfg.NICs), cfg: cfg}
	if err := writeRunInitrd(b.Initrd, img, guestScript(&cfg, b.MACs), cfg.Files); err != nil {
		t.Fatalf("guest initrd: %v", err)
	}
	return b
}

// Run parses what the guest wrote to its serial port files; took is how
// long the launcher ran it.
func (b *Boot) Run(console, reports string, took time.Duration) *GuestRun {
	rep, _ := os.ReadFile(reports)
	con, _ := os.ReadFile(console)
	r := parseReports(string(rep), b.cfg.Commands)
	r.Console, r.Reports, r.Duration = string(con), string(rep), took
	return r
}
