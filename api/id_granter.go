package api

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/idmsg"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/flake"
)

// granter is this server's own holders' way to grants (service mode). On
// group 0's leader it applies the op through group 0 itself, as
// AcquireWorker's handler does there, so the grant decision stays on the
// leader and a grant never passes through this server's own handlers,
// messages or Connect errors. On any other server it asks group 0's leader
// over IdService, once (forwardOnce), as an embedded generator does.
type granter struct{ s *Server }

func (g granter) Acquire(ctx context.Context, namespace, holder, label string) (flake.Grant, error) {
	op, err := g.s.acquireOp(namespace, holder, label)
	if err != nil {
		return flake.Grant{}, err
	}
	return g.decide(ctx, op, func(ctx context.Context, p *peer, h http.Header) (*seqv1.WorkerGrant, error) {
		return answer(p.id.AcquireWorker(ctx, withHeader(&seqv1.AcquireWorkerRequest{Namespace: namespace, Holder: holder, Label: label}, h)))
	})
}

func (g granter) Renew(ctx context.Context, gr flake.Grant, holder string) (flake.Grant, error) {
	op, err := g.s.renewOp(gr.Namespace, holder, gr.Worker, gr.Token)
	if err != nil {
		return flake.Grant{}, err
	}
	return g.decide(ctx, op, func(ctx context.Context, p *peer, h http.Header) (*seqv1.WorkerGrant, error) {
		return answer(p.id.RenewWorker(ctx, withHeader(&seqv1.RenewWorkerRequest{Namespace: gr.Namespace, Worker: uint32(gr.Worker), Token: gr.Token, Holder: holder}, h)))
	})
}

func (g granter) Release(ctx context.Context, gr flake.Grant, holder string) error {
	op, err := releaseOp(gr.Namespace, holder, gr.Worker, gr.Token)
	if err != nil {
		return err
	}
	_, err = g.decide(ctx, op, func(ctx context.Context, p *peer, h http.Header) (*seqv1.WorkerGrant, error) {
		_, err := p.id.ReleaseWorker(ctx, withHeader(&seqv1.ReleaseWorkerRequest{Namespace: gr.Namespace, Worker: uint32(gr.Worker), Token: gr.Token, Holder: holder}, h))
		return &seqv1.WorkerGrant{}, err
	})
	return err
}

// decide applies op on group 0's leader when this server leads it, and
// otherwise sends ask to the leader; a follower's answer is read back into
// the grant (and its Connect codes into the errors a holder acts on).
func (g granter) decide(ctx context.Context, op cluster.FlakeOp, ask func(context.Context, *peer, http.Header) (*seqv1.WorkerGrant, error)) (flake.Grant, error) {
	if g.s.node.Group(0).IsLeader() {
		return g.s.applyGrant(ctx, op)
	}
	var m *seqv1.WorkerGrant
	_, err := g.s.forwardOnce(ctx, http.Header{}, 0, forwardTimeout, func(ctx context.Context, p *peer, h http.Header) error {
		var err error
		m, err = ask(ctx, p, h)
		return err
	})
	if err != nil {
		return flake.Grant{}, idmsg.HolderError(err)
	}
	return idmsg.Grant(m), nil
}

// withHeader is a request of m with the header h (forwardOnce's).
func withHeader[T any](m *T, h http.Header) *connect.Request[T] {
	r := connect.NewRequest(m)
	copyHeader(r.Header(), h)
	return r
}

// answer is a response's message, or its error.
func answer[T any](r *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}
