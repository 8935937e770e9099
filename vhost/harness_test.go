package vhost_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/xvswitch/xvswitch/vhost"
)

// The device side of the unit tests: a socketless device whose events are
// recorded. The front-end side is package vhosttest.

// newDevice opens a socketless device whose events the test records.
func newDevice(t testing.TB, cfg vhost.Config) (*vhost.Device, *[]vhost.Event, *sync.Mutex) {
	t.Helper()
	var mu sync.Mutex
	evs := &[]vhost.Event{}
	user := cfg.OnEvent
	cfg.OnEvent = func(e vhost.Event) {
		mu.Lock()
		*evs = append(*evs, e)
		mu.Unlock()
		if user != nil {
			user(e)
		}
	}
	if cfg.Name == "" {
		cfg.Name = t.Name()
	}
	if cfg.Logger == nil && !testing.Verbose() {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d, err := vhost.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, evs, &mu
}

func hasEvent(mu *sync.Mutex, evs *[]vhost.Event, k vhost.EventKind) bool {
	mu.Lock()
	defer mu.Unlock()
	for _, e := range *evs {
		if e.Kind == k {
			return true
		}
	}
	return false
}
