package vswitch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Run adds the configured ports, starts the workers and serves the control
// socket until ctx ends; then it removes every port (rings stopped, XDP
// detached, pins and socket files removed) and stops the workers.
func (s *Switch) Run(ctx context.Context) error {
	s.startWorkers()
	defer s.stopWorkers()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.removeAll()
	for _, n := range s.cfg.NICs {
		if err := s.AddNIC(n); err != nil {
			return err
		}
	}
	for _, v := range s.cfg.Vhosts {
		if err := s.AddVhost(v); err != nil {
			return err
		}
	}
	for _, o := range s.cfg.Others {
		if err := s.AddPort(o.Name, o.Driver, 0); err != nil {
			return err
		}
	}
	go s.housekeep(ctx)
	slog.Info("xvswitch running", "ports", len(s.cfg.NICs)+len(s.cfg.Vhosts)+len(s.cfg.Others), "workers", len(s.workers), "ctl", s.cfg.Ctl)
	return s.ServeControl(ctx)
}

func (s *Switch) hasPort(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byName[name] != nil
}

// removeAll deletes every port, in reverse order of addition.
func (s *Switch) removeAll() {
	s.mu.Lock()
	var names []string
	for i := len(s.ports) - 1; i >= 0; i-- {
		if p := s.ports[i]; p != nil {
			names = append(names, p.name)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, n := range names {
		if err := s.DelPort(n); err != nil {
			errs = append(errs, fmt.Errorf("port %s: %w", n, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		slog.Warn("shutdown", "err", err)
	}
}
