package vswitch

import (
	"context"
	"errors"
	"fmt"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
)

// ErrUnknownOp means a control request named no operation the switch has.
var ErrUnknownOp = errors.New("vswitch: unknown control operation")

// ServeControl answers the CLI on the configured control socket until ctx
// ends.
func (s *Switch) ServeControl(ctx context.Context) error {
	return ctl.ServeWith(ctx, s.cfg.Ctl, s.Handle, ctl.Options{Mode: s.cfg.CtlMode, GID: s.cfg.CtlGID, Ready: s.cfg.Ready})
}

// Handle answers one control request. Port specs of add-port are parsed
// here, with the same parser as the command line.
func (s *Switch) Handle(req ctl.Request) ctl.Response {
	var resp ctl.Response
	var err error
	switch req.Op {
	case ctl.OpShowPorts:
		resp.Ports = s.Ports()
	case ctl.OpShowFDB:
		resp.FDB = s.FDB()
	case ctl.OpShowStats:
		resp.Stats = s.Stats()
	case ctl.OpShowWorkers:
		resp.Workers = s.Workers()
	case ctl.OpClearStats:
		s.ClearStats()
	case ctl.OpAddPort:
		err = s.addPortSpec(req)
	case ctl.OpDelPort:
		err = s.DelPort(req.Name)
	case ctl.OpCapture:
		resp, err = s.captureRequest(req)
	default:
		err = fmt.Errorf("%w %q", ErrUnknownOp, req.Op)
	}
	if err != nil {
		resp.Error = err.Error()
	}
	return resp
}

// addPortSpec adds the one port an add-port request names.
func (s *Switch) addPortSpec(req ctl.Request) error {
	switch {
	case req.NIC != "" && req.Vhost == "":
		n, err := portspec.ParseNIC(req.NIC)
		if err != nil {
			return err
		}
		return s.AddNIC(n)
	case req.Vhost != "" && req.NIC == "":
		v, err := portspec.ParseVhost(req.Vhost)
		if err != nil {
			return err
		}
		return s.AddVhost(v)
	}
	return fmt.Errorf("%w: add-port needs exactly one of --nic or --vhost", portspec.ErrBadSpec)
}
