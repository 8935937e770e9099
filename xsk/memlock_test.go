package xsk

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/xvswitch/xvswitch/test/require"
	"golang.org/x/sys/unix"
)

// TestMemlockError: without CAP_IPC_LOCK and with a small RLIMIT_MEMLOCK,
// registering a UMEM fails with ErrMemlock and a message that says the size
// needed, the limit, and what to raise. Capabilities are per thread, so
// CAP_IPC_LOCK is dropped on a locked thread that is thrown away afterwards;
// the rlimit is per process and is restored.
func TestMemlockError(t *testing.T) {
	require.Root(t)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with its capability gone
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective &^= 1 << capIPCLock
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 1 << 20, Max: old.Max}); err != nil {
			errc <- err
			return
		}
		defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)
		u, err := NewUMEM(UMEMConfig{FrameSize: 4096, NumFrames: 1024}) // 4 MiB
		if err == nil {
			u.Close()
		}
		errc <- err
	}()
	err := <-errc
	if !errors.Is(err, ErrMemlock) {
		t.Fatalf("NewUMEM over the limit: %v, want ErrMemlock", err)
	}
	var me *MemlockError
	if !errors.As(err, &me) || me.Need != 4<<20 || me.Limit != 1<<20 || me.HasIPCLock {
		t.Fatalf("MemlockError %+v", me)
	}
	msg := err.Error()
	for _, want := range []string{"4096 KiB", "1024 KiB", "ulimit -l", "LimitMEMLOCK=", "CAP_IPC_LOCK"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message lacks %q: %s", want, msg)
		}
	}
	// With the capability back (this goroutine's thread), it works.
	u, err := NewUMEM(UMEMConfig{FrameSize: 4096, NumFrames: 1024})
	if err != nil {
		t.Fatalf("NewUMEM with CAP_IPC_LOCK: %v", err)
	}
	u.Close()
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []UMEMConfig{{FrameSize: 3000}, {FrameSize: 8192}, {FrameSize: 2048, Headroom: 2048 - 256}} {
		if _, err := NewUMEM(c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewUMEM(%+v): %v, want ErrConfig", c, err)
		}
	}
	mem, err := unix.Mmap(-1, 0, 3*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if _, err := NewUMEMFromMemory(mem[100:], UMEMConfig{}); !errors.Is(err, ErrConfig) {
		t.Errorf("unaligned caller memory: %v, want ErrConfig", err)
	}
	if _, err := NewUMEMFromMemory(mem[:4096+2048], UMEMConfig{FrameSize: 4096}); !errors.Is(err, ErrConfig) {
		t.Errorf("caller memory not a multiple of the frame: %v, want ErrConfig", err)
	}
}
