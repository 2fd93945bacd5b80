package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/idmsg"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/flake/holder"
)

// NextIds returns count flake ids of the namespace ("" is "default"),
// strictly increasing (unless the namespace is obfuscated). Any node
// answers from its own worker. Concurrent calls of a namespace for at most
// maxCoalescedIDs ids each are coalesced into one request, as Next calls
// are; each gets a contiguous slice of its ids. Larger calls are sent as
// they are: they gain nothing from sharing a request, and would queue
// behind the coalescer's few requests in flight. The ids travel as runs of
// consecutive ids where the server can send them so (see NextIdRuns).
func (c *Client) NextIds(ctx context.Context, namespace string, count uint32) ([]int64, error) {
	if count > 0 && count <= maxCoalescedIDs && !c.opts.DisableCoalescing && int(count) <= c.opts.MaxBatchKeys {
		vals, err := c.batcher(kindIDs, namespace, noGroup).do(ctx, make([]uint64, count))
		if err != nil {
			return nil, err
		}
		ids := make([]int64, len(vals))
		for i, v := range vals {
			ids[i] = int64(v)
		}
		return ids, nil
	}
	runs, err := c.NextIdRuns(ctx, namespace, count)
	if err != nil {
		return nil, err
	}
	return flake.AppendIDs(make([]int64, 0, count), runs...), nil
}

// NextIdRuns returns count flake ids of the namespace as runs of
// consecutive ids (run after run, in order): the ids of one worker's time
// unit are consecutive, so a call's ids are a few runs, and its answer is a
// few numbers however many ids it takes. An obfuscated namespace's ids are not
// consecutive: they come as runs of (mostly) one. Calls are not coalesced.
func (c *Client) NextIdRuns(ctx context.Context, namespace string, count uint32) ([]flake.Run, error) {
	resp, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.NextIdsResponse, error) {
		r, err := n.id.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: namespace, Count: count, Runs: true}))
		return msg(r, err)
	})
	if err != nil {
		return nil, err
	}
	return idmsg.Runs(resp, count)
}

// NextShardIds returns count flake ids of the namespace with shard in the
// layout's shard field (see flake.Layout.ShardBits): the shard a row lives
// on, readable from its id. Ids of different shards never collide (the
// shard only adds bits); a shard that does not fit the layout is
// invalid_argument. Calls are not coalesced.
func (c *Client) NextShardIds(ctx context.Context, namespace string, count uint32, shard uint64) ([]int64, error) {
	resp, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.NextIdsResponse, error) {
		r, err := n.id.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: namespace, Count: count, Runs: true, Shard: shard}))
		return msg(r, err)
	})
	if err != nil {
		return nil, err
	}
	runs, err := idmsg.Runs(resp, count)
	if err != nil {
		return nil, err
	}
	return flake.AppendIDs(make([]int64, 0, count), runs...), nil
}

// maxCoalescedIDs is the largest NextIds call that is coalesced.
const maxCoalescedIDs = 100

// Decode splits a flake id of the namespace into its parts (an obfuscated
// namespace's ids need the admin token).
func (c *Client) Decode(ctx context.Context, namespace string, id int64) (*seqv1.DecodeResponse, error) {
	return call(c, ctx, func(ctx context.Context, n *node) (*seqv1.DecodeResponse, error) {
		r, err := n.id.Decode(ctx, connect.NewRequest(&seqv1.DecodeRequest{Namespace: namespace, Id: id}))
		return msg(r, err)
	})
}

// GetLayout returns the namespace's layout, for decoding offline.
func (c *Client) GetLayout(ctx context.Context, namespace string) (*seqv1.GetLayoutResponse, error) {
	return call(c, ctx, func(ctx context.Context, n *node) (*seqv1.GetLayoutResponse, error) {
		r, err := n.id.GetLayout(ctx, connect.NewRequest(&seqv1.GetLayoutRequest{Namespace: namespace}))
		return msg(r, err)
	})
}

// CreateNamespace creates a flake namespace.
func (c *Client) CreateNamespace(ctx context.Context, req *seqv1.CreateNamespaceRequest) (*seqv1.CreateNamespaceResponse, error) {
	return call(c, ctx, func(ctx context.Context, n *node) (*seqv1.CreateNamespaceResponse, error) {
		r, err := n.admin.CreateNamespace(ctx, connect.NewRequest(req))
		return msg(r, err)
	})
}

// ListNamespaces lists the flake namespaces.
func (c *Client) ListNamespaces(ctx context.Context) ([]*seqv1.Namespace, error) {
	resp, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.ListNamespacesResponse, error) {
		r, err := n.admin.ListNamespaces(ctx, connect.NewRequest(&seqv1.ListNamespacesRequest{}))
		return msg(r, err)
	})
	if err != nil {
		return nil, err
	}
	return resp.GetNamespaces(), nil
}

// ListWorkers lists a namespace's workers ever used.
func (c *Client) ListWorkers(ctx context.Context, namespace string) ([]*seqv1.Worker, error) {
	resp, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.ListWorkersResponse, error) {
		r, err := n.admin.ListWorkers(ctx, connect.NewRequest(&seqv1.ListWorkersRequest{Namespace: namespace}))
		return msg(r, err)
	})
	if err != nil {
		return nil, err
	}
	return resp.GetWorkers(), nil
}

// ReclaimWorker takes a worker back from its holder now, fencing it.
func (c *Client) ReclaimWorker(ctx context.Context, namespace string, worker uint32) error {
	_, err := call(c, ctx, func(ctx context.Context, n *node) (*seqv1.ReclaimWorkerResponse, error) {
		r, err := n.admin.ReclaimWorker(ctx, connect.NewRequest(&seqv1.ReclaimWorkerRequest{Namespace: namespace, Worker: worker}))
		return msg(r, err)
	})
	return err
}

