package qemu

import (
	"fmt"
	"time"
)

// GuestOutage is a command for a back-end that goes away and comes back
// during the run (a switch restart): it reports "XVS-READY name=<name>"
// (Guest.WaitReady: the host may take the back-end away now), then pings
// target from netns once every 0.2 s, at most 300 times, until one ping
// has failed (the outage) and after more were answered since (the
// recovery). OK means it saw both; its output is
// "tries=N fails=N after=N". The timeout defaults to 150 s.
func GuestOutage(name, netns, target string, after int) GuestCommand {
	script := fmt.Sprintf(`echo "XVS-READY name=%s uptime=$(cut -d' ' -f1 /proc/uptime)" >/dev/ttyS1
n=0; fails=0; after=0
while [ $n -lt 300 ]; do
  if ping -c 1 -W 1 %s >/dev/null 2>&1; then
    [ $fails -gt 0 ] && after=$((after+1))
    [ $after -ge %d ] && break
  else
    fails=$((fails+1))
  fi
  n=$((n+1)); sleep 0.2
done
echo "tries=$n fails=$fails after=$after"
[ $fails -gt 0 ] && [ $after -ge %d ]`, name, shq(target), after, after)
	c := GuestShell(name, netns, script)
	c.Timeout = 150 * time.Second
	return c
}
