package api

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/api/idmsg"
	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/flake"
)

// CreateNamespace implements AdminService.CreateNamespace.
func (s *Server) CreateNamespace(ctx context.Context, req *connect.Request[seqv1.CreateNamespaceRequest]) (*connect.Response[seqv1.CreateNamespaceResponse], error) {
	op, err := s.createOp(req.Msg)
	if err != nil {
		err = s.toConnect(err)
		s.logCall(seqv1connect.AdminServiceCreateNamespaceProcedure, err)
		return nil, err
	}
	return route(s, ctx, req, seqv1connect.AdminServiceCreateNamespaceProcedure,
		func(ctx context.Context) (*seqv1.CreateNamespaceResponse, error) {
			// Only a leader holding its lease creates, as for spaces: a
			// namespace created while an older leader still served could be
			// not_found there after this call returned.
			if !s.node.Group(0).Allocator().Serving() {
				return nil, seqd.ErrLeaseNotHeld
			}
			_, existed := s.node.Namespace(op.Namespace)
			if op.Layout.ClusterBits > 0 {
				if err := s.node.ClusterValueInUse(op.Layout.Cluster); err != nil {
					return nil, err
				}
				defer s.node.PublishFlakeClusters()
			}
			if op.Obfuscation != flake.ObfuscateNone {
				// The leader derives the key check from its own secret.
				_, check, err := flake.DeriveKey(s.ids.secret, op.Namespace)
				if err != nil {
					return nil, err
				}
				op.KeyCheck = check
			}
			res, err := s.node.ApplyFlake(ctx, []cluster.FlakeOp{op})
			if err != nil {
				return nil, err
			}
			if res[0].Err != nil {
				return nil, res[0].Err
			}
			ns, _ := s.node.Namespace(op.Namespace)
			return &seqv1.CreateNamespaceResponse{Namespace: idmsg.NamespaceMsg(ns), Created: !existed}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.CreateNamespaceRequest]) (*connect.Response[seqv1.CreateNamespaceResponse], error) {
			return p.admin.CreateNamespace(ctx, r)
		})
}

// createOp checks a CreateNamespace request and builds its op.
func (s *Server) createOp(m *seqv1.CreateNamespaceRequest) (cluster.FlakeOp, error) {
	op := cluster.FlakeOp{Type: cluster.OpCreateNamespace, Namespace: m.GetName(), Obfuscation: m.GetObfuscation()}
	if m.GetName() == "" {
		return op, fmt.Errorf("%w: a name is required", seqd.ErrInvalidNamespace)
	}
	custom := m.GetTimeBits() != 0
	switch {
	case custom && m.GetLayout() != "":
		return op, fmt.Errorf("%w: give a preset layout or custom widths, not both", seqd.ErrInvalidNamespace)
	case custom:
		if max(m.GetTimeBits(), m.GetWorkerBits(), m.GetSequenceBits(), m.GetShardBits(), m.GetClusterBits()) > 64 {
			return op, fmt.Errorf("%w: bit widths above 64", seqd.ErrInvalidNamespace)
		}
		op.Layout = flake.Layout{EpochMs: m.GetEpochUnixMs(), UnitMs: m.GetUnitMs(), TimeBits: uint8(m.GetTimeBits()),
			WorkerBits: uint8(m.GetWorkerBits()), SequenceBits: uint8(m.GetSequenceBits()),
			ShardBits: uint8(m.GetShardBits()), ClusterBits: uint8(m.GetClusterBits()), Cluster: m.GetCluster(), SequenceFirst: m.GetSequenceFirst()}
		if op.Layout.EpochMs == 0 {
			op.Layout.EpochMs = flake.DefaultEpoch.UnixMilli()
		}
		if op.Layout.UnitMs == 0 {
			op.Layout.UnitMs = 1
		}
	default:
		name := m.GetLayout()
		if name == "" {
			name = flake.DefaultLayoutName
		}
		l, ok := flake.Preset(name)
		if !ok {
			return op, fmt.Errorf("%w: unknown layout %q (presets: %v)", seqd.ErrInvalidNamespace, name, flake.PresetNames())
		}
		if m.GetEpochUnixMs() != 0 || m.GetUnitMs() != 0 || m.GetWorkerBits() != 0 || m.GetSequenceBits() != 0 ||
			m.GetShardBits() != 0 || m.GetClusterBits() != 0 || m.GetCluster() != 0 || m.GetSequenceFirst() {
			return op, fmt.Errorf("%w: custom fields need time_bits (or drop them for a preset)", seqd.ErrInvalidNamespace)
		}
		op.Layout = l
	}
	if err := flake.ValidateNamespace(op.Namespace, op.Layout, op.Obfuscation); err != nil {
		return op, err
	}
	if op.Obfuscation != flake.ObfuscateNone && len(s.ids.secret) == 0 {
		return op, fmt.Errorf("%w: start every server with --cluster-secret-file (or SEQD_CLUSTER_SECRET_FILE)", flake.ErrNoSecret)
	}
	return op, nil
}