// GeneratorOptions configure an embedded Generator.
type GeneratorOptions struct {
	// Label names this process in the cluster's worker list (default: the
	// host name and process id).
	Label string
	// Workers is how many workers the generator may hold, for more than
	// one worker's rate (default 1).
	Workers int
	// Lead bounds how far ids may run ahead of the clock by borrowing
	// later time units (default 1 s).
	Lead time.Duration
}

// Generator issues flake ids in this process, without an RPC per id, from
// workers the cluster grants it (see holder.Holder in flake/holder): it acquires a worker on
// first use, renews in the background, stops issuing at the first of its
// lease's end or its range's end, acquires anew when fenced, and releases
// its workers on Close. No restart, clock step or reschedule can make it
// repeat an id: every Generator is a new holder with new ranges.
//
// Obfuscated namespaces are served by the servers only (they hold the
// cluster secret): a Generator refuses them.
type Generator struct {
	c      *Client
	ns     string
	opts   GeneratorOptions
	once   sync.Once
	holder *holder.Holder
	err    error
}

// NewGenerator returns an embedded generator of the namespace ("" is
// "default"). It contacts the cluster on the first Next.
func (c *Client) NewGenerator(namespace string, opts GeneratorOptions) *Generator {
	if namespace == "" {
		namespace = "default"
	}
	if opts.Label == "" {
		host, _ := os.Hostname()
		opts.Label = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	return &Generator{c: c, ns: namespace, opts: opts}
}

// ErrObfuscated means the namespace's ids are obfuscated with the
// cluster's secret, which only the servers hold: use Client.NextIds.
var ErrObfuscated = errors.New("client: obfuscated namespaces are served by the cluster only (use NextIds)")

func (g *Generator) init(ctx context.Context) error {
	g.once.Do(func() {
		m, err := g.c.GetLayout(ctx, g.ns)
		if err != nil {
			g.err = err
			return
		}
		l, obf := idmsg.Layout(m)
		if obf != flake.ObfuscateNone {
			g.err = ErrObfuscated
			return
		}
		g.holder = holder.New(holder.Config{Granter: granter{g.c}, Namespace: g.ns, Label: g.opts.Label,
			Workers: g.opts.Workers, Lead: g.opts.Lead, Logger: g.c.opts.Logger, Layout: l})
	})
	return g.err
}

// Next returns one id.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	ids, err := g.NextN(ctx, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextN returns n ids, strictly increasing.
func (g *Generator) NextN(ctx context.Context, n int) ([]int64, error) {
	return g.NextShardN(ctx, n, 0)
}

// NextShard returns one id with shard in the layout's shard field (see
// Client.NextShardIds).
func (g *Generator) NextShard(ctx context.Context, shard uint64) (int64, error) {
	ids, err := g.NextShardN(ctx, 1, shard)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextShardN returns n ids, strictly increasing, with shard in the
// layout's shard field; a shard that does not fit is an error wrapping
// flake.ErrInvalidShard.
func (g *Generator) NextShardN(ctx context.Context, n int, shard uint64) ([]int64, error) {
	if n < 1 || n > 10000 {
		return nil, fmt.Errorf("%w: count %d (1 to 10000)", seqd.ErrInvalidArgument, n)
	}
	if err := g.init(ctx); err != nil {
		return nil, err
	}
	return g.holder.NextShard(ctx, n, shard)
}

// Close releases the generator's workers (within ctx); Next fails after it.
func (g *Generator) Close(ctx context.Context) error {
	g.once.Do(func() { g.err = holder.ErrClosed })
	if g.holder == nil {
		return nil
	}
	return g.holder.Close(ctx)
}

// granter acquires, renews and releases workers through the cluster.
type granter struct{ c *Client }

func (g granter) Acquire(ctx context.Context, namespace, holder, label string) (flake.Grant, error) {
	m, err := call(g.c, ctx, func(ctx context.Context, n *node) (*seqv1.WorkerGrant, error) {
		r, err := n.id.AcquireWorker(ctx, connect.NewRequest(&seqv1.AcquireWorkerRequest{Namespace: namespace, Holder: holder, Label: label}))
		return msg(r, err)
	})
	return grantFrom(m, err)
}

func (g granter) Renew(ctx context.Context, gr flake.Grant, holder string) (flake.Grant, error) {
	m, err := call(g.c, ctx, func(ctx context.Context, n *node) (*seqv1.WorkerGrant, error) {
		r, err := n.id.RenewWorker(ctx, connect.NewRequest(&seqv1.RenewWorkerRequest{Namespace: gr.Namespace, Worker: uint32(gr.Worker), Token: gr.Token, Holder: holder}))
		return msg(r, err)
	})
	return grantFrom(m, err)
}

func (g granter) Release(ctx context.Context, gr flake.Grant, holder string) error {
	_, err := call(g.c, ctx, func(ctx context.Context, n *node) (*seqv1.ReleaseWorkerResponse, error) {
		r, err := n.id.ReleaseWorker(ctx, connect.NewRequest(&seqv1.ReleaseWorkerRequest{Namespace: gr.Namespace, Worker: uint32(gr.Worker), Token: gr.Token, Holder: holder}))
		return msg(r, err)
	})
	return idmsg.HolderError(err)
}

func grantFrom(m *seqv1.WorkerGrant, err error) (flake.Grant, error) {
	if err != nil {
		return flake.Grant{}, idmsg.HolderError(err)
	}
	return idmsg.Grant(m), nil
}
