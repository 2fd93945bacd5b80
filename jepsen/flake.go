package main

import (
	"context"
	"fmt"
	"time"

	"github.com/seqd/seqd/api/idmsg"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/jepsen/record"
	"github.com/seqd/seqd/jepsen/workload"
)

// flakeDescription describes the flake workload for results.json.
func flakeDescription(cfg *config) string {
	d := fmt.Sprintf("flake: rate %g/s over %d smart + %d pinned per node, %d embedded generators at %g calls/s each (all but g0 recreated after issuing for %s, or %v without ids), 1..%d ids per call, op timeout %v (smart %v, attempt %v); namespace %s (41 time bits of 1 ms, %d worker bits, %d sequence bits)",
		cfg.Rate, cfg.Smart, cfg.PinnedPerNode, cfg.Generators, cfg.GeneratorRate, cfg.GeneratorLife, cfg.GeneratorMaxWait, cfg.MaxIDs,
		cfg.OpTimeout, cfg.SmartTimeout, cfg.AttemptTimeout, cfg.Namespace, cfg.WorkerBits, cfg.SequenceBits)
	if cfg.Second != "" {
		d += fmt.Sprintf(" and %s (snowflake layout, %g of the calls)", cfg.Second, cfg.SecondShare)
	}
	return d
}

// createNamespaces creates the flake workload's namespaces and records
// their layouts at the head of the history, for the checkers.
func createNamespaces(ctx context.Context, cfg *config, admin *client.Client, rec *record.Recorder) error {
	l := workload.SmallLayout(uint8(cfg.WorkerBits), uint8(cfg.SequenceBits))
	reqs := []*seqv1.CreateNamespaceRequest{{Name: cfg.Namespace, EpochUnixMs: l.EpochMs, UnitMs: l.UnitMs,
		TimeBits: uint32(l.TimeBits), WorkerBits: uint32(l.WorkerBits), SequenceBits: uint32(l.SequenceBits)}}
	if cfg.Second != "" {
		reqs = append(reqs, &seqv1.CreateNamespaceRequest{Name: cfg.Second, Layout: flake.DefaultLayoutName})
	}
	for _, req := range reqs {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := admin.CreateNamespace(cctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("creating namespace %q: %w", req.GetName(), err)
		}
		layout, obfuscation := idmsg.Layout(resp.GetNamespace().GetLayout())
		if err := layout.Validate(); err != nil {
			return fmt.Errorf("namespace %q: the cluster answered %w", req.GetName(), err)
		}
		rec.Add(record.Op{Client: record.HarnessClient, F: record.NamespaceInfo, Namespace: req.GetName(), Layout: &layout,
			Obfuscation: obfuscation, Type: record.Info, Invoke: rec.Now(), Complete: rec.Now()})
	}
	return nil
}