// ListNamespaces implements AdminService.ListNamespaces (answered by the
// leader).
func (s *Server) ListNamespaces(ctx context.Context, req *connect.Request[seqv1.ListNamespacesRequest]) (*connect.Response[seqv1.ListNamespacesResponse], error) {
	return route(s, ctx, req, seqv1connect.AdminServiceListNamespacesProcedure,
		func(context.Context) (*seqv1.ListNamespacesResponse, error) {
			// Only a leader holding its lease answers: a follower that
			// does not find a namespace asks the leader (Server.namespace)
			// and answers not_found from this list, which a leader
			// deposed, or waiting out its predecessor's lease, may lack.
			if !s.node.Group(0).Allocator().Serving() {
				return nil, fmt.Errorf("%w: the namespaces are listed by a leader that holds its lease", seqd.ErrNotServing)
			}
			out := &seqv1.ListNamespacesResponse{}
			for _, ns := range s.node.Namespaces() {
				out.Namespaces = append(out.Namespaces, idmsg.NamespaceMsg(ns))
			}
			return out, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.ListNamespacesRequest]) (*connect.Response[seqv1.ListNamespacesResponse], error) {
			return p.admin.ListNamespaces(ctx, r)
		})
}

// ListWorkers implements AdminService.ListWorkers (answered by the leader).
func (s *Server) ListWorkers(ctx context.Context, req *connect.Request[seqv1.ListWorkersRequest]) (*connect.Response[seqv1.ListWorkersResponse], error) {
	return route(s, ctx, req, seqv1connect.AdminServiceListWorkersProcedure,
		func(context.Context) (*seqv1.ListWorkersResponse, error) {
			name, err := nsName(req.Msg.GetNamespace())
			if err != nil {
				return nil, err
			}
			ws, ok := s.node.Workers(name)
			if !ok {
				return nil, fmt.Errorf("%w: %q", seqd.ErrUnknownNamespace, name)
			}
			out := &seqv1.ListWorkersResponse{}
			for _, w := range ws {
				m := &seqv1.Worker{Id: uint32(w.ID), Hwm: w.HWM, Token: w.Token, Held: w.Holder != "" && w.Holder != cluster.ReclaimedHolder, Label: w.Label,
					RenewedUnixMs: w.RenewedMs, LeaseMs: uint32(min(w.LeaseMs, 1<<32-1))}
				for _, u := range w.History {
					m.History = append(m.History, &seqv1.WorkerUse{Label: u.Label, Token: u.Token, Lo: u.Lo, Hi: u.Hi})
				}
				out.Workers = append(out.Workers, m)
			}
			return out, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.ListWorkersRequest]) (*connect.Response[seqv1.ListWorkersResponse], error) {
			return p.admin.ListWorkers(ctx, r)
		})
}

// ReclaimWorker implements AdminService.ReclaimWorker.
func (s *Server) ReclaimWorker(ctx context.Context, req *connect.Request[seqv1.ReclaimWorkerRequest]) (*connect.Response[seqv1.ReclaimWorkerResponse], error) {
	return route(s, ctx, req, seqv1connect.AdminServiceReclaimWorkerProcedure,
		func(ctx context.Context) (*seqv1.ReclaimWorkerResponse, error) {
			name, err := nsName(req.Msg.GetNamespace())
			if err != nil {
				return nil, err
			}
			if _, err := s.flakeOp(ctx, cluster.FlakeOp{Type: cluster.OpReclaim, Namespace: name, Worker: uint64(req.Msg.GetWorker())}); err != nil {
				return nil, err
			}
			return &seqv1.ReclaimWorkerResponse{}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.ReclaimWorkerRequest]) (*connect.Response[seqv1.ReclaimWorkerResponse], error) {
			return p.admin.ReclaimWorker(ctx, r)
		})
}

// applyGrant applies one op through group 0 on its leader and answers its
// grant (none for a release or a reclaim): the one place a grant is
// decided, for IdService's handlers and this server's own holders alike.
func (s *Server) applyGrant(ctx context.Context, op cluster.FlakeOp) (flake.Grant, error) {
	res, err := s.node.ApplyFlake(ctx, []cluster.FlakeOp{op})
	if err != nil {
		return flake.Grant{}, err
	}
	return res[0].Grant, res[0].Err
}

// flakeOp applies one op on the leader and answers its grant as a
// message.
func (s *Server) flakeOp(ctx context.Context, op cluster.FlakeOp) (*seqv1.WorkerGrant, error) {
	g, err := s.applyGrant(ctx, op)
	if err != nil {
		return nil, err
	}
	ns, _ := s.node.Namespace(op.Namespace)
	return idmsg.GrantMsg(g, ns.Obfuscation), nil
}

