package group_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/fsm"
)

// TestApplyFlakeReclaimsOnlyWhatTheLeaderWatchedLapse: the leader takes a
// held worker for a new holder only after its own steady clock watched the
// worker's last renewal stand for two leases; a holder that keeps renewing
// keeps its worker however long the acquires go on.
func TestApplyFlakeReclaimsOnlyWhatTheLeaderWatchedLapse(t *testing.T) {
	h := &host{}
	h.vouched.Store(true)
	g, addr := open(t, t.TempDir(), h)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the flake protocol", func() bool { return g.IsLeader() && g.FSM().Protocol() >= 3 })
	ctx := context.Background()
	apply := func(op fsm.FlakeOp) fsm.FlakeResult {
		t.Helper()
		res, err := g.ApplyFlake(ctx, []fsm.FlakeOp{op})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	two := flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 40, WorkerBits: 1, SequenceBits: 4}
	if r := apply(fsm.FlakeOp{Type: fsm.OpCreateNamespace, Namespace: "n", Layout: two}); r.Err != nil {
		t.Fatal(r.Err)
	}
	const leaseMs = 100
	acquire := func(holder string) fsm.FlakeResult {
		return apply(fsm.FlakeOp{Type: fsm.OpAcquire, Namespace: "n", Holder: holder, Span: 1000, LeaseMs: leaseMs})
	}
	a, b := acquire("a"), acquire("b")
	if a.Err != nil || b.Err != nil {
		t.Fatal(a.Err, b.Err)
	}
	start := time.Now()
	var c fsm.FlakeResult
	for {
		// a renews; b does not.
		if r := apply(fsm.FlakeOp{Type: fsm.OpRenew, Namespace: "n", Worker: a.Grant.Worker, Token: a.Grant.Token, Holder: "a", Span: 1000, LeaseMs: leaseMs}); r.Err != nil {
			t.Fatalf("a's renewal: %v", r.Err)
		}
		c = acquire("c")
		if c.Err == nil {
			break
		}
		if !errors.Is(c.Err, seqd.ErrNoWorker) || time.Since(start) > 5*time.Second {
			t.Fatalf("acquire: %v after %v", c.Err, time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if waited := time.Since(start); waited < 2*leaseMs*time.Millisecond {
		t.Fatalf("b's worker was taken after %v, before two leases", waited)
	}
	if c.Grant.Worker != b.Grant.Worker || !c.Grant.Reclaimed || c.Grant.Token <= b.Grant.Token || c.Grant.Lo < b.Grant.Hi {
		t.Fatalf("c got %+v; b had %+v", c.Grant, b.Grant)
	}
	if r := apply(fsm.FlakeOp{Type: fsm.OpRenew, Namespace: "n", Worker: b.Grant.Worker, Token: b.Grant.Token, Holder: "b", Span: 1000, LeaseMs: leaseMs}); !errors.Is(r.Err, seqd.ErrFenced) {
		t.Fatalf("b renewed after the reclaim: %v", r.Err)
	}
}
