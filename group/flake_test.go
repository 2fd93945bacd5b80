package group_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/group"
)

// applyFlake applies one op on the leader g and answers its result.
func applyFlake(t *testing.T, g *group.Group, op fsm.FlakeOp) fsm.FlakeResult {
	t.Helper()
	res, err := g.ApplyFlake(context.Background(), []fsm.FlakeOp{op})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

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
	apply := func(op fsm.FlakeOp) fsm.FlakeResult { return applyFlake(t, g, op) }
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

// TestFlakeStateSurvivesReopen: raft applies the log again from its last
// snapshot (here from the start) when a server restarts, over an fsm.db
// that already holds those entries' effects. Flake operations are not
// idempotent (an acquire takes the next free worker and raises its token),
// so a replayed acquire, release or renewal must not be applied twice: the
// restarted replica would hold phantom grants and diverge from the others.
func TestFlakeStateSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	h := &host{}
	h.vouched.Store(true)
	g, addr := open(t, dir, h)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the flake protocol", func() bool { return g.IsLeader() && g.FSM().Protocol() >= 3 })
	apply := func(g *group.Group, op fsm.FlakeOp) fsm.FlakeResult { return applyFlake(t, g, op) }
	two := flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 40, WorkerBits: 1, SequenceBits: 4}
	if r := apply(g, fsm.FlakeOp{Type: fsm.OpCreateNamespace, Namespace: "n", Layout: two}); r.Err != nil {
		t.Fatal(r.Err)
	}
	acquire := func(g *group.Group, holder string) fsm.FlakeResult {
		return apply(g, fsm.FlakeOp{Type: fsm.OpAcquire, Namespace: "n", Holder: holder, Span: 1000, LeaseMs: 60_000})
	}
	a, b := acquire(g, "a"), acquire(g, "b")
	if a.Err != nil || b.Err != nil {
		t.Fatal(a.Err, b.Err)
	}
	if r := apply(g, fsm.FlakeOp{Type: fsm.OpRelease, Namespace: "n", Worker: a.Grant.Worker, Token: a.Grant.Token, Holder: "a"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	before, _ := g.FSM().Workers("n")
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	h2 := &host{}
	h2.vouched.Store(true)
	g2, _ := open(t, dir, h2)
	waitFor(t, "leadership after reopen", func() bool { return g2.IsLeader() && g2.FSM().AppliedIndex() >= g.FSM().AppliedIndex() })
	// A barrier: every entry of the log is applied.
	if r := apply(g2, fsm.FlakeOp{Type: fsm.OpCreateNamespace, Namespace: "n", Layout: two}); r.Err != nil {
		t.Fatal(r.Err)
	}
	after, _ := g2.FSM().Workers("n")
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("the workers changed across a restart:\nbefore %+v\nafter  %+v", before, after)
	}
	// Worker a released is free again; b still holds the other.
	if c := acquire(g2, "c"); c.Err != nil || c.Grant.Worker != a.Grant.Worker || c.Grant.Token != a.Grant.Token+1 {
		t.Fatalf("after the restart c got %+v (%v); a had %+v", c.Grant, c.Err, a.Grant)
	}
}
