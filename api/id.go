package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/api/idmsg"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/flake/holder"
)

// The grants this server hands out (service mode and embedded generators
// alike): a holder renews every third of the lease, and a range reaches
// rangeLeases leases past the leader's time, so that a holder keeps
// issuing through a leader failover for that long.
const (
	grantLease    = 10 * time.Second
	rangeLeases   = 3
	maxIDsPerCall = 10000
	// DefaultNamespace is the namespace of NextIds calls that name none.
	DefaultNamespace = "default"
)

var errBadIDCount = fmt.Errorf("%w: count must be 1 to %d (0 or absent: 1)", seqd.ErrInvalidArgument, maxIDsPerCall)

// ids is the service-mode state: one holder per namespace this server
// issues ids of, and the obfuscators of obfuscated namespaces.
type ids struct {
	secret []byte

	mu      sync.Mutex
	holders map[string]*holder.Holder
	obf     map[string]*flake.Obfuscator
	closed  bool
}

// WithClusterSecret sets the secret obfuscation keys derive from (see
// flake.DeriveKey); without it, obfuscated namespaces are refused.
func WithClusterSecret(secret []byte) Option {
	return func(s *Server) { s.ids.secret = secret }
}

func nsName(name string) (string, error) {
	if name == "" {
		return DefaultNamespace, nil
	}
	if !seqd.ValidName(name) {
		return "", fmt.Errorf("%w: namespace %q", seqd.ErrInvalidNamespace, name)
	}
	return name, nil
}

// NextIds implements IdService.NextIds: this server answers from its own
// worker, without a hop to the leader; as runs of consecutive ids when the
// request asks for them and the namespace is not obfuscated.
func (s *Server) NextIds(ctx context.Context, req *connect.Request[seqv1.NextIdsRequest]) (*connect.Response[seqv1.NextIdsResponse], error) {
	out, err := s.nextIDs(ctx, req.Msg.GetNamespace(), req.Msg.GetCount(), req.Msg.GetShard(), req.Msg.GetRuns())
	err = s.toConnect(err)
	s.logCall(seqv1connect.IdServiceNextIdsProcedure, err)
	if err != nil {
		return nil, err
	}
	resp := connect.NewResponse(out)
	s.setAnswerHeaders(resp.Header())
	return resp, nil
}

func (s *Server) nextIDs(ctx context.Context, namespace string, count uint32, shard uint64, asRuns bool) (*seqv1.NextIdsResponse, error) {
	if count == 0 {
		count = 1 // proto3 cannot tell an absent count from 0: both ask for one id
	}
	if count > maxIDsPerCall {
		return nil, errBadIDCount
	}
	name, err := nsName(namespace)
	if err != nil {
		return nil, err
	}
	h, obf, err := s.holder(ctx, name)
	if err != nil {
		return nil, err
	}
	if asRuns && obf == nil && h.Layout().Consecutive() {
		runs, err := h.NextShardRuns(ctx, int(count), shard)
		if err != nil {
			return nil, err
		}
		return &seqv1.NextIdsResponse{Runs: idmsg.RunsMsg(runs)}, nil
	}
	ids, err := h.NextShard(ctx, int(count), shard)
	if err != nil {
		return nil, err
	}
	if obf != nil {
		for i, id := range ids {
			ids[i] = obf.Encode(id)
		}
	}
	return &seqv1.NextIdsResponse{Ids: ids}, nil
}

