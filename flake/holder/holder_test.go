package holder_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/flake/holder"
	"github.com/seqd/seqd/fsm"
)

// fsmGranter is a granter backed by a real state machine on a real bbolt
// file: every call is one applied entry, with the leader time nowMs.
type fsmGranter struct {
	mu      sync.Mutex
	f       *fsm.FSM
	index   uint64
	nowMs   atomic.Int64
	leaseMs uint32
	span    uint64
	down    atomic.Bool // the leader is unreachable
	calls   atomic.Int64
}

func newGranter(t *testing.T, l flake.Layout) *fsmGranter {
	t.Helper()
	f, err := fsm.Open(filepath.Join(t.TempDir(), "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	g := &fsmGranter{f: f, leaseMs: 600, span: 2000}
	g.nowMs.Store(time.Now().UnixMilli())
	if r := g.apply(fsm.FlakeOp{Type: fsm.OpCreateNamespace, Namespace: "n", Layout: l}); r.Err != nil {
		t.Fatal(r.Err)
	}
	return g
}

var errDown = errors.New("leader unreachable")

func (g *fsmGranter) apply(op fsm.FlakeOp) fsm.FlakeResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.index++
	g.calls.Add(1)
	resp := g.f.Apply(&raft.Log{Index: g.index, Term: 1, Type: raft.LogCommand, Data: fsm.EncodeFlake(g.nowMs.Load(), []fsm.FlakeOp{op})})
	return resp.(*fsm.FlakeResponse).Results[0]
}

// grant answers the state machine's grant as it is: the holder's grant.
func (g *fsmGranter) grant(r fsm.FlakeResult) (flake.Grant, error) { return r.Grant, r.Err }

func (g *fsmGranter) Acquire(_ context.Context, ns, holder, label string) (flake.Grant, error) {
	if g.down.Load() {
		return flake.Grant{}, errDown
	}
	return g.grant(g.apply(fsm.FlakeOp{Type: fsm.OpAcquire, Namespace: ns, Holder: holder, Label: label, Span: g.span, LeaseMs: uint64(g.leaseMs)}))
}

func (g *fsmGranter) Renew(_ context.Context, gr flake.Grant, holder string) (flake.Grant, error) {
	if g.down.Load() {
		return flake.Grant{}, errDown
	}
	return g.grant(g.apply(fsm.FlakeOp{Type: fsm.OpRenew, Namespace: gr.Namespace, Worker: gr.Worker, Token: gr.Token, Holder: holder, Span: g.span, LeaseMs: uint64(g.leaseMs)}))
}

func (g *fsmGranter) Release(_ context.Context, gr flake.Grant, holder string) error {
	if g.down.Load() {
		return errDown
	}
	return g.apply(fsm.FlakeOp{Type: fsm.OpRelease, Namespace: gr.Namespace, Worker: gr.Worker, Token: gr.Token, Holder: holder}).Err
}

func layout(t *testing.T) flake.Layout {
	l, _ := flake.Preset("snowflake")
	return l
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestHoldersNeverRepeat: several holders on one namespace, some fenced
// and re-acquiring on the way, never issue an id twice, and each call's ids
// strictly increase.
func TestHoldersNeverRepeat(t *testing.T) {
	l := layout(t)
	g := newGranter(t, l)
	ctx := ctxT(t)
	var hs []*holder.Holder
	for i := range 3 {
		h := holder.New(holder.Config{Granter: g, Namespace: "n", Label: "h" + string(rune('0'+i))})
		t.Cleanup(func() { _ = h.Close(context.Background()) })
		hs = append(hs, h)
	}
	seen := map[int64]bool{}
	for round := range 300 {
		if round%50 == 25 {
			// An operator reclaims worker 1: its holder is fenced at its
			// next renewal and acquires anew.
			if r := g.apply(fsm.FlakeOp{Type: fsm.OpReclaim, Namespace: "n", Worker: 1}); r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		for _, h := range hs {
			ids, err := h.Next(ctx, 1+round%40)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			for i, id := range ids {
				if seen[id] {
					t.Fatalf("round %d: id %d issued twice", round, id)
				}
				seen[id] = true
				if i > 0 && id <= ids[i-1] {
					t.Fatalf("round %d: ids not increasing: %v", round, ids)
				}
			}
		}
		if round%10 == 0 {
			time.Sleep(5 * time.Millisecond) // let renewals run between rounds
		}
	}
	if len(seen) == 0 {
		t.Fatal("no ids")
	}
}

// TestHolderIgnoresItsWallClock: the holder's time comes from the grant
// and its own steady clock, so a leader whose time jumps back an hour
// changes nothing, and the ids decode to about the leader's time.
func TestHolderTimeComesFromTheGrant(t *testing.T) {
	l := layout(t)
	g := newGranter(t, l)
	var mono atomic.Int64
	clock := func() time.Duration { return time.Duration(mono.Load()) }
	h := holder.New(holder.Config{Granter: g, Namespace: "n", Clock: clock})
	defer h.Close(context.Background())
	ctx := ctxT(t)
	ids, err := h.Next(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := l.Decode(ids[0])
	if diff := d.UnixMs - g.nowMs.Load(); diff < 0 || diff > 2 {
		t.Fatalf("first id at %d, leader time %d", d.UnixMs, g.nowMs.Load())
	}
	// The leader's clock steps back an hour; the holder's steady clock
	// moves on 50 ms. Ids keep rising, at the time the holder measured.
	g.nowMs.Add(-3_600_000)
	mono.Add(int64(50 * time.Millisecond))
	more, err := h.Next(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if more[0] <= ids[len(ids)-1] {
		t.Fatalf("ids went back: %d after %d", more[0], ids[len(ids)-1])
	}
	d2, _ := l.Decode(more[0])
	if d2.UnixMs-d.UnixMs < 49 || d2.UnixMs-d.UnixMs > 51 { // the first id was one unit above the grant's start
		t.Fatalf("50 ms later the id decodes %d ms later", d2.UnixMs-d.UnixMs)
	}
}

// TestHolderStopsAtLeaseEnd: with the leader unreachable, the holder stops
// issuing once its lease (counted from the last renewal sent) has run out,
// and says so instead of issuing.
func TestHolderStopsAtLeaseEnd(t *testing.T) {
	l := layout(t)
	g := newGranter(t, l)
	var mono atomic.Int64
	clock := func() time.Duration { return time.Duration(mono.Load()) }
	h := holder.New(holder.Config{Granter: g, Namespace: "n", Clock: clock})
	defer h.Close(context.Background())
	ctx := ctxT(t)
	if _, err := h.Next(ctx, 1); err != nil {
		t.Fatal(err)
	}
	g.down.Store(true)
	mono.Add(int64(599 * time.Millisecond)) // within the 600 ms lease
	if _, err := h.Next(ctx, 1); err != nil {
		t.Fatalf("within the lease: %v", err)
	}
	mono.Add(int64(2 * time.Millisecond))
	if ids, err := h.Next(ctx, 1); !errors.Is(err, holder.ErrLeaseLapsed) {
		t.Fatalf("after the lease: %v, %v; want ErrLeaseLapsed", ids, err)
	}
	// It does not pile up workers while the leader is away: the one it
	// holds comes back once a renewal gets through.
	calls := g.calls.Load()
	g.down.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	var ids []int64
	for {
		var err error
		if ids, err = h.Next(ctx, 1); err == nil {
			break
		}
		if !errors.Is(err, holder.ErrLeaseLapsed) || time.Now().After(deadline) {
			t.Fatalf("after the leader came back: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d, _ := l.Decode(ids[0]); d.Worker != 0 {
		t.Fatalf("after the renewal: worker %d, want the renewed 0", d.Worker)
	}
	if ws, _ := g.f.Workers("n"); len(ws) != 1 {
		t.Fatalf("workers %d: the holder acquired more while its lease lapsed", len(ws))
	}
	if g.calls.Load() == calls {
		t.Fatal("no renewal reached the leader")
	}
}

// TestHolderCloseReleases: Close releases the workers. The next holder
// gets a never-used worker while the released one's range is still ahead
// of the clock (it would have to wait for it), and nothing repeats.
func TestHolderCloseReleases(t *testing.T) {
	l := layout(t)
	g := newGranter(t, l)
	ctx := ctxT(t)
	h := holder.New(holder.Config{Granter: g, Namespace: "n"})
	ids, err := h.Next(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Next(ctx, 1); !errors.Is(err, holder.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	h2 := holder.New(holder.Config{Granter: g, Namespace: "n"})
	defer h2.Close(ctx)
	more, err := h2.Next(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := l.Decode(more[0])
	if d.Worker != 1 || more[0] == ids[4] {
		t.Fatalf("after release: worker %d (id %d), want the never-used 1", d.Worker, more[0])
	}
	ws, _ := g.f.Workers("n")
	if len(ws) != 2 || ws[0].Holder != "" || ws[1].Holder != h2.ID() {
		t.Fatalf("workers after release: %+v", ws)
	}
}

// TestHolderDeadlineTooShort: a call for more ids than the lead allows
// within its deadline answers resource_exhausted rather than waiting past
// it.
func TestHolderDeadlineTooShort(t *testing.T) {
	l := flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 1000, TimeBits: 31, WorkerBits: 20, SequenceBits: 4} // 16 ids per second
	g := newGranter(t, l)
	h := holder.New(holder.Config{Granter: g, Namespace: "n", Lead: time.Second})
	defer h.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.Next(ctx, 100); !errors.Is(err, seqd.ErrIDsAhead) {
		t.Fatalf("100 ids at 16 per second within 100 ms: %v", err)
	}
}

// TestHolderNextRunsAndBadCounts: NextRuns answers runs that expand to n
// strictly increasing ids, zero ids is an empty answer, and a negative
// count is invalid_argument at once (it used to spin).
func TestHolderNextRunsAndBadCounts(t *testing.T) {
	g := newGranter(t, layout(t))
	h := holder.New(holder.Config{Granter: g, Namespace: "n"})
	defer h.Close(context.Background())
	ctx := ctxT(t)
	runs, err := h.NextRuns(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	ids := flake.AppendIDs(nil, runs...)
	if len(ids) != 5000 || len(runs) > 3 {
		t.Fatalf("%d ids in %d runs, want 5000 in at most 3", len(ids), len(runs))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("id %d after %d", ids[i], ids[i-1])
		}
	}
	if runs, err := h.NextRuns(ctx, 0); err != nil || len(runs) != 0 {
		t.Fatalf("0 ids: %v, %v", runs, err)
	}
	for _, next := range []func() error{
		func() error { _, err := h.Next(ctx, -1); return err },
		func() error { _, err := h.NextRuns(ctx, -1); return err },
	} {
		if err := next(); !errors.Is(err, seqd.ErrInvalidArgument) {
			t.Fatalf("-1 ids: %v, want invalid argument", err)
		}
	}
}

// TestLeaderClockStepDoesNotReclaim: a leader clock stepping forward (or a
// new leader whose clock is ahead) does not take a worker from a holder
// still within its lease: only a leader's permit (its steady clock watched
// the last renewal stand for two leases) does. Without that, holder b got
// a's worker and a later call to a returned a smaller id (G2).
func TestLeaderClockStepDoesNotReclaim(t *testing.T) {
	l := layout(t)
	g := newGranter(t, l)
	g.leaseMs = 3000
	ctx := ctxT(t)
	a := holder.New(holder.Config{Granter: g, Namespace: "n", Label: "a"})
	defer a.Close(ctx)
	if _, err := a.Next(ctx, 1); err != nil {
		t.Fatal(err)
	}
	g.nowMs.Add(3_600_000) // the leader's clock an hour ahead
	b := holder.New(holder.Config{Granter: g, Namespace: "n", Label: "b", Lead: time.Hour})
	defer b.Close(ctx)
	x, err := b.Next(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	y, err := a.Next(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	dx, _ := l.Decode(x[0])
	dy, _ := l.Decode(y[0])
	if dx.Worker == dy.Worker {
		t.Fatalf("b got a's worker %d on a clock step: %d then %d", dx.Worker, x[0], y[0])
	}
}

// TestHolderExtraWorkerUnavailableWaits: a holder that may hold more
// workers than it has asks for another when its worker is at its lead;
// when none can be had (here, no leader to grant one), the call waits for
// the clock on the worker it holds instead of failing.
func TestHolderExtraWorkerUnavailableWaits(t *testing.T) {
	l := flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 100, TimeBits: 40, WorkerBits: 10, SequenceBits: 4} // 160 ids per second
	g := newGranter(t, l)
	g.leaseMs = 60000 // no renewal within the test
	h := holder.New(holder.Config{Granter: g, Namespace: "n", Workers: 4, Lead: 200 * time.Millisecond})
	defer h.Close(context.Background())
	if _, err := h.Next(ctxT(t), 16); err != nil {
		t.Fatal(err)
	}
	g.down.Store(true)
	// 64 more ids need about 0.4 s of the one worker's units (it runs at
	// most 0.2 s ahead): each call waits for the clock rather than fail.
	var last int64
	for range 4 {
		ids, err := h.Next(ctxT(t), 16)
		if err != nil {
			t.Fatalf("with no leader to grant another worker: %v", err)
		}
		if ids[0] <= last {
			t.Fatalf("ids went back: %d after %d", ids[0], last)
		}
		last = ids[len(ids)-1]
	}
	if st := h.Stats(); st.Workers != 1 {
		t.Fatalf("%d workers held, want 1", st.Workers)
	}
}

// slowGranter is a granter whose Acquire takes a while on the holder's
// clock before the leader stamps its time (a request retried through a
// failover), as the holder's clock sees it.
type slowGranter struct {
	*fsmGranter
	mono  *atomic.Int64
	delay time.Duration
}

func (g slowGranter) Acquire(ctx context.Context, ns, holder, label string) (flake.Grant, error) {
	g.mono.Add(int64(g.delay))
	return g.fsmGranter.Acquire(ctx, ns, holder, label)
}

// TestHolderTimeDoesNotLeadTheLeader: a grant whose request took 3 s
// before the leader stamped it (the answer then came at once) gives ids
// of the leader's time, not 3 s ahead of it: the holder counts the
// leader's time from when the answer arrived, not from when it sent the
// request (the chaos test's G3 found ids seconds ahead of their calls).
func TestHolderTimeDoesNotLeadTheLeader(t *testing.T) {
	l := layout(t)
	var mono atomic.Int64
	g := slowGranter{fsmGranter: newGranter(t, l), mono: &mono, delay: 3 * time.Second}
	g.span = 10_000    // units (ms): room for an id 3 s ahead, had the holder led
	g.leaseMs = 10_000 // the lease, counted from the request, outlasts its 3 s
	clock := func() time.Duration { return time.Duration(mono.Load()) }
	h := holder.New(holder.Config{Granter: g, Namespace: "n", Clock: clock})
	defer h.Close(context.Background())
	ids, err := h.Next(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := l.Decode(ids[0])
	if diff := d.UnixMs - g.nowMs.Load(); diff < 0 || diff > 2 {
		t.Fatalf("the first id decodes %d ms from the leader's time in its grant", diff)
	}
}
