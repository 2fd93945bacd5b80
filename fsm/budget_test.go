package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// The raise budget: on protocol 5 a section's mark rises no faster than RaiseRatePerUs on
// average (a section idle for long may rise by two windows' worth at once,
// and one raise may run into debt); the budget survives a snapshot and a
// reopen, and the raise clock never goes back.
func TestRaiseBudget(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	sp := seqd.Space{Name: "s", Step: 10, SectionSize: 1}
	a.mustOK(EncodeCreateSpace(sp))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "s", Section: 1, Max: 5}})) // protocol 1: unstamped is fine
	a.mustOK(EncodeClusterGroups("c", budgetProtocol, 1))
	const t0 = int64(1_800_000_000_000) // ms
	window := uint64(RaiseWindow.Microseconds()) * RaiseRatePerUs
	raise := func(nowMs int64, section, to uint64) error {
		return respErr(t, a.apply(EncodeRaiseAt(nowMs, []seqd.Mark{{Space: "s", Section: section, Max: to}})))
	}
	// An idle section rises two windows' worth at once, and one more raise
	// runs into debt; the next is refused until time passes.
	if err := raise(t0, 2, 2*window); err != nil {
		t.Fatal(err)
	}
	if err := raise(t0, 2, 2*window+MaxRaise); err != nil {
		t.Fatalf("one raise into debt: %v", err)
	}
	if err := raise(t0, 2, 2*window+MaxRaise+1); !errors.Is(err, ErrRateLimited) || !errors.Is(err, seqd.ErrRateLimited) {
		t.Fatalf("a raise beyond the budget: %v, want ErrRateLimited", err)
	}
	if got := f.Max("s", 2); got != 2*window+MaxRaise {
		t.Fatalf("a refused raise changed the mark: %d", got)
	}
	// Another section has its own budget.
	if err := raise(t0, 3, 1000); err != nil {
		t.Fatal(err)
	}
	// Once the debt is paid (MaxRaise's cost, about 1,074 s), it rises again.
	later := t0 + raiseCost(MaxRaise)/1000 + 1
	if err := raise(later, 2, 2*window+MaxRaise+1); err != nil {
		t.Fatalf("after the debt was paid: %v", err)
	}
	top := 2*window + 2*MaxRaise + 1
	if err := raise(later, 2, top); err != nil { // into debt again
		t.Fatal(err)
	}
	if err := raise(t0, 4, MaxRaise+1); !errors.Is(err, ErrRaiseTooLarge) {
		t.Fatalf("one raise above MaxRaise: %v", err)
	}
	// A stamp older than the newest: the raise clock keeps the newest. (A
	// leader stamps no earlier than the raise clock; a raw stamp far behind
	// a section's budget is refused like any raise beyond it.)
	if err := raise(later-5_000, 5, 1001); err != nil {
		t.Fatal(err)
	}
	if err := raise(t0-60_000, 3, 1001); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("a stamp a minute behind its section's budget: %v", err)
	}
	if got := f.RaiseClockMs(); got != later {
		t.Fatalf("raise clock %d, want the newest stamp %d", got, later)
	}
	// The budget survives a snapshot install and a reopen.
	data := snapshotBytes(t, f)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if err := raise(later, 2, top+1); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("after a snapshot install the budget was forgotten: %v", err)
	}
	f.Close()
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.RaiseClockMs() != later {
		t.Fatalf("raise clock after reopen: %d", g.RaiseClockMs())
	}
	b := &applier{t: t, f: g, index: a.index}
	if err := respErr(t, b.apply(EncodeRaiseAt(later, []seqd.Mark{{Space: "s", Section: 2, Max: top + 1}}))); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("after a reopen the budget was forgotten: %v", err)
	}
	if c, err := Decode(EncodeRaiseAt(later, []seqd.Mark{{Space: "s", Section: 9, Max: 3}})); err != nil || c.Kind != KindRaiseAt || c.NowMs != later || len(c.Marks) != 1 {
		t.Fatalf("Decode(EncodeRaiseAt) = %+v, %v", c, err)
	}
}

// TimeMargin covers the rate over the time since the backup, four clock
// errors and two windows, and one raise; it refuses a clock that reads
// before the backup.
func TestTimeMargin(t *testing.T) {
	taken := time.Unix(1_800_000_000, 0)
	m, err := TimeMargin(taken, taken.Add(time.Hour), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	us := uint64((time.Hour + 40*time.Minute + 2*RaiseWindow).Microseconds())
	if want := us*RaiseRatePerUs + MaxRaise; m != want {
		t.Fatalf("margin %d, want %d", m, want)
	}
	if _, err := TimeMargin(taken, taken.Add(-11*time.Minute), 10*time.Minute); !errors.Is(err, ErrClockBeforeBackup) {
		t.Fatalf("a clock before the backup: %v", err)
	}
	if _, err := TimeMargin(taken, taken.Add(100*365*24*time.Hour), 10*time.Minute); !errors.Is(err, ErrMarginTooLarge) {
		t.Fatalf("a century later: %v", err)
	}
}

// A section first raised after a restore starts at the restore's floor or
// its space's base, not at 0: its first raise costs what it adds above
// them (a new space in a restored cluster raised no further than a step).
func TestRaiseBudgetCountsFromTheFloor(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "s", Step: 10, SectionSize: 1}))
	a.mustOK(EncodeClusterGroups("c", budgetProtocol, 1))
	f.mu.Lock()
	f.ext.floor = 1 << 60 // as a restore's margin leaves it
	f.mu.Unlock()
	if err := respErr(t, a.apply(EncodeRaiseAt(1_800_000_000_000, []seqd.Mark{{Space: "s", Section: 3, Max: 1<<60 + 20}}))); err != nil {
		t.Fatalf("the first raise of a section above a restore's floor: %v", err)
	}
	if got := f.Max("s", 3); got != 1<<60+20 {
		t.Fatalf("Max %d", got)
	}
}

