package bpf

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// BPFFS is where the BPF filesystem is (or gets) mounted.
const BPFFS = "/sys/fs/bpf"

// PinRoot holds one directory per attached interface, named after it, with
// the pins of that interface's program ("xvs_steer"), maps ("xsks",
// "macs", "config", "counters", "host_v4", "host_v6", "queue_owners") and
// XDP link
// ("link").
const PinRoot = BPFFS + "/xvswitch"

// Names of the pins in an interface's directory.
const (
	pinLink = "link"
	pinProg = "xvs_steer"
)

// mountMu serializes this process's check-then-mount of bpffs.
var mountMu sync.Mutex

// ensureBPFFS mounts the BPF filesystem at BPFFS unless it is there already
// (minimal images and fresh containers often lack it). PinRoot on bpffs is
// enough: a service may see only its own directory of the host's bpffs,
// bound into a private mount namespace over an empty BPFFS (the example
// systemd unit's TemporaryFileSystem= and BindPaths=), and mounting there
// would need CAP_SYS_ADMIN for nothing.
func ensureBPFFS(log *slog.Logger) error {
	mountMu.Lock()
	defer mountMu.Unlock()
	if isBPFFS(BPFFS) || isBPFFS(PinRoot) {
		return nil
	}
	if err := os.MkdirAll(BPFFS, 0o700); err != nil {
		return fmt.Errorf("%w: create %s: %v", ErrPin, BPFFS, err)
	}
	if err := unix.Mount("bpf", BPFFS, "bpf", 0, "mode=0700"); err != nil {
		// Another process may have mounted it meanwhile.
		if isBPFFS(BPFFS) {
			return nil
		}
		return fmt.Errorf("%w: mount bpffs at %s: %v", ErrPin, BPFFS, err)
	}
	log.Info("bpf: mounted bpffs", "path", BPFFS)
	return nil
}

func isBPFFS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.BPF_FS_MAGIC
}

// lockPinDir creates dir and takes an exclusive, non-blocking flock on it.
// The lock is what tells a live owner from a crashed one: the kernel drops
// a dead process's flocks, so pins found under a lock we could take are
// stale. Locks conflict between open files even within one process, so a
// second Attach to the same interface here fails too.
func lockPinDir(dir string) (int, error) {
	for range 3 {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return -1, fmt.Errorf("%w: create %s: %v", ErrPin, dir, err)
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed by a closing owner between mkdir and open
			}
			return -1, fmt.Errorf("%w: open %s: %v", ErrPin, dir, err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			if errors.Is(err, unix.EWOULDBLOCK) {
				return -1, fmt.Errorf("%w: %s is locked by a running xvswitch", ErrBusy, dir)
			}
			return -1, fmt.Errorf("%w: lock %s: %v", ErrPin, dir, err)
		}
		// The owner we waited out may have removed the directory after we
		// opened it: a lock on a deleted directory guards nothing.
		if sameFile(fd, dir) {
			return fd, nil
		}
		unix.Close(fd)
	}
	return -1, fmt.Errorf("%w: %s keeps disappearing", ErrPin, dir)
}

func sameFile(fd int, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(fd, &a) != nil || unix.Stat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// removeStale detaches and unpins what a crashed run left in dir (the
// caller holds dir's lock, so no live process owns it) and logs it.
func removeStale(dir, ifname string, log *slog.Logger) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%w: read %s: %v", ErrPin, dir, err)
	}
	if len(ents) == 0 {
		return nil
	}
	attrs := []any{"ifname", ifname, "dir", dir}
	lp := filepath.Join(dir, pinLink)
	if l, err := link.LoadPinnedLink(lp, nil); err == nil {
		if info, err := l.Info(); err == nil {
			attrs = append(attrs, "link_id", info.ID, "prog_id", info.Program)
		}
		// Detach, not just unpin: another holder of the link (a leftover
		// fd in some tool) must not keep the dead run's program attached.
		if err := l.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
			attrs = append(attrs, "detach_err", err.Error())
		}
		_ = l.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		attrs = append(attrs, "link_err", err.Error())
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("%w: remove stale pin %s: %v", ErrPin, e.Name(), err)
		}
	}
	log.Warn("bpf: replaced stale pins of a crashed run", append(attrs, "pins", names)...)
	return nil
}