// spanUnits is the range length of a grant: rangeLeases leases of the
// layout's units.
func (s *Server) spanUnits(name string) uint64 {
	ns, ok := s.node.Namespace(name)
	if !ok {
		return 1
	}
	return max(1, uint64(rangeLeases*grantLease.Milliseconds())/uint64(ns.Layout.UnitMs))
}

// holderOp is the op of holder on namespace ("" is the default), with
// this server's lease.
func holderOp(namespace, holder string) (cluster.FlakeOp, error) {
	name, err := nsName(namespace)
	if err != nil {
		return cluster.FlakeOp{}, err
	}
	if holder == "" {
		return cluster.FlakeOp{}, fmt.Errorf("%w: holder is required", seqd.ErrInvalidArgument)
	}
	return cluster.FlakeOp{Namespace: name, Holder: holder, LeaseMs: uint64(grantLease.Milliseconds())}, nil
}

// acquireOp is an acquire by holder (named label for people), with this
// server's lease and span.
func (s *Server) acquireOp(namespace, holder, label string) (cluster.FlakeOp, error) {
	op, err := holderOp(namespace, holder)
	op.Type, op.Label, op.Span = cluster.OpAcquire, label, s.spanUnits(op.Namespace)
	return op, err
}

// renewOp is holder's renewal of its worker, with this server's lease and
// span.
func (s *Server) renewOp(namespace, holder string, worker, token uint64) (cluster.FlakeOp, error) {
	op, err := holderOp(namespace, holder)
	op.Type, op.Worker, op.Token, op.Span = cluster.OpRenew, worker, token, s.spanUnits(op.Namespace)
	return op, err
}

// releaseOp is holder's release of its worker.
func releaseOp(namespace, holder string, worker, token uint64) (cluster.FlakeOp, error) {
	op, err := holderOp(namespace, holder)
	op.Type, op.Worker, op.Token = cluster.OpRelease, worker, token
	return op, err
}

// AcquireWorker implements IdService.AcquireWorker (answered by the leader).
func (s *Server) AcquireWorker(ctx context.Context, req *connect.Request[seqv1.AcquireWorkerRequest]) (*connect.Response[seqv1.WorkerGrant], error) {
	return route(s, ctx, req, seqv1connect.IdServiceAcquireWorkerProcedure,
		func(ctx context.Context) (*seqv1.WorkerGrant, error) {
			op, err := s.acquireOp(req.Msg.GetNamespace(), req.Msg.GetHolder(), req.Msg.GetLabel())
			if err != nil {
				return nil, err
			}
			return s.flakeOp(ctx, op)
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.AcquireWorkerRequest]) (*connect.Response[seqv1.WorkerGrant], error) {
			return p.id.AcquireWorker(ctx, r)
		})
}

// RenewWorker implements IdService.RenewWorker (answered by the leader).
func (s *Server) RenewWorker(ctx context.Context, req *connect.Request[seqv1.RenewWorkerRequest]) (*connect.Response[seqv1.WorkerGrant], error) {
	return route(s, ctx, req, seqv1connect.IdServiceRenewWorkerProcedure,
		func(ctx context.Context) (*seqv1.WorkerGrant, error) {
			op, err := s.renewOp(req.Msg.GetNamespace(), req.Msg.GetHolder(), uint64(req.Msg.GetWorker()), req.Msg.GetToken())
			if err != nil {
				return nil, err
			}
			return s.flakeOp(ctx, op)
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.RenewWorkerRequest]) (*connect.Response[seqv1.WorkerGrant], error) {
			return p.id.RenewWorker(ctx, r)
		})
}

// ReleaseWorker implements IdService.ReleaseWorker (answered by the leader).
func (s *Server) ReleaseWorker(ctx context.Context, req *connect.Request[seqv1.ReleaseWorkerRequest]) (*connect.Response[seqv1.ReleaseWorkerResponse], error) {
	return route(s, ctx, req, seqv1connect.IdServiceReleaseWorkerProcedure,
		func(ctx context.Context) (*seqv1.ReleaseWorkerResponse, error) {
			op, err := releaseOp(req.Msg.GetNamespace(), req.Msg.GetHolder(), uint64(req.Msg.GetWorker()), req.Msg.GetToken())
			if err != nil {
				return nil, err
			}
			if _, err := s.applyGrant(ctx, op); err != nil {
				return nil, err
			}
			return &seqv1.ReleaseWorkerResponse{}, nil
		},
		func(ctx context.Context, p *peer, r *connect.Request[seqv1.ReleaseWorkerRequest]) (*connect.Response[seqv1.ReleaseWorkerResponse], error) {
			return p.id.ReleaseWorker(ctx, r)
		})
}