// holder returns the namespace's holder, creating it on first use once the
// namespace is known (here, or else at the leader).
func (s *Server) holder(ctx context.Context, name string) (*holder.Holder, *flake.Obfuscator, error) {
	s.ids.mu.Lock()
	h, ok := s.ids.holders[name]
	obf := s.ids.obf[name]
	closed := s.ids.closed
	s.ids.mu.Unlock()
	switch {
	case closed:
		return nil, nil, holder.ErrClosed
	case ok && s.node.NamespaceDeleted(name):
		// Deleted since this holder was made (its grants are fenced).
		s.dropHolder(ctx, name)
		return nil, nil, fmt.Errorf("%w: %q", seqd.ErrUnknownNamespace, name)
	case ok:
		return h, obf, nil
	}
	ns, err := s.namespace(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if ns.Obfuscation != flake.ObfuscateNone {
		if obf, err = s.obfuscator(ns); err != nil {
			return nil, nil, err
		}
	}
	s.ids.mu.Lock()
	defer s.ids.mu.Unlock()
	if s.ids.closed {
		return nil, nil, holder.ErrClosed
	}
	if h, ok := s.ids.holders[name]; ok {
		return h, s.ids.obf[name], nil
	}
	if s.ids.holders == nil {
		s.ids.holders, s.ids.obf = map[string]*holder.Holder{}, map[string]*flake.Obfuscator{}
	}
	h = holder.New(holder.Config{Granter: granter{s}, Namespace: name, Label: s.node.ID(), Logger: s.log,
		Workers: serviceWorkers(ns.Layout), Layout: ns.Layout})
	s.ids.holders[name], s.ids.obf[name] = h, obf
	return h, obf, nil
}

// serviceWorkers is how many workers a node may hold for a namespace: more
// than one only when calls ask for more ids than one worker's rate (the
// holder acquires another when every worker it holds is at its lead), and
// at most a 64th of the layout's workers, up to 8, so that the nodes of a
// cluster never take a small layout's workers from each other.
func serviceWorkers(l flake.Layout) int {
	return min(8, max(1, int(l.Workers()/64)))
}

// obfuscator derives the namespace's permutation from the cluster secret,
// refusing a secret other than the one the namespace was created with.
func (s *Server) obfuscator(ns flake.Namespace) (*flake.Obfuscator, error) {
	if len(s.ids.secret) == 0 {
		return nil, fmt.Errorf("%w: this server has no cluster secret", flake.ErrNoSecret)
	}
	key, check, err := flake.DeriveKey(s.ids.secret, ns.Name)
	if err != nil {
		return nil, err
	}
	if check != ns.KeyCheck {
		return nil, fmt.Errorf("%w: this server's secret is not the one %q was created with", flake.ErrNoSecret, ns.Name)
	}
	return flake.NewObfuscator(ns.Layout, ns.Obfuscation, key)
}

// namespace reads a namespace from this server's state, or from the
// leader's when this one has not applied its creation yet.
func (s *Server) namespace(ctx context.Context, name string) (flake.Namespace, error) {
	if ns, ok := s.node.Namespace(name); ok {
		return ns, nil
	}
	resp, err := routeInner(s, ctx, connect.NewRequest(&seqv1.ListNamespacesRequest{}),
		func(context.Context) (*seqv1.ListNamespacesResponse, error) {
			// The leader's own state was read above. It is the cluster's
			// only while the leader holds its lease: a leader deposed but
			// not yet stepped down (or one still waiting out its
			// predecessor's lease) may lack a namespace created since.
			if !s.node.Group(0).Allocator().Serving() {
				return nil, fmt.Errorf("%w: namespace %q is not in the state of a leader that does not hold its lease", seqd.ErrNotServing, name)
			}
			return &seqv1.ListNamespacesResponse{}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.ListNamespacesRequest]) (*connect.Response[seqv1.ListNamespacesResponse], error) {
			return p.admin.ListNamespaces(ctx, r)
		})
	if err != nil {
		return flake.Namespace{}, err
	}
	for _, m := range resp.Msg.GetNamespaces() {
		if m.GetName() == name {
			return idmsg.Namespace(m), nil
		}
	}
	if name == DefaultNamespace {
		// The default namespace exists from its first use, with the
		// default layout, as the default space does.
		cr, err := s.CreateNamespace(ctx, connect.NewRequest(&seqv1.CreateNamespaceRequest{Name: DefaultNamespace}))
		if err != nil {
			return flake.Namespace{}, err
		}
		return idmsg.Namespace(cr.Msg.GetNamespace()), nil
	}
	return flake.Namespace{}, fmt.Errorf("%w: %q", seqd.ErrUnknownNamespace, name)
}

// dropHolder stops this server's holder of a deleted namespace (its
// grants are fenced already); a namespace created again gets a new one.
func (s *Server) dropHolder(ctx context.Context, name string) {
	s.ids.mu.Lock()
	h := s.ids.holders[name]
	delete(s.ids.holders, name)
	delete(s.ids.obf, name)
	s.ids.mu.Unlock()
	if h != nil {
		_ = h.Close(ctx)
	}
}

// Close closes NextStream's framed connections (frames.go) and this
// server's forward streams (fwdstream.go), releases the
// workers this server holds (best effort, within ctx) and stops issuing
// ids.
func (s *Server) Close(ctx context.Context) error {
	s.frames.close()
	s.closeForwards()
	s.ids.mu.Lock()
	s.ids.closed = true
	hs := s.ids.holders
	s.ids.holders = nil
	s.ids.mu.Unlock()
	var errs error
	for _, h := range hs {
		errs = errors.Join(errs, h.Close(ctx))
	}
	return errs
}

