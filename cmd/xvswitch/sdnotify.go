package main

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// sdNotify tells the service manager the daemon's state ("READY=1",
// "STOPPING=1"), as sd_notify(3) does: one datagram to the unix socket
// $NOTIFY_SOCKET names, a path or, starting with @, an abstract name
// (which Go's net package takes as written). Without $NOTIFY_SOCKET (not
// started by systemd with Type=notify) it does nothing. The variable is
// left set: the daemon runs no children that should inherit a duty to
// notify.
func sdNotify(state string) error {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	if !strings.HasPrefix(name, "/") && !strings.HasPrefix(name, "@") {
		return fmt.Errorf("NOTIFY_SOCKET=%q: want a socket path or @abstract name", name)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	return nil
}