// Every replica applies a raise its leader applied. A leader of an older
// build (a server downgraded while the group moved to protocol 5) writes
// unstamped raises and applies them, handing out values under them; a
// replica that refused one would keep a lower mark, and the next leader
// would hand those values out again. So an unstamped raise on protocol 5 is
// applied, however large, and charged to its section's budget at the raise
// clock: later stamped raises pay for it.
func TestUnstampedRaiseOnBudgetProtocolIsAppliedAndCharged(t *testing.T) {
	f, _ := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "s", Step: 10, SectionSize: 1}))
	a.mustOK(EncodeClusterGroups("c", budgetProtocol, 1))
	const t0 = int64(1_800_000_000_000) // ms
	a.mustOK(EncodeRaiseAt(t0, []seqd.Mark{{Space: "s", Section: 1, Max: 5}}))
	window := uint64(RaiseWindow.Microseconds()) * RaiseRatePerUs
	// More than a stamped raise may ever rise at once (two windows and
	// MaxRaise): a stamped one would be refused.
	top := 5 + 2*window + MaxRaise + 1000
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "s", Section: 1, Max: top}}))
	if got := f.Max("s", 1); got != top {
		t.Fatalf("mark after the unstamped raise: %d, want %d", got, top)
	}
	raise := func(nowMs int64, to uint64) error {
		return respErr(t, a.apply(EncodeRaiseAt(nowMs, []seqd.Mark{{Space: "s", Section: 1, Max: to}})))
	}
	if err := raise(t0, top+1); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("a stamped raise right after the unstamped one: %v, want ErrRateLimited (its cost was charged)", err)
	}
	paid := t0 + raiseCost(top-5)/1000 + 1
	if err := raise(paid, top+1); err != nil {
		t.Fatalf("a stamped raise once the unstamped one's cost has passed: %v", err)
	}
	// A raise that lowers nothing and a replay stay no-ops.
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "s", Section: 1, Max: 7}}))
	if got := f.Max("s", 1); got != top+1 {
		t.Fatalf("a lower unstamped raise changed the mark: %d", got)
	}
}

// openFormat is the data format the file of f, open, says (0: none).
func openFormat(t *testing.T, f *FSM) uint64 {
	t.Helper()
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	var n uint64
	if err := f.db.View(func(tx *bolt.Tx) error { n = metaFormat(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// A server that promised a protocol (it told a leader it speaks it, for a
// move) holds data that builds of older protocols refuse: from protocol 5
// its file says generationFormat, also after a snapshot of an unmarked
// state is installed, and this build still opens it. A promise of an older
// protocol marks nothing.
func TestAPromisedProtocolKeepsOlderBuildsOut(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "s", Step: 10, SectionSize: 1}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "s", Section: 1, Max: 10}}))
	unmarked := snapshotBytes(t, f)
	if got := openFormat(t, f); got >= generationFormat {
		t.Fatalf("a new file says format %d", got)
	}
	if err := f.PromiseProtocol(budgetProtocol - 1); err != nil {
		t.Fatal(err)
	}
	if got := openFormat(t, f); got >= generationFormat {
		t.Fatalf("a promise of protocol %d marked the file format %d", budgetProtocol-1, got)
	}
	if err := f.PromiseProtocol(budgetProtocol); err != nil {
		t.Fatal(err)
	}
	if got := openFormat(t, f); got != generationFormat {
		t.Fatalf("after a promise of protocol %d the file says format %d, want %d", budgetProtocol, got, generationFormat)
	}
	if err := f.Restore(io.NopCloser(bytes.NewReader(unmarked))); err != nil {
		t.Fatal(err)
	}
	if got := openFormat(t, f); got != generationFormat {
		t.Fatalf("a snapshot installed after the promise left the file at format %d", got)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatalf("this build refuses its own promised file: %v", err)
	}
	defer g.Close()
	if got := g.Max("s", 1); got != 10 {
		t.Fatalf("mark after reopen: %d", got)
	}
}

// A promise outlives the process that made it: a server that told a
// leader it speaks protocol 5 and then restarted on this build still
// holds data older builds refuse after a snapshot of an unmarked state is
// installed. raft installs one at every start (its latest local snapshot,
// taken before the promise) and whenever a leader sends one taken before
// its own promise; the move's entry may reach this server only after
// that, and an operator rolling back then starts an older build on data
// of a cluster on protocol 5.
func TestAPromiseOutlivesARestart(t *testing.T) {
	f, path := openTest(t)
	a := &applier{t: t, f: f}
	a.mustOK(EncodeCreateSpace(seqd.Space{Name: "s", Step: 10, SectionSize: 1}))
	a.mustOK(EncodeRaise([]seqd.Mark{{Space: "s", Section: 1, Max: 10}}))
	unmarked := snapshotBytes(t, f)
	if err := f.PromiseProtocol(budgetProtocol); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path, quietLogger())
	if err != nil {
		t.Fatalf("this build refuses its own promised file: %v", err)
	}
	defer g.Close()
	if got := openFormat(t, g); got != generationFormat {
		t.Fatalf("after a restart the promised file says format %d, want %d", got, generationFormat)
	}
	if err := g.Restore(io.NopCloser(bytes.NewReader(unmarked))); err != nil {
		t.Fatal(err)
	}
	if got := openFormat(t, g); got != generationFormat {
		t.Fatalf("a snapshot installed after a restart left the promised file at format %d, which builds of protocol %d open", got, budgetProtocol-1)
	}
	if got := g.Max("s", 1); got != 10 {
		t.Fatalf("mark after the install: %d", got)
	}
}
