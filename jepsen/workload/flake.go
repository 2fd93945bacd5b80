package workload

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/jepsen/record"
)

// The flake workload: clients that ask for flake ids (README "Flake ids")
// and record every call as an ids record (record.IDs) with the harness's
// wall clock at invocation, for the checkers of G1-G3:
//
//   - pinned clients call IdService/NextIds on one node each, with no
//     retries: the node answers from its own worker (service mode);
//   - smart clients call client.Client.NextIds (any node, retries);
//   - embedded generators (client.NewGenerator) issue ids in this process
//     from workers granted to them. Generator 0 lives through the run; the
//     others are closed (releasing their workers) and recreated once they
//     have issued ids for a while, so that workers are released and reused
//     by new holders: with a small worker field that is what would expose
//     ranges of one worker that overlap.

// FlakeConfig configures the flake workload.
type FlakeConfig struct {
	// Namespace receives most calls; Second, if set, a share of them
	// (SecondShare, 0 to 1), and each generator incarnation picks one the
	// same way.
	Namespace, Second string
	SecondShare       float64
	// Rate bounds the calls per second of pinned and smart clients
	// together (0: unbounded); GeneratorRate those of each generator.
	Rate, GeneratorRate float64
	PinnedPerNode       int
	Smart               int
	Generators          int
	// GeneratorLife is how long a generator other than generator 0 issues
	// ids before it is closed and recreated (drawn from [0], [1]); one
	// that issues nothing is recreated after GeneratorMaxWait.
	GeneratorLife    [2]time.Duration
	GeneratorMaxWait time.Duration
	// MaxCount bounds the ids of one call (1..MaxCount, drawn).
	MaxCount                                int
	OpTimeout, SmartTimeout, AttemptTimeout time.Duration
	Seed                                    uint64
}

// FlakeWorkload is a running set of flake clients.
type FlakeWorkload struct {
	cfg    FlakeConfig
	rec    *record.Recorder
	byAPI  map[string]string
	lim    *limiter
	cancel context.CancelFunc
	wg     sync.WaitGroup
	tally
	restarts atomic.Int64
}

// idCaller is one flake client's way of getting ids.
type idCaller interface {
	ids(ctx context.Context, ns string, n int) ([]int64, error)
	node() string   // where the call went
	holder() string // the holder that issued, "" if unknown
	pinned() bool
}

// PinnedIDs calls IdService on one node, with no retries.
type PinnedIDs struct {
	ID string
	c  seqv1connect.IdServiceClient
}

// NewPinnedIDs returns an IdService client of the node at api (with its own
// connections).
func NewPinnedIDs(id, api string) *PinnedIDs {
	return &PinnedIDs{ID: id, c: seqv1connect.NewIdServiceClient(pinnedHTTP(), "http://"+api)}
}

func (p *PinnedIDs) ids(ctx context.Context, ns string, n int) ([]int64, error) {
	r, err := p.c.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: ns, Count: uint32(n)}))
	if err != nil {
		return nil, err
	}
	if len(r.Msg.GetIds()) != n {
		return r.Msg.GetIds(), errShape
	}
	return r.Msg.GetIds(), nil
}
func (p *PinnedIDs) node() string   { return p.ID }
func (p *PinnedIDs) holder() string { return p.ID }
func (p *PinnedIDs) pinned() bool   { return true }

type smartIDs struct{ smart }

func (s smartIDs) ids(ctx context.Context, ns string, n int) ([]int64, error) {
	ids, err := s.c.NextIds(ctx, ns, uint32(n))
	if err == nil && len(ids) != n {
		return ids, errShape
	}
	return ids, err
}
func (s smartIDs) holder() string { return "" }

