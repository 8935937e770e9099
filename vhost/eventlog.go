package vhost

import (
	"fmt"
	"strings"

	"github.com/xvswitch/xvswitch/virtionet"
	"github.com/xvswitch/xvswitch/virtq"
)

// An operator reads a device's life from its log: one line per event,
// with what was negotiated when it became ready and why it broke.

// logEvent writes the log line of an event. Called without d.mu held.
func (d *Device) logEvent(e Event) {
	if e.quiet {
		return
	}
	switch e.Kind {
	case EventConnected:
		if !d.churn.connected(e) {
			return
		}
		if e.session > 1 {
			d.log.Info("vhost front-end reconnected", "connection", e.session)
		} else {
			d.log.Info("vhost front-end connected")
		}
	case EventReady:
		if held := d.churn.ready(d.log); held != nil {
			d.log.Info("vhost front-end reconnected", "connection", held.session)
		}
		inf := d.Info()
		ring := "split"
		if inf.Packed {
			ring = "packed"
		}
		attrs := []any{"ring", ring, "features", featureNames(inf.Features)}
		if inf.MTU != 0 {
			attrs = append(attrs, "mtu", inf.MTU)
		}
		d.log.Info("vhost device ready", attrs...)
	case EventStopped:
		d.log.Info("vhost device stopped: queue pair 0 no longer runs")
	case EventBroken:
		if d.churn.ended(d.log, fmt.Sprint(e.Err)) {
			d.log.Warn("vhost device broken", "err", e.Err)
		}
	case EventGone:
		if e.Err != nil {
			if d.churn.ended(d.log, e.Err.Error()) {
				d.log.Warn("vhost front-end disconnected", "err", e.Err)
			}
		} else {
			d.churn.ended(d.log, "")
			d.log.Info("vhost front-end disconnected")
		}
	case EventRARP:
		d.log.Info("vhost guest announced its MAC (SEND_RARP)", "mac", e.MAC.String())
	default:
		d.log.Info("vhost device " + e.Kind.String())
	}
}

// logQueuePairs logs queue pairs other than 0 starting (the guest enabled
// them, as after `ethtool -L eth0 combined N`) and stopping, while the
// session lasts. Called with d.mu held.
func (d *Device) logQueuePairs(s *session) {
	if s.ending {
		return
	}
	if s.pairsUp == nil {
		s.pairsUp = make([]bool, len(d.queues)/2)
	}
	for p := 1; p < len(s.pairsUp); p++ {
		up := d.queues[2*p].ctl.act != nil && d.queues[2*p+1].ctl.act != nil
		if up == s.pairsUp[p] {
			continue
		}
		s.pairsUp[p] = up
		if up {
			d.log.Info("vhost queue pair enabled", "queue_pair", p)
		} else {
			d.log.Info("vhost queue pair disabled", "queue_pair", p)
		}
	}
}

// featureBits names the virtio feature bits a log line spells out; others
// show as bit numbers.
var featureBits = map[uint]string{
	virtq.FeatureIndirectDesc:  "indirect_desc",
	virtq.FeatureEventIdx:      "event_idx",
	virtq.FeatureVersion1:      "version_1",
	virtq.FeatureRingPacked:    "ring_packed",
	virtq.FeatureInOrder:       "in_order",
	FeatureProtocolFeatures:    "protocol_features",
	NetFeatureMTU:              "mtu",
	NetFeatureMAC:              "mac",
	NetFeatureMrgRxbuf:         "mrg_rxbuf",
	NetFeatureStatus:           "status",
	NetFeatureMQ:               "mq",
	NetFeatureGuestAnnounce:    "guest_announce",
	FeatureLogAll:              "log_all",
	virtionet.FeatureCsum:      "csum",
	virtionet.FeatureGuestCsum: "guest_csum",
	virtionet.FeatureGuestTSO4: "guest_tso4",
	virtionet.FeatureGuestTSO6: "guest_tso6",
	virtionet.FeatureHostTSO4:  "host_tso4",
	virtionet.FeatureHostTSO6:  "host_tso6",
}

// featureNames writes a feature word as its bits' names, low bits first.
func featureNames(f uint64) string {
	var names []string
	for bit := uint(0); bit < 64; bit++ {
		if f&(1<<bit) == 0 {
			continue
		}
		if n, ok := featureBits[bit]; ok {
			names = append(names, n)
		} else {
			names = append(names, fmt.Sprintf("bit%d", bit))
		}
	}
	return strings.Join(names, ",")
}
