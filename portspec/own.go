package portspec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Own is a vhost port's own= option, `own=IFNAME:Q[+Q...]`: the NIC
// queues the VM owns. The NIC port binds no socket of its own to them;
// the VM's socket there is the only one, so frames on those queues are
// received into (and sent from) the VM's memory (docs/zerocopy.md).
// queues= already names the device's queue pairs, hence another word.
type Own struct {
	Ifname string `json:"ifname"`
	Queues []int  `json:"queues"` // ascending, no duplicates
}

// String is the option's value as it is written: "eth1:1+2".
func (o Own) String() string {
	qs := make([]string, len(o.Queues))
	for i, q := range o.Queues {
		qs[i] = strconv.Itoa(q)
	}
	return o.Ifname + ":" + strings.Join(qs, "+")
}

// Owns reports whether queue q of ifname is among o's.
func (o Own) Owns(ifname string, q int) bool {
	if o.Ifname != ifname {
		return false
	}
	for _, x := range o.Queues {
		if x == q {
			return true
		}
	}
	return false
}

// maxOwnedQueue bounds a queue number: no NIC has more queues than
// this, and the XDP program's maps are sized for it (bpf.MaxQueues).
const maxOwnedQueue = 255

// ParseOwn parses the value of own=.
func ParseOwn(s string) (Own, error) {
	ifname, list, ok := strings.Cut(s, ":")
	if !ok || ifname == "" || list == "" {
		return Own{}, fmt.Errorf("%w: own=%q: want IFNAME:Q[+Q...], e.g. own=eth1:1+2", ErrBadSpec, s)
	}
	if len(ifname) > 15 {
		return Own{}, fmt.Errorf("%w: own=%q: interface name longer than 15 characters", ErrBadSpec, s)
	}
	o := Own{Ifname: ifname}
	seen := map[int]bool{}
	for _, f := range strings.Split(list, "+") {
		q, err := strconv.Atoi(f)
		if err != nil || q < 0 || q > maxOwnedQueue {
			return Own{}, fmt.Errorf("%w: own=%q: queue %q: want 0..%d", ErrBadSpec, s, f, maxOwnedQueue)
		}
		if seen[q] {
			return Own{}, fmt.Errorf("%w: own=%q: queue %d given twice", ErrBadSpec, s, q)
		}
		seen[q] = true
		o.Queues = append(o.Queues, q)
	}
	sort.Ints(o.Queues)
	return o, nil
}