// Decode implements IdService.Decode. Ids of an obfuscated namespace
// decode only for callers with the admin token.
func (s *Server) Decode(ctx context.Context, req *connect.Request[seqv1.DecodeRequest]) (*connect.Response[seqv1.DecodeResponse], error) {
	out, err := s.decode(ctx, req)
	err = s.toConnect(err)
	s.logCall(seqv1connect.IdServiceDecodeProcedure, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (s *Server) decode(ctx context.Context, req *connect.Request[seqv1.DecodeRequest]) (*seqv1.DecodeResponse, error) {
	name, err := nsName(req.Msg.GetNamespace())
	if err != nil {
		return nil, err
	}
	ns, err := s.namespace(ctx, name)
	if err != nil {
		return nil, err
	}
	id := req.Msg.GetId()
	if ns.Obfuscation != flake.ObfuscateNone {
		if s.token != "" {
			if err := s.checkToken(req.Header().Get("Authorization")); err != nil {
				return nil, err
			}
		}
		obf, err := s.obfuscator(ns)
		if err != nil {
			return nil, err
		}
		if id, err = obf.Decode(id); err != nil {
			return nil, err
		}
	}
	d, err := ns.Layout.Decode(id)
	if err != nil {
		return nil, err
	}
	out := &seqv1.DecodeResponse{UnixMs: d.UnixMs, Worker: uint32(d.Worker), Sequence: uint32(d.Sequence), Shard: d.Shard, Cluster: d.Cluster}
	granted, hwm := false, uint64(0)
	if ws, ok := s.node.Workers(name); ok {
		for _, w := range ws {
			if w.ID != d.Worker {
				continue
			}
			granted, hwm = true, w.HWM
			for _, u := range w.History {
				if u.Lo < d.Unit && d.Unit <= u.Hi {
					out.HolderLabel = u.Label
				}
			}
		}
	}
	out.Warning = decodeWarning(d, granted, hwm, s.node.WallMs())
	return out, nil
}

// decodeWarning says why no holder of this cluster can have issued an id
// decoded as d, or "" when one may have. Every id is issued inside a time
// range granted to its worker, and hwm is the highest unit ever granted to
// the worker (granted is false for a worker never used): a unit above it
// was never granted. nowMs is the server's clock, to say "in the future"
// when that is why.
func decodeWarning(d flake.ID, granted bool, hwm uint64, nowMs int64) string {
	const hint = "a typo, an id of another namespace, or of the cluster this one was restored from?"
	switch {
	case !granted:
		return fmt.Sprintf("worker %d has never been granted in this namespace, so no holder of this cluster issued this id: %s", d.Worker, hint)
	case d.Unit <= hwm:
		return ""
	case d.UnixMs > nowMs:
		return fmt.Sprintf("its time %s is in the future (the server's clock reads %s), past every time range granted to worker %d: %s",
			seqd.Date(d.UnixMs), seqd.Date(nowMs), d.Worker, hint)
	}
	return fmt.Sprintf("worker %d was never granted time %s, so no holder of this cluster issued this id: %s", d.Worker, seqd.Date(d.UnixMs), hint)
}

// GetLayout implements IdService.GetLayout.
func (s *Server) GetLayout(ctx context.Context, req *connect.Request[seqv1.GetLayoutRequest]) (*connect.Response[seqv1.GetLayoutResponse], error) {
	name, err := nsName(req.Msg.GetNamespace())
	var ns flake.Namespace
	if err == nil {
		ns, err = s.namespace(ctx, name)
	}
	err = s.toConnect(err)
	s.logCall(seqv1connect.IdServiceGetLayoutProcedure, err)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(idmsg.LayoutMsg(ns.Layout, ns.Obfuscation)), nil
}

// FlakeStat describes this server's holder of one namespace, for metrics.
type FlakeStat struct {
	Namespace string
	holder.Stats
	// Capacity is the layout's number of workers; LifetimeRemaining the
	// time until the layout can express no more ids.
	Capacity          uint64
	LifetimeRemaining time.Duration
}

// FlakeStats reports the namespaces this server issues ids of.
func (s *Server) FlakeStats() []FlakeStat {
	s.ids.mu.Lock()
	hs := make(map[string]*holder.Holder, len(s.ids.holders))
	for name, h := range s.ids.holders {
		hs[name] = h
	}
	s.ids.mu.Unlock()
	out := make([]FlakeStat, 0, len(hs))
	for name, h := range hs {
		st := FlakeStat{Namespace: name, Stats: h.Stats()}
		if ns, ok := s.node.Namespace(name); ok {
			st.Capacity = ns.Layout.Workers()
			st.LifetimeRemaining = time.Duration(ns.Layout.End()-s.node.WallMs()) * time.Millisecond
		}
		out = append(out, st)
	}
	return out
}
