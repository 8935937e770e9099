// Command build-guest builds (or reuses) the cached QEMU test guest: a
// Debian 6.1 kernel and a busybox initramfs with the virtio-net modules, in
// $XVS_GUEST_CACHE (default /var/cache/xvswitch/guest). `make guest` runs
// it so tests find the guest ready; tests build it themselves if needed.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/xvswitch/xvswitch/test/qemu"
)

func main() {
	dir := flag.String("cache", qemu.GuestCacheDir(), "cache directory (default: $"+qemu.GuestCacheEnv+" or "+qemu.DefaultGuestCache+")")
	flag.Parse()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...) }
	img, err := qemu.BuildGuestImage(*dir, logf)
	if err != nil {
		fmt.Fprintf(os.Stderr, "build-guest: %v\n", err)
		os.Exit(1)
	}
	logf("guest ready: kernel %s, %s, %s", img.KernelVersion, img.Kernel, img.Initrd)
}