// StartFlake starts the flake clients; they run until Stop or ctx ends.
func StartFlake(ctx context.Context, cfg FlakeConfig, targets []Target, rec *record.Recorder) (*FlakeWorkload, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &FlakeWorkload{cfg: cfg, rec: rec, byAPI: map[string]string{}, cancel: cancel, lim: newLimiter(cfg.Rate)}
	var apis []string
	for _, t := range targets {
		apis = append(apis, t.API)
		w.byAPI[t.API] = t.ID
	}
	newSmart := func() (*client.Client, error) {
		return client.New(apis, client.Options{
			RetryFor:       cfg.SmartTimeout,
			AttemptTimeout: min(cfg.AttemptTimeout, cfg.SmartTimeout),
			MaxBackoff:     200 * time.Millisecond,
			// The embedded generators' grants ("flake worker acquired")
			// go to jepsen.log (slog's default logger, see run.go), where
			// the grants checker reads them; a client is silent without.
			Logger: slog.Default(),
		})
	}
	for i := range cfg.Smart {
		c, err := newSmart()
		if err != nil {
			cancel()
			return nil, err
		}
		w.run(ctx, fmt.Sprintf("s%d", i), smartIDs{smart{c: c, byAPI: w.byAPI}})
	}
	for _, t := range targets {
		for j := range cfg.PinnedPerNode {
			w.run(ctx, fmt.Sprintf("p-%s-%d", t.ID, j), NewPinnedIDs(t.ID, t.API))
		}
	}
	for i := range cfg.Generators {
		c, err := newSmart()
		if err != nil {
			cancel()
			return nil, err
		}
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.generator(ctx, i, c) }()
	}
	return w, nil
}

// rng returns a client's random source, from the seed and its name.
func (w *FlakeWorkload) rng(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(w.cfg.Seed, h.Sum64()))
}

// namespace picks a call's (or a generator's) namespace.
func (w *FlakeWorkload) namespace(rng *rand.Rand) string {
	if w.cfg.Second != "" && rng.Float64() < w.cfg.SecondShare {
		return w.cfg.Second
	}
	return w.cfg.Namespace
}

func (w *FlakeWorkload) count(rng *rand.Rand) int { return 1 + rng.IntN(max(w.cfg.MaxCount, 1)) }

func (w *FlakeWorkload) run(ctx context.Context, name string, c idCaller) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		rng := w.rng(name)
		for ctx.Err() == nil {
			if !w.lim.wait(ctx) {
				return
			}
			timeout := w.cfg.OpTimeout
			if !c.pinned() {
				timeout = w.cfg.SmartTimeout
			}
			op := record.Op{Client: name, Node: c.node(), Holder: c.holder(), F: record.IDs, Namespace: w.namespace(rng), Count: uint32(w.count(rng))}
			if typ := w.call(ctx, &op, timeout, func(ctx context.Context) ([]int64, error) {
				ids, err := c.ids(ctx, op.Namespace, int(op.Count))
				op.Node = c.node() // a smart client's: the node it last used
				return ids, err
			}, Classify); typ != record.OK {
				// Do not spin on a node that refuses or is down.
				sleep(ctx, time.Duration(10+rng.IntN(40))*time.Millisecond)
			}
		}
	}()
}

// call makes one call, records it and returns its outcome.
func (w *FlakeWorkload) call(ctx context.Context, op *record.Op, timeout time.Duration, f func(context.Context) ([]int64, error),
	classify func(error, context.Context) string) string {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	op.WallMs = time.Now().UnixMilli()
	op.Invoke = w.rec.Now()
	ids, err := f(cctx)
	op.Complete = w.rec.Now()
	op.Type = classify(err, cctx)
	if err != nil && !errors.Is(err, errShape) {
		op.Error = errString(err)
	} else {
		for _, id := range ids {
			op.Values = append(op.Values, uint64(id))
		}
	}
	w.rec.Add(*op)
	w.add(op.Type)
	return op.Type
}

// ClassifyLocal maps an embedded generator's error to an outcome: a
// timeout is info, any other error a failure (the generator returned no
// ids; the ids it may have taken are gaps).
func ClassifyLocal(err error, ctx context.Context) string {
	switch {
	case err == nil:
		return record.OK
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return record.Info
	}
	return record.Fail
}

