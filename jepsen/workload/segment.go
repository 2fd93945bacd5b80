package workload

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/jepsen/record"
)

// The segment workload: many client.Segments (Leaf-segment mode) on a few
// keys, each in its own client, handing out values from the ranges they
// reserve, next to the sequence workload's clients calling Next, Reserve
// and Current on the same keys. Every value a segment hands out is recorded
// (record.Segment), so that the checker sees every value of the keys, from
// segments and calls alike, for uniqueness, and each segment's values for
// their order. Small ranges that double and halve with consumption make
// reservations frequent, so faults meet them in flight.

// SegmentConfig configures the segments of the segment workload.
type SegmentConfig struct {
	Space string
	Keys  uint64 // segments take keys 0..Keys-1 in turn
	// Segments is how many segments run, each in its own client; Rate
	// bounds their calls per second together (0: unbounded).
	Segments int
	Rate     float64
	// Range options of every segment (see client.SegmentOptions).
	Min, Max     uint32
	Target       time.Duration
	FetchTimeout time.Duration
	// MaxN bounds the values of one call (1..MaxN, drawn).
	MaxN      int
	OpTimeout time.Duration
	Seed      uint64
}

// SegmentWorkload is a running set of segments, with the sequence clients
// that share their keys (Sequence, nil without).
type SegmentWorkload struct {
	*Workload
	Sequence *Workload
}

// StartSegments starts the segments, and seq (when it has clients) on the
// same space and keys; they run until Stop or ctx ends.
func StartSegments(ctx context.Context, cfg SegmentConfig, seq Config, targets []Target, rec *record.Recorder) (*SegmentWorkload, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &Workload{cfg: seq, rec: rec, targets: targets, byAPI: map[string]string{}, cancel: cancel, lim: newLimiter(cfg.Rate)}
	var apis []string
	for _, t := range targets {
		apis = append(apis, t.API)
		w.byAPI[t.API] = t.ID
	}
	sw := &SegmentWorkload{Workload: w}
	for i := range cfg.Segments {
		c, err := client.New(apis, client.Options{AttemptTimeout: min(cfg.FetchTimeout, time.Second), MaxBackoff: 200 * time.Millisecond})
		if err != nil {
			cancel()
			return nil, err
		}
		key := uint64(i) % cfg.Keys
		s := c.Segment(cfg.Space, key, client.SegmentOptions{Initial: cfg.Min, Min: cfg.Min, Max: cfg.Max, Target: cfg.Target,
			FetchTimeout: cfg.FetchTimeout, RetryEvery: 100 * time.Millisecond})
		w.wg.Go(func() { w.segment(ctx, fmt.Sprintf("g%d", i), key, s, c, cfg) })
	}
	if seq.PinnedPerNode+seq.Smart > 0 {
		var err error
		if sw.Sequence, err = Start(ctx, seq, targets, rec); err != nil {
			cancel()
			return nil, err
		}
	}
	return sw, nil
}

// segment runs one segment's calls until ctx ends, then closes it.
func (w *Workload) segment(ctx context.Context, name string, key uint64, s *client.Segment, c *client.Client, cfg SegmentConfig) {
	defer s.Close()
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(cfg.Seed, h.Sum64()))
	for ctx.Err() == nil {
		if !w.lim.wait(ctx) {
			return
		}
		n := 1 + rng.IntN(max(cfg.MaxN, 1))
		op := record.Op{Client: name, F: record.Segment, Keys: []uint64{key}, Count: uint32(n)}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
		op.Invoke = w.rec.Now()
		vals, err := s.NextN(cctx, n)
		op.Complete = w.rec.Now()
		op.Node = smart{c: c, byAPI: w.byAPI}.node()
		op.Type = Classify(err, cctx)
		if errors.Is(err, client.ErrSegmentClosed) {
			op.Type = record.Fail
		}
		cancel()
		if err != nil {
			op.Error = errString(err)
		} else {
			op.Values = vals
		}
		w.rec.Add(op)
		w.add(op.Type)
		if op.Type != record.OK {
			sleep(ctx, time.Duration(10+rng.IntN(40))*time.Millisecond) // both ranges spent: the cluster is down
		}
	}
}

// Counts adds the sequence clients' calls to the segments'.
func (sw *SegmentWorkload) Counts() (ok, fail, info int64) {
	ok, fail, info = sw.Workload.Counts()
	if sw.Sequence != nil {
		o, f, i := sw.Sequence.Counts()
		ok, fail, info = ok+o, fail+f, info+i
	}
	return ok, fail, info
}

// Stop stops the segments and the sequence clients.
func (sw *SegmentWorkload) Stop() {
	sw.Workload.Stop()
	if sw.Sequence != nil {
		sw.Sequence.Stop()
	}
}
