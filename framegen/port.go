package framegen

import (
	"errors"
	"fmt"
	"net"

	"github.com/xvswitch/xvswitch/ctl"
	"github.com/xvswitch/xvswitch/portspec"
	"github.com/xvswitch/xvswitch/vswitch"
)

// ErrBadGen means a generator spec cannot be built (a bad MAC or size).
var ErrBadGen = errors.New("framegen: bad generator")

// Port is a generator port: one ingress queue that always has a burst,
// one egress queue that swallows everything.
type Port struct {
	spec portspec.Gen
	q    *queue
}

// queue is both sides of the generator's single queue.
type queue struct {
	frame []byte
}

// New builds the generator spec describes.
func New(spec portspec.Gen) (*Port, error) {
	dst, err := net.ParseMAC(spec.Dst)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: dst: %v", ErrBadGen, spec.Name, err)
	}
	srcS := spec.Src
	if srcS == "" {
		srcS = portspec.GenDefaultSrc
	}
	src, err := net.ParseMAC(srcS)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: src: %v", ErrBadGen, spec.Name, err)
	}
	if spec.Size < portspec.GenMinFrame || spec.Size > portspec.GenMaxFrame {
		return nil, fmt.Errorf("%w: %s: size %d", ErrBadGen, spec.Name, spec.Size)
	}
	spec.Src = srcS
	return &Port{spec: spec, q: &queue{frame: Frame(dst, src, spec.Size)}}, nil
}

func (p *Port) IngressQueues() []vswitch.IngressQueue { return []vswitch.IngressQueue{p.q} }
func (p *Port) EgressQueues() []vswitch.EgressQueue   { return []vswitch.EgressQueue{p.q} }
func (p *Port) Fail(error)                            {}
func (p *Port) Close() error                          { return nil }

func (p *Port) Info() ctl.PortInfo {
	return ctl.PortInfo{Kind: "gen", State: "up", Queues: 1,
		Detail: fmt.Sprintf("benchmark generator size=%d dst=%s src=%s", p.spec.Size, p.spec.Dst, p.spec.Src)}
}

// Receive fills a whole burst with the generated frame.
func (q *queue) Receive(b *vswitch.Burst, _ *vswitch.Counts) (int, error) {
	for i := 0; i < vswitch.MaxBurst; i++ {
		b.SetOne(i, q.frame)
	}
	return vswitch.MaxBurst, nil
}

// Release has nothing to return: the frame is never consumed.
func (q *queue) Release(*vswitch.Burst) error { return nil }

// Waker: a generator always has frames, so its worker never sleeps.
func (q *queue) Waker() vswitch.Waker { return vswitch.Waker{FD: -1} }

// Transmit counts the frames as sent and discards them.
func (q *queue) Transmit(b *vswitch.Burst, m vswitch.Mask, c *vswitch.Counts) {
	for rest := m; rest != 0; rest &= rest - 1 {
		c.Frame(b.Frame(rest.Lowest()).Len())
	}
}
