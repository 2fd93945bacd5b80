package fsm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
)

// t0 is a leader time well inside the preset layouts' lifetime.
var t0 = flake.DefaultEpoch.UnixMilli() + 86_400_000

func snowflake() flake.Layout { l, _ := flake.Preset("snowflake"); return l }

// flakeApply applies one KindFlake command and returns its results.
func (a *applier) flake(nowMs int64, ops ...FlakeOp) []FlakeResult {
	a.t.Helper()
	resp := a.apply(EncodeFlake(nowMs, ops))
	r, ok := resp.(*FlakeResponse)
	if !ok || len(r.Results) != len(ops) {
		a.t.Fatalf("Apply answered %#v", resp)
	}
	return r.Results
}

func (a *applier) grant(nowMs int64, op FlakeOp) flake.Grant {
	a.t.Helper()
	r := a.flake(nowMs, op)[0]
	if r.Err != nil {
		a.t.Fatalf("op %+v: %v", op, r.Err)
	}
	return r.Grant
}

func mustFlake(t *testing.T, res []FlakeResult) {
	t.Helper()
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("op %d: %v", i, r.Err)
		}
	}
}

func create(ns string, l flake.Layout) FlakeOp {
	return FlakeOp{Type: OpCreateNamespace, Namespace: ns, Layout: l}
}

func acquire(ns, holder string) FlakeOp {
	return FlakeOp{Type: OpAcquire, Namespace: ns, Holder: holder, Label: "label-" + holder, Span: 1000, LeaseMs: 3000}
}

func renew(g flake.Grant, holder string) FlakeOp {
	return FlakeOp{Type: OpRenew, Namespace: g.Namespace, Worker: g.Worker, Token: g.Token, Holder: holder, Span: 1000, LeaseMs: 3000}
}

func TestFlakeCodecRoundTrip(t *testing.T) {
	ops := []FlakeOp{
		{Type: OpCreateNamespace, Namespace: "orders", Layout: snowflake(), Obfuscation: flake.ObfuscateFF1, KeyCheck: "k1"},
		{Type: OpAcquire, Namespace: "orders", Holder: "h1", Label: "node-1", Span: 30000, LeaseMs: 3000},
		{Type: OpAcquire, Namespace: "orders", Holder: "h2", Span: 1, LeaseMs: 1, Permits: []Permit{{Worker: 3, Token: 4, RenewedIndex: 5}, {Worker: 1 << 30}}},
		{Type: OpRenew, Namespace: "orders", Worker: 7, Token: 9, Holder: "h1", Span: 30000, LeaseMs: 3000},
		{Type: OpRelease, Namespace: "orders", Worker: 7, Token: 9, Holder: "h1"},
		{Type: OpReclaim, Namespace: "orders", Worker: 1 << 20},
		{Type: OpFloor, FloorMs: 1 << 50},
	}
	data := EncodeFlake(t0, ops)
	if Kind(data[0])&KindIgnorable == 0 {
		t.Fatalf("KindFlake %#x is not ignorable", data[0])
	}
	c, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != KindFlake || c.NowMs != t0 || !reflect.DeepEqual(c.Flake, ops) {
		t.Fatalf("Decode = %+v", c)
	}
	if re := encode(c); !bytes.Equal(re, data) {
		t.Fatalf("re-encoded %x, want %x", re, data)
	}
	for i := 1; i < len(data); i++ {
		if _, err := Decode(data[:i]); err == nil {
			t.Fatalf("a command truncated to %d of %d bytes decoded", i, len(data))
		}
	}
	if _, err := Decode(append(EncodeFlake(t0, nil)[:len(EncodeFlake(t0, nil))-1], 1, 99)); err == nil {
		t.Fatal("an unknown flake op decoded")
	}
}