// generator runs embedded generator i: one incarnation after another
// (generator 0: one for the whole run), each calling Next or NextN at
// GeneratorRate until its life is over, then closed.
func (w *FlakeWorkload) generator(ctx context.Context, i int, c *client.Client) {
	name := fmt.Sprintf("g%d", i)
	rng := w.rng(name)
	pace := newLimiter(w.cfg.GeneratorRate)
	for inc := 1; ctx.Err() == nil; inc++ {
		holder := fmt.Sprintf("%s.%d", name, inc)
		ns := w.namespace(rng)
		if i == 0 {
			ns = w.cfg.Namespace
		}
		g := c.NewGenerator(ns, client.GeneratorOptions{Label: "jepsen-" + holder})
		life := w.cfg.GeneratorLife[0]
		if d := w.cfg.GeneratorLife[1] - life; d > 0 {
			life += time.Duration(rng.Int64N(int64(d) + 1))
		}
		created := time.Now()
		var firstOK time.Time
		for ctx.Err() == nil && pace.wait(ctx) {
			if i > 0 && ((!firstOK.IsZero() && time.Since(firstOK) > life) || time.Since(created) > w.cfg.GeneratorMaxWait) {
				break
			}
			n := w.count(rng)
			op := record.Op{Client: name, Node: "embedded", Holder: holder, F: record.IDs, Namespace: ns, Count: uint32(n)}
			typ := w.call(ctx, &op, w.cfg.OpTimeout, func(ctx context.Context) ([]int64, error) {
				if n == 1 {
					id, err := g.Next(ctx)
					return []int64{id}, err
				}
				return g.NextN(ctx, n)
			}, ClassifyLocal)
			switch {
			case typ == record.OK && firstOK.IsZero():
				firstOK = time.Now()
			case typ != record.OK:
				sleep(ctx, time.Duration(10+rng.IntN(40))*time.Millisecond)
			}
		}
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_ = g.Close(cctx)
		cancel()
		if ctx.Err() == nil {
			w.restarts.Add(1)
		}
	}
}

// Stop stops the clients (closing the generators) and waits for their
// calls to end.
func (w *FlakeWorkload) Stop() {
	w.cancel()
	w.wg.Wait()
}

// Restarts is how many times a generator was closed and recreated.
func (w *FlakeWorkload) Restarts() int64 { return w.restarts.Load() }

// finalIDCalls is how many successful ids calls the final phase wants per
// node.
const finalIDCalls = 3

// FinalIDs asks every node for ids (IdService/NextIds, each namespace in
// turn) until finalIDCalls calls succeeded or timeout passed, recording the
// calls as clients final-<node>. It reports the nodes that never answered.
func FinalIDs(ctx context.Context, namespaces []string, targets []Target, rec *record.Recorder, timeout time.Duration) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	w := &FlakeWorkload{rec: rec}
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := NewPinnedIDs(t.ID, t.API)
			deadline := time.Now().Add(timeout)
			ok, last := 0, ""
			for k := 0; ok < finalIDCalls && time.Now().Before(deadline) && ctx.Err() == nil; k++ {
				op := record.Op{Client: "final-" + t.ID, Node: t.ID, Holder: t.ID, F: record.IDs, Namespace: namespaces[k%len(namespaces)], Count: uint32(1 + k%5)}
				if w.call(ctx, &op, 2*time.Second, func(ctx context.Context) ([]int64, error) {
					return p.ids(ctx, op.Namespace, int(op.Count))
				}, Classify) == record.OK {
					ok++
					continue
				}
				last = op.Type + " " + op.Error
				sleep(ctx, 200*time.Millisecond)
			}
			if ok == 0 {
				mu.Lock()
				failed = append(failed, fmt.Errorf("%s: no ids for %v (last: %s)", t.ID, timeout, last))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(failed...)
}

// SmallLayout is the flake workload's main namespace layout: 41 bits of
// 1 ms (as snowflake), but only workerBits of worker and sequenceBits of
// sequence. Few workers make new holders reuse workers that others
// released or lost (the case the hwm rule is for); a short sequence in ms
// units makes holders borrow later units within a call.
func SmallLayout(workerBits, sequenceBits uint8) flake.Layout {
	return flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 41, WorkerBits: workerBits, SequenceBits: sequenceBits}
}