func TestFlakeNamespaces(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	if r := a.flake(t0, create("orders", snowflake())); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	// The same settings again: fine; different settings: refused.
	if r := a.flake(t0, create("orders", snowflake())); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	son, _ := flake.Preset("sonyflake")
	future := snowflake()
	future.EpochMs = t0 + 1
	bad := snowflake()
	bad.TimeBits = 60
	for _, c := range []struct {
		op   FlakeOp
		want error
	}{
		{create("orders", son), seqd.ErrNamespaceExists},
		{FlakeOp{Type: OpCreateNamespace, Namespace: "orders", Layout: snowflake(), Obfuscation: flake.ObfuscateFF1, KeyCheck: "k"}, seqd.ErrNamespaceExists},
		{FlakeOp{Type: OpCreateNamespace, Namespace: "secret", Layout: snowflake(), Obfuscation: flake.ObfuscateFF1}, seqd.ErrInvalidNamespace},
		{FlakeOp{Type: OpCreateNamespace, Namespace: "clear", Layout: snowflake(), KeyCheck: "k"}, seqd.ErrInvalidNamespace},
		{create("Bad Name", snowflake()), seqd.ErrInvalidNamespace},
		{create("wide", bad), seqd.ErrInvalidNamespace},
		{create("later", future), seqd.ErrInvalidNamespace},
		{FlakeOp{Type: OpCreateNamespace, Namespace: "x", Layout: snowflake(), Obfuscation: "rot13"}, seqd.ErrInvalidNamespace},
		{acquire("nope", "h"), seqd.ErrUnknownNamespace},
		{renew(flake.Grant{Namespace: "nope"}, "h"), seqd.ErrUnknownNamespace},
	} {
		if r := a.flake(t0, c.op); !errors.Is(r[0].Err, c.want) {
			t.Errorf("%+v: %v, want %v", c.op, r[0].Err, c.want)
		}
	}
	short := flake.Layout{EpochMs: 0, UnitMs: 1, TimeBits: 20, WorkerBits: 4, SequenceBits: 4}
	if r := a.flake(t0, create("ended", short)); !errors.Is(r[0].Err, seqd.ErrLifetimeOver) {
		t.Errorf("a layout whose life ended: %v", r[0].Err)
	}
	ns := f.Namespaces()
	if len(ns) != 1 || ns[0].Name != "orders" || ns[0].Layout != snowflake() || ns[0].Floor != snowflake().Unit(t0) {
		t.Fatalf("Namespaces() = %+v", ns)
	}
}

// TestFlakeGrantsNeverOverlap is the core rule: whatever the leader's time
// does (steps back, jumps ahead), a worker's new range starts at or above
// everything it was granted before, and the floor never falls.
func TestFlakeGrantsNeverOverlap(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	l := flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 40, WorkerBits: 2, SequenceBits: 4} // 4 workers: reuse is frequent
	mustFlake(t, a.flake(t0, create("n", l)))
	r := rand.New(rand.NewPCG(5, 6))
	now := t0
	type held struct {
		g      flake.Grant
		holder string
	}
	var holders []held
	top := map[uint64]uint64{}    // per worker: the highest hi granted
	tokens := map[uint64]uint64{} // per worker: the last token
	floor := uint64(0)
	for i := range 3000 {
		switch r.IntN(5) {
		case 0:
			now -= r.Int64N(60_000) // the leader's clock steps back
		case 1:
			now += r.Int64N(10_000)
		}
		var op FlakeOp
		switch k := r.IntN(10); {
		case k < 4 || len(holders) == 0:
			op = acquire("n", "h"+string(rune('a'+i%26))+strings.Repeat("x", i%3))
		case k < 8:
			op = renew(holders[r.IntN(len(holders))].g, holders[r.IntN(len(holders))].holder)
		case k < 9:
			h := holders[r.IntN(len(holders))]
			op = FlakeOp{Type: OpRelease, Namespace: "n", Worker: h.g.Worker, Token: h.g.Token, Holder: h.holder}
		default:
			op = FlakeOp{Type: OpReclaim, Namespace: "n", Worker: uint64(r.IntN(4))}
		}
		res := a.flake(now, op)[0]
		if res.Err != nil {
			if !errors.Is(res.Err, seqd.ErrFenced) && !errors.Is(res.Err, seqd.ErrNoWorker) && !errors.Is(res.Err, seqd.ErrInvalidArgument) {
				t.Fatalf("step %d: %+v: %v", i, op, res.Err)
			}
			continue
		}
		g := res.Grant
		switch op.Type {
		case OpAcquire:
			if g.Lo < top[g.Worker] {
				t.Fatalf("step %d: worker %d granted (%d, %d] below its earlier %d", i, g.Worker, g.Lo, g.Hi, top[g.Worker])
			}
			if g.Token <= tokens[g.Worker] {
				t.Fatalf("step %d: token %d after %d", i, g.Token, tokens[g.Worker])
			}
			tokens[g.Worker] = g.Token
			holders = append(holders, held{g, op.Holder})
		case OpRenew:
			if g.Hi < top[g.Worker] || g.Token != tokens[g.Worker] {
				t.Fatalf("step %d: renewal %+v went back from %d (token %d)", i, g, top[g.Worker], tokens[g.Worker])
			}
		}
		if op.Type == OpAcquire || op.Type == OpRenew {
			top[g.Worker] = g.Hi
		}
		ns, _ := f.Namespace("n")
		if ns.Floor < floor {
			t.Fatalf("step %d: floor fell from %d to %d", i, floor, ns.Floor)
		}
		floor = ns.Floor
	}
	ws, _ := f.Workers("n")
	for _, w := range ws {
		if w.HWM != top[w.ID] || len(w.History) == 0 || len(w.History) > historyLen {
			t.Fatalf("worker %+v, want hwm %d", w, top[w.ID])
		}
	}
}

func TestFlakeFencingAndReclaim(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	l := flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 40, WorkerBits: 1, SequenceBits: 4} // 2 workers
	mustFlake(t, a.flake(t0, create("n", l)))
	g1 := a.grant(t0, acquire("n", "one"))
	g2 := a.grant(t0, acquire("n", "two"))
	if g1.Worker != 0 || g2.Worker != 1 || g1.Lo != l.Unit(t0) || g1.Hi != g1.Lo+1000 {
		t.Fatalf("grants %+v %+v", g1, g2)
	}
	if r := a.flake(t0, acquire("n", "three"))[0]; !errors.Is(r.Err, seqd.ErrNoWorker) {
		t.Fatalf("a third holder of 2 workers: %v", r.Err)
	}
	// A renewal extends the same range; the wrong holder or token is fenced.
	g1r := a.grant(t0+500, renew(g1, "one"))
	if g1r.Lo != g1.Lo || g1r.Hi != l.Unit(t0+500)+1000 || g1r.Token != g1.Token {
		t.Fatalf("renewal %+v of %+v", g1r, g1)
	}
	for _, op := range []FlakeOp{renew(g1, "two"), renew(flake.Grant{Namespace: "n", Worker: 0, Token: g1.Token + 1}, "one")} {
		if r := a.flake(t0+500, op)[0]; !errors.Is(r.Err, seqd.ErrFenced) {
			t.Fatalf("%+v: %v, want ErrFenced", op, r.Err)
		}
	}
	// Worker 1's holder stops renewing. However far the leader's clock
	// moves, no acquire takes a held worker without a permit; nor with a
	// permit for an older renewal, or another token. With a valid permit
	// it takes it with a higher token, above everything it was granted,
	// and the old holder is fenced.
	if r := a.flake(t0+3_600_000, acquire("n", "three"))[0]; !errors.Is(r.Err, seqd.ErrNoWorker) {
		t.Fatalf("reclaimed without a permit: %+v", r)
	}
	w1 := must(f.Workers("n"))[1]
	stale := acquire("n", "three")
	stale.Permits = []Permit{{Worker: 1, Token: w1.Token, RenewedIndex: w1.RenewedIndex - 1}, {Worker: 0, Token: 99, RenewedIndex: must(f.Workers("n"))[0].RenewedIndex}}
	if r := a.flake(t0+6000, stale)[0]; !errors.Is(r.Err, seqd.ErrNoWorker) {
		t.Fatalf("reclaimed with a stale permit: %+v", r)
	}
	a.grant(t0+6000, renew(g1r, "one")) // worker 0 stays held
	ok := acquire("n", "three")
	ok.Permits = []Permit{{Worker: 1, Token: w1.Token, RenewedIndex: w1.RenewedIndex}}
	g3 := a.grant(t0+6001, ok)
	if g3.Worker != 1 || g3.Token != g2.Token+1 || g3.Lo < g2.Hi || !g3.Reclaimed || g3.ReclaimedOld != "label-two" {
		t.Fatalf("reclaim %+v after %+v", g3, g2)
	}
	// The same permit again is void: the worker was granted since.
	if r := a.flake(t0+6001, ok)[0]; !errors.Is(r.Err, seqd.ErrNoWorker) {
		t.Fatalf("a permit used twice: %+v", r)
	}
	if r := a.flake(t0+6001, renew(g2, "two"))[0]; !errors.Is(r.Err, seqd.ErrFenced) {
		t.Fatalf("the reclaimed holder renewed: %v", r.Err)
	}
	// Release frees at once; the next grant starts above it.
	if r := a.flake(t0+6002, FlakeOp{Type: OpRelease, Namespace: "n", Worker: 1, Token: g3.Token, Holder: "three"})[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	g4 := a.grant(t0+6003, acquire("n", "four"))
	if g4.Worker != 1 || g4.Lo < g3.Hi || g4.Reclaimed {
		t.Fatalf("after release %+v", g4)
	}
	// An operator's reclaim fences at once.
	if r := a.flake(t0+6004, FlakeOp{Type: OpReclaim, Namespace: "n", Worker: 1})[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := a.flake(t0+6004, renew(g4, "four"))[0]; !errors.Is(r.Err, seqd.ErrFenced) {
		t.Fatalf("renewed after an operator's reclaim: %v", r.Err)
	}
	// ... but the worker is not handed out until a permit for the
	// reclaim itself: the old holder may issue until its lease ends.
	if r := a.flake(t0+3_600_000, acquire("n", "five"))[0]; !errors.Is(r.Err, seqd.ErrNoWorker) {
		t.Fatalf("a reclaimed worker handed out at once: %+v", r)
	}
	if r := a.flake(t0+6005, FlakeOp{Type: OpRelease, Namespace: "n", Worker: 1, Token: g4.Token + 1, Holder: ReclaimedHolder})[0]; !errors.Is(r.Err, seqd.ErrFenced) {
		t.Fatalf("a release in the reclaim's name: %v", r.Err)
	}
	ws, _ := f.Workers("n")
	if h := ws[1].History; len(h) != 3 || h[0].Label != "label-two" || h[2].Label != "label-four" || h[2].Lo != g4.Lo {
		t.Fatalf("history %+v", h)
	}
	five := acquire("n", "five")
	five.Permits = []Permit{{Worker: 1, Token: ws[1].Token, RenewedIndex: ws[1].RenewedIndex}}
	if g5 := a.grant(t0+6006, five); g5.Worker != 1 || g5.Lo < g4.Hi {
		t.Fatalf("after the reclaim's permit: %+v", g5)
	}
}

// TestFlakeBatchAndFailedOps: ops of one entry apply in order; a failed op
// changes nothing and does not stop the others.
func TestFlakeBatchAndFailedOps(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	res := a.flake(t0, create("n", snowflake()), acquire("n", "a"), acquire("missing", "b"), acquire("n", "c"),
		FlakeOp{Type: OpAcquire, Namespace: "n", Holder: "", Span: 1, LeaseMs: 1})
	if res[0].Err != nil || res[1].Err != nil || res[3].Err != nil || res[1].Grant.Worker != 0 || res[3].Grant.Worker != 1 {
		t.Fatalf("results %+v", res)
	}
	if !errors.Is(res[2].Err, seqd.ErrUnknownNamespace) || !errors.Is(res[4].Err, seqd.ErrInvalidArgument) {
		t.Fatalf("failed ops answered %v, %v", res[2].Err, res[4].Err)
	}
	if ws, _ := f.Workers("n"); len(ws) != 2 {
		t.Fatalf("workers %+v", ws)
	}
	// An entry whose ops all fail writes nothing.
	before := f.AppliedIndex()
	a.flake(t0, acquire("missing", "x"))
	if f.AppliedIndex() != before+1 {
		t.Fatalf("applied index %d after %d", f.AppliedIndex(), before)
	}
}

// TestFlakeStateSurvives: namespaces and workers survive a reopen and a
// snapshot restored into another FSM; the file says format 3 once it holds
// them, and a file that holds them but says an older format is refused.
func TestFlakeStateSurvives(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.flake(t0, create("n", snowflake()), FlakeOp{Type: OpCreateNamespace, Namespace: "m", Layout: snowflake(), Obfuscation: flake.ObfuscateFF1Hour, KeyCheck: "k"})
	g := a.grant(t0, acquire("n", "a"))
	a.grant(t0+100, renew(g, "a"))
	a.grant(t0+100, acquire("m", "b"))
	wantNS, wantN := f.Namespaces(), must(f.Workers("n"))
	snap := snapshotBytes(t, f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if !reflect.DeepEqual(re.Namespaces(), wantNS) || !reflect.DeepEqual(must(re.Workers("n")), wantN) {
		t.Fatalf("after reopen: %+v %+v", re.Namespaces(), must(re.Workers("n")))
	}
	other, _ := openTest(t)
	if err := other.Restore(nopCloser{bytes.NewBuffer(snap)}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(other.Namespaces(), wantNS) || !reflect.DeepEqual(must(other.Workers("n")), wantN) {
		t.Fatalf("after restore: %+v", other.Namespaces())
	}
	_ = re.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyFormat); !bytes.Equal(v, u64(flakeFormat)) {
			t.Errorf("format %x, want %d", v, flakeFormat)
		}
		return tx.Bucket(bucketMeta).Put(keyFormat, u64(2))
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if _, err := Open(path, quietLogger()); err == nil || !strings.Contains(err.Error(), "flake state") {
		t.Fatalf("a format 2 file with flake state opened: %v", err)
	}
}

func must[T any](v T, ok bool) T {
	if !ok {
		panic("missing")
	}
	return v
}

// TestFlakeLaterLeaseWritesKeepFormat3: the format-2 writes (cluster,
// lease) after flake state do not lower the file's format.
func TestFlakeLaterLeaseWritesKeepFormat3(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	mustFlake(t, a.flake(t0, create("n", snowflake())))
	a.mustOK(EncodeCluster("abc", 3))
	a.mustOK(EncodeLease(3e9, 3e8))
	_ = f.Close()
	if _, err := Open(path, quietLogger()); err != nil {
		t.Fatalf("reopen after lease and cluster writes: %v", err)
	}
}

// TestFlakeRestoreFloor: a backup with flake namespaces restores only with
// a time floor above its highest grant; the restored namespaces start at
// the floor and the old holders are fenced.
func TestFlakeRestoreFloor(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(filepath.Join(dir, "fsm.db"), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &applier{t: t, f: f}
	mustFlake(t, a.flake(t0, create("n", snowflake())))
	g := a.grant(t0, acquire("n", "old"))
	var buf bytes.Buffer
	if _, err := f.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	highest := snowflake().UnitStart(g.Hi + 1)
	for _, floor := range []int64{0, highest - 1, highest} {
		if _, err := PrepareRestore(path, RestoreOptions{Margin: 10, ClusterID: "new", FlakeFloorMs: floor}); !errors.Is(err, ErrFlakeFloor) {
			t.Fatalf("floor %d (highest %d): %v, want ErrFlakeFloor", floor, highest, err)
		}
	}
	floor := highest + 3_600_000
	sum, err := PrepareRestore(path, RestoreOptions{Margin: 10, ClusterID: "new", FlakeFloorMs: floor})
	if err != nil {
		t.Fatal(err)
	}
	if sum.FlakeNamespaces != 1 || sum.FlakeHighestMs != highest {
		t.Fatalf("summary %+v", sum)
	}
	r, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ns, _ := r.Namespace("n")
	if ns.Floor != snowflake().Unit(floor) {
		t.Fatalf("restored floor %d, want %d", ns.Floor, snowflake().Unit(floor))
	}
	ra := &applier{t: t, f: r, index: 100}
	if res := ra.flake(t0, renew(g, "old"))[0]; !errors.Is(res.Err, seqd.ErrFenced) {
		t.Fatalf("the old cluster's holder renewed: %v", res.Err)
	}
	ng := ra.grant(t0, acquire("n", "new"))
	if ng.Worker != 0 || ng.Lo < snowflake().Unit(floor) {
		t.Fatalf("grant after restore %+v, floor unit %d", ng, snowflake().Unit(floor))
	}
}

// TestFlakeAcquirePrefersWorkersThatStartNow: a worker released with its
// range still ahead of the floor is not handed out while a never-used one
// can start at the floor; once time passes its hwm, it is reused before
// new ones, lowest hwm first.
func TestFlakeAcquirePrefersWorkersThatStartNow(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	mustFlake(t, a.flake(t0, create("n", snowflake())))
	g0 := a.grant(t0, acquire("n", "a")) // range 1000 units ahead
	if r := a.flake(t0, FlakeOp{Type: OpRelease, Namespace: "n", Worker: 0, Token: g0.Token, Holder: "a"})[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	g1 := a.grant(t0+1, acquire("n", "b"))
	if g1.Worker != 1 || g1.Lo != snowflake().Unit(t0+1) {
		t.Fatalf("while worker 0's range is ahead: %+v", g1)
	}
	later := snowflake().UnitStart(g0.Hi) + 1
	g2 := a.grant(later, acquire("n", "c"))
	if g2.Worker != 0 || g2.Lo != snowflake().Unit(later) {
		t.Fatalf("after worker 0's range passed: %+v", g2)
	}
}

// TestFlakeGrantTimeNeverBehindTheFloor: after the leader's clock steps
// back, a grant tells its holder the floor's time (where its range
// starts), not the leader's, so a new holder does not wait for the step.
func TestFlakeGrantTimeNeverBehindTheFloor(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	mustFlake(t, a.flake(t0, create("n", snowflake())))
	a.grant(t0, acquire("n", "a"))
	g := a.grant(t0-3_600_000, acquire("n", "b"))
	if g.LeaderMs != snowflake().UnitStart(snowflake().Unit(t0)) || g.Lo != snowflake().Unit(t0) {
		t.Fatalf("grant after a step back: %+v, want the floor's time %d", g, t0)
	}
	// A failed acquire changes nothing, not even the floor.
	tiny := flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 40, WorkerBits: 1, SequenceBits: 4}
	mustFlake(t, a.flake(t0, create("tiny", tiny)))
	a.grant(t0, acquire("tiny", "a"))
	a.grant(t0, acquire("tiny", "b"))
	before, _ := f.Namespace("tiny")
	if r := a.flake(t0+5_000_000, acquire("tiny", "c"))[0]; !errors.Is(r.Err, seqd.ErrNoWorker) {
		t.Fatalf("a third worker of two: %v", r.Err)
	}
	if after, _ := f.Namespace("tiny"); after != before {
		t.Fatalf("a failed acquire moved the namespace from %+v to %+v", before, after)
	}
}

// TestFlakeRestoreFloorWithoutNamespaces: the restore's time floor holds
// for namespaces created after the backup too (the old cluster may have
// served flake ids the backup does not know of).
func TestFlakeRestoreFloorWithoutNamespaces(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(filepath.Join(dir, "fsm.db"), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := f.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	floor := t0 + 3_600_000
	if _, err := PrepareRestore(path, RestoreOptions{Margin: 10, ClusterID: "new", FlakeFloorMs: floor}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.FlakeFloorMs() != floor {
		t.Fatalf("restored floor %d, want %d", r.FlakeFloorMs(), floor)
	}
	ra := &applier{t: t, f: r, index: 100}
	mustFlake(t, ra.flake(t0, create("n", snowflake())))
	if g := ra.grant(t0, acquire("n", "new")); g.Lo < snowflake().Unit(floor) {
		t.Fatalf("grant %+v starts below the restore floor unit %d", g, snowflake().Unit(floor))
	}
}

// TestFlakeUnsafeTrustClock shows what the hwm and floor rule buys: with
// the leader's clock stepped back, a worker reused by a new holder
// gets a range overlapping its previous holder's only when the unsafe
// trust-clock option (a naive Snowflake) is on.
func TestFlakeUnsafeTrustClock(t *testing.T) {
	const back = 500 // ms, within a range of 1000 units of 1 ms
	for _, trust := range []bool{false, true} {
		f, _ := openTest(t)
		f.SetUnsafeFlakeTrustClock(trust)
		a := &applier{t: t, f: f}
		l := flake.Layout{EpochMs: flake.DefaultEpoch.UnixMilli(), UnitMs: 1, TimeBits: 41, WorkerBits: 1, SequenceBits: 12}
		mustFlake(t, a.flake(t0, create("n", l)))
		release := func(g flake.Grant, holder string) {
			t.Helper()
			mustFlake(t, a.flake(t0, FlakeOp{Type: OpRelease, Namespace: "n", Worker: g.Worker, Token: g.Token, Holder: holder}))
		}
		// Both workers used and released; then a holder acquires with the
		// leader's clock behind and gets the least advanced one.
		g1 := a.grant(t0, acquire("n", "one"))
		release(g1, "one")
		g2 := a.grant(t0, acquire("n", "two"))
		release(g2, "two")
		if g1.Worker == g2.Worker {
			t.Fatalf("trust %v: both holders got worker %d, want the unused one second", trust, g1.Worker)
		}
		g3 := a.grant(t0-back, acquire("n", "three"))
		prev := g1
		if g3.Worker == g2.Worker {
			prev = g2
		}
		overlap := g3.Lo < prev.Hi && prev.Lo < g3.Hi
		if overlap != trust {
			t.Errorf("trust %v: worker %d granted (%d, %d] after (%d, %d]: overlap %v", trust, g3.Worker, g3.Lo, g3.Hi, prev.Lo, prev.Hi, overlap)
		}
		if trust && (g3.Lo != l.Unit(t0-back) || g3.LeaderMs != t0-back) {
			t.Errorf("trust: grant starts at unit %d with time %d, want the leader's %d and %d", g3.Lo, g3.LeaderMs, l.Unit(t0-back), t0-back)
		}
		// A renewal with the clock still behind extends from the leader's
		// time too (trust), or from the worker's mark (not).
		r := a.grant(t0-back+100, renew(g3, "three"))
		if back := r.Hi < prev.Hi; back != trust {
			t.Errorf("trust %v: renewal ends at %d, the previous holder's range at %d", trust, r.Hi, prev.Hi)
		}
	}
}

// TestFlakeGrantIsTheHoldersGrant: an acquire's and a renewal's grant is
// the one its holder uses as it is: the namespace's layout (fields and
// all), the leader's time, and the lease the op asked for.
func TestFlakeGrantIsTheHoldersGrant(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	l, _ := flake.Preset("instagram")
	mustFlake(t, a.flake(t0, create("n", l)))
	op := acquire("n", "a")
	op.LeaseMs = 7000
	g := a.grant(t0, op)
	if g.Layout != l || g.LeaseMs != 7000 || g.LeaderMs != t0 || g.Namespace != "n" {
		t.Fatalf("acquire's grant %+v, want layout %v, lease 7000, time %d", g, l, t0)
	}
	r := a.grant(t0+5, FlakeOp{Type: OpRenew, Namespace: "n", Worker: g.Worker, Token: g.Token, Holder: "a", Span: 100, LeaseMs: 9000})
	if r.Layout != l || r.LeaseMs != 9000 || r.LeaderMs != t0+5 || r.Token != g.Token || r.Lo != g.Lo {
		t.Fatalf("renewal's grant %+v after %+v", r, g)
	}
}
