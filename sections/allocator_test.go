package sections_test

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
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/sections"
)

// fsmStore is a single-replica Store over the real FSM and its bbolt file:
// Raise applies the entry directly, as a one-node raft group would after
// commit. It can be told to fail or to block raises, to exercise the
// allocator's error and batching paths.
type fsmStore struct {
	f     *fsm.FSM
	mu    sync.Mutex
	index uint64

	entered   atomic.Int64 // Raise calls begun
	raises    atomic.Int64 // Raise calls past the gate
	marks     atomic.Int64 // marks over all calls
	failWith  atomic.Pointer[error]
	gate      chan struct{} // when non-nil, each Raise waits for a receive
	gateMu    sync.Mutex
	lastMarks []seqd.Mark
}

func newStore(t testing.TB, spaces ...seqd.Space) *fsmStore {
	t.Helper()
	f, err := fsm.Open(filepath.Join(t.TempDir(), "fsm.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	s := &fsmStore{f: f}
	for _, sp := range spaces {
		if err := s.apply(fsm.EncodeCreateSpace(sp)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s *fsmStore) apply(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	resp := s.f.Apply(&raft.Log{Index: s.index, Term: 1, Type: raft.LogCommand, Data: data})
	if err, ok := resp.(error); ok {
		return err
	}
	return nil
}

func (s *fsmStore) Space(name string) (seqd.Space, bool) {
	sp, ok := s.f.Space(name)
	return seqd.Space{Name: sp.Name, Step: sp.Step, SectionSize: sp.SectionSize}, ok
}

func (s *fsmStore) Max(space string, section uint64) uint64 { return s.f.Max(space, section) }

func (s *fsmStore) Raise(ctx context.Context, marks []seqd.Mark) error {
	s.gateMu.Lock()
	gate := s.gate
	s.gateMu.Unlock()
	s.entered.Add(1)
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.raises.Add(1)
	s.marks.Add(int64(len(marks)))
	if p := s.failWith.Load(); p != nil {
		return *p
	}
	fm := make([]seqd.Mark, len(marks))
	for i, m := range marks {
		fm[i] = seqd.Mark{Space: m.Space, Section: m.Section, Max: m.Max}
	}
	s.gateMu.Lock()
	s.lastMarks = append([]seqd.Mark(nil), marks...)
	s.gateMu.Unlock()
	return s.apply(fsm.EncodeRaise(fm))
}

var small = seqd.Space{Name: "small", Step: 10, SectionSize: 100}

// serving returns an allocator that holds a long lease.
func serving(t testing.TB, s sections.Store, opts sections.Options) *sections.Allocator {
	t.Helper()
	a := sections.New(s, opts)
	t.Cleanup(a.Close)
	a.Grant(a.Epoch(), a.Now()+time.Hour)
	return a
}

func next1(t testing.TB, a *sections.Allocator, space string, key uint64) uint64 {
	t.Helper()
	v, err := a.Next(context.Background(), space, []uint64{key})
	if err != nil {
		t.Fatalf("Next(%s, %d): %v", space, key, err)
	}
	return v[0]
}

func TestValuesStartAtOneAndIncreasePerKey(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{})
	for want := uint64(1); want <= 55; want++ {
		if got := next1(t, a, "small", 7); got != want {
			t.Fatalf("value %d: got %d", want, got)
		}
	}
	// Another key in the same section continues from the section's floor (0
	// on a fresh section), independently of key 7.
	if got := next1(t, a, "small", 8); got != 1 {
		t.Fatalf("key 8 first value: got %d, want 1", got)
	}
	// Every value returned is covered by the committed max (C5).
	if m := s.Max("small", 0); m < 55 {
		t.Fatalf("committed max %d below issued value 55", m)
	}
}

func TestNextBatchRepeatedKeyGetsIncreasingValues(t *testing.T) {
	a := serving(t, newStore(t, small), sections.Options{})
	vals, err := a.Next(context.Background(), "small", []uint64{5, 5, 900, 5})
	if err != nil {
		t.Fatal(err)
	}
	if vals[0] != 1 || vals[1] != 2 || vals[3] != 3 || vals[2] != 1 {
		t.Fatalf("got %v, want [1 2 1 3]", vals)
	}
}

func TestReserveIsConsecutiveAndDisjointFromNext(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{})
	next1(t, a, "small", 1) // 1
	first, err := a.Reserve(context.Background(), "small", 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if first != 2 {
		t.Fatalf("Reserve first = %d, want 2", first)
	}
	if got := next1(t, a, "small", 1); got != 1002 {
		t.Fatalf("Next after Reserve = %d, want 1002", got)
	}
	if m := s.Max("small", 0); m < 1002 {
		t.Fatalf("committed max %d does not cover reserved values", m)
	}
	if _, err := a.Reserve(context.Background(), "small", 1, 0); !errors.Is(err, seqd.ErrInvalidArgument) {
		t.Fatalf("Reserve count 0: %v, want ErrInvalidArgument", err)
	}
}

func TestCurrentIsLastIssuedWithoutSideEffects(t *testing.T) {
	a := serving(t, newStore(t, small), sections.Options{})
	for range 3 {
		next1(t, a, "small", 4)
	}
	for range 2 {
		cur, err := a.Current(context.Background(), "small", []uint64{4, 5})
		if err != nil {
			t.Fatal(err)
		}
		if cur[0] != 3 || cur[1] != 0 {
			t.Fatalf("Current = %v, want [3 0]", cur)
		}
	}
	if got := next1(t, a, "small", 4); got != 4 {
		t.Fatalf("Next after Current = %d, want 4", got)
	}
}

func TestUnknownSpaceAndEmptyKeys(t *testing.T) {
	a := serving(t, newStore(t, small), sections.Options{})
	if _, err := a.Next(context.Background(), "nope", []uint64{1}); !errors.Is(err, seqd.ErrUnknownSpace) {
		t.Fatalf("unknown space: %v", err)
	}
	if _, err := a.Next(context.Background(), "small", nil); !errors.Is(err, seqd.ErrInvalidArgument) {
		t.Fatalf("no keys: %v", err)
	}
	if _, err := a.Current(context.Background(), "small", nil); !errors.Is(err, seqd.ErrInvalidArgument) {
		t.Fatalf("no keys: %v", err)
	}
}

func TestNoLeaseNoService(t *testing.T) {
	s := newStore(t, small)
	a := sections.New(s, sections.Options{})
	t.Cleanup(a.Close)
	ctx := context.Background()
	if _, err := a.Next(ctx, "small", []uint64{1}); !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("Next without lease: %v", err)
	}
	if _, err := a.Current(ctx, "small", []uint64{1}); !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("Current without lease: %v", err)
	}
	// A grant from an old epoch is ignored.
	old := a.Epoch()
	a.Revoke()
	a.Grant(old, a.Now()+time.Hour)
	if a.Serving() {
		t.Fatal("a grant of an ended epoch made the allocator serve")
	}
	// A lease runs out by itself.
	a.Grant(a.Epoch(), a.Now()+30*time.Millisecond)
	if _, err := a.Next(ctx, "small", []uint64{1}); err != nil {
		t.Fatalf("Next under lease: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.Serving() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := a.Next(ctx, "small", []uint64{1}); !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("Next after lease expiry: %v", err)
	}
}

func TestRevokeDropsStateAndResumesAboveCommittedMax(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{})
	var last uint64
	for range 23 {
		last = next1(t, a, "small", 9)
	}
	a.Revoke()
	if _, err := a.Next(context.Background(), "small", []uint64{9}); !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("Next after Revoke: %v", err)
	}
	committed := s.Max("small", 0)
	a.Grant(a.Epoch(), a.Now()+time.Hour)
	got := next1(t, a, "small", 9)
	if got <= last || got <= committed {
		t.Fatalf("after revoke: got %d, want above last %d and committed max %d", got, last, committed)
	}
	// A fresh allocator over the same store (a new leader) does the same.
	b := serving(t, s, sections.Options{})
	if v := next1(t, b, "small", 9); v <= got {
		t.Fatalf("new allocator: got %d, want above %d", v, got)
	}
	if v := next1(t, b, "small", 10); v <= got {
		t.Fatalf("new allocator, other key: got %d, want above %d", v, got)
	}
}

func TestRaisesAheadOfNeedOneEntryPerStep(t *testing.T) {
	sp := seqd.Space{Name: "big", Step: 1000, SectionSize: 1 << 20}
	s := newStore(t, sp)
	a := serving(t, s, sections.Options{})
	const n = 10000
	for range n {
		v := next1(t, a, "big", 3)
		if m := s.Max("big", 0); v > m {
			t.Fatalf("value %d above committed max %d", v, m)
		}
	}
	// ~n/step raises are needed; allow one extra for the initial load.
	if r := s.raises.Load(); r > n/1000+1 {
		t.Fatalf("%d raises for %d values at step 1000", r, n)
	}
	// The async raise keeps at least half a step of headroom.
	deadline := time.Now().Add(5 * time.Second)
	for s.Max("big", 0) < n+500 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if m := s.Max("big", 0); m < n+500 {
		t.Fatalf("max %d: no raise ahead of need", m)
	}
}

func TestRaisesOfSeveralSectionsShareOneEntry(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{})
	// Hold raises at a gate so that others queue behind the first.
	gate := make(chan struct{})
	s.gateMu.Lock()
	s.gate = gate
	s.gateMu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, 11)
	take := func(key uint64) {
		defer wg.Done()
		if _, err := a.Next(context.Background(), "small", []uint64{key}); err != nil {
			errs <- err
		}
	}
	wg.Add(1)
	go take(0)
	waitFor(t, func() bool { return s.entered.Load() == 1 })
	for i := uint64(1); i <= 10; i++ {
		wg.Add(1)
		go take(i * 100)
	}
	waitFor(t, func() bool { return a.RaisesQueued() == 10 })
	gate <- struct{}{} // section 0's raise
	gate <- struct{}{} // one entry for the ten queued sections
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if r := s.raises.Load(); r != 2 {
		t.Fatalf("%d raises, want 2 (one for section 0, one batch of 10)", r)
	}
	if m := s.marks.Load(); m != 11 {
		t.Fatalf("%d marks, want 11", m)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestEvictionBoundsKeysAndNeverRepeats(t *testing.T) {
	s := newStore(t, seqd.Space{Name: "ev", Step: 100, SectionSize: 1000})
	a := serving(t, s, sections.Options{MaxKeysPerSection: 8})
	last := map[uint64]uint64{}
	for round := range 5 {
		for k := uint64(0); k < 50; k++ {
			v := next1(t, a, "ev", k)
			if v <= last[k] {
				t.Fatalf("round %d key %d: got %d after %d", round, k, v, last[k])
			}
			last[k] = v
			if h := a.KeysHeld(); h > 8 {
				t.Fatalf("%d keys held, bound is 8", h)
			}
			cur, err := a.Current(context.Background(), "ev", []uint64{0})
			if err != nil {
				t.Fatal(err)
			}
			if cur[0] < last[0] {
				t.Fatalf("Current(0) = %d below issued %d", cur[0], last[0])
			}
		}
	}
}

func TestExhaustionNeverWraps(t *testing.T) {
	s := newStore(t, small)
	if err := s.apply(fsm.EncodeRaise([]seqd.Mark{{Space: "small", Section: 0, Max: seqd.MaxValue - 5}})); err != nil {
		t.Fatal(err)
	}
	a := serving(t, s, sections.Options{})
	ctx := context.Background()
	if _, err := a.Reserve(ctx, "small", 1, 6); !errors.Is(err, seqd.ErrExhausted) {
		t.Fatalf("Reserve past 2^63-1: %v", err)
	}
	var last uint64
	for range 5 {
		last = next1(t, a, "small", 1)
	}
	if last != seqd.MaxValue {
		t.Fatalf("last value %d, want %d", last, uint64(seqd.MaxValue))
	}
	if _, err := a.Next(ctx, "small", []uint64{1}); !errors.Is(err, seqd.ErrExhausted) {
		t.Fatalf("Next past 2^63-1: %v", err)
	}
}

func TestRaiseFailureIsUnavailableThenRecovers(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{})
	boom := errors.New("no quorum")
	s.failWith.Store(&boom)
	if _, err := a.Next(context.Background(), "small", []uint64{1}); !errors.Is(err, seqd.ErrNotServing) {
		t.Fatalf("Next with failing raise: %v", err)
	}
	s.failWith.Store(nil)
	if got := next1(t, a, "small", 1); got != 1 {
		t.Fatalf("after recovery got %d, want 1", got)
	}
}

func TestCancelWhileWaitingForRaise(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{})
	gate := make(chan struct{})
	s.gateMu.Lock()
	s.gate = gate
	s.gateMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := a.Next(ctx, "small", []uint64{1})
		done <- err
	}()
	waitFor(t, func() bool { return a.SectionsHeld() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	close(gate)
	if got := next1(t, a, "small", 1); got < 1 {
		t.Fatalf("got %d", got)
	}
}

func TestConcurrentCallersNeverSeeRepeatsOrDecreases(t *testing.T) {
	s := newStore(t, small)
	a := serving(t, s, sections.Options{MaxKeysPerSection: 4})
	const workers, per = 8, 400
	seen := make([]map[uint64]bool, 6)
	for i := range seen {
		seen[i] = map[uint64]bool{}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := make([]uint64, 6)
			for i := range per {
				k := uint64((w + i) % 6)
				var v uint64
				if i%7 == 0 {
					f, err := a.Reserve(context.Background(), "small", k*30, 3)
					if err != nil {
						t.Error(err)
						return
					}
					v = f + 2
					mu.Lock()
					for x := f; x <= v; x++ {
						if seen[k][x] {
							t.Errorf("key %d value %d twice", k, x)
						}
						seen[k][x] = true
					}
					mu.Unlock()
				} else {
					vals, err := a.Next(context.Background(), "small", []uint64{k * 30})
					if err != nil {
						t.Error(err)
						return
					}
					v = vals[0]
					mu.Lock()
					if seen[k][v] {
						t.Errorf("key %d value %d twice", k, v)
					}
					seen[k][v] = true
					mu.Unlock()
				}
				if v <= last[k] {
					t.Errorf("key %d: %d after %d", k, v, last[k])
				}
				last[k] = v
			}
		}()
	}
	wg.Wait()
}

func BenchmarkNextOneKey(b *testing.B) {
	s := newStore(b, seqd.Space{Name: "b", Step: 10000, SectionSize: 100000})
	a := serving(b, s, sections.Options{})
	ctx := context.Background()
	keys := []uint64{42}
	for b.Loop() {
		if _, err := a.Next(ctx, "b", keys); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextParallelManyKeys(b *testing.B) {
	s := newStore(b, seqd.Space{Name: "b", Step: 10000, SectionSize: 100000})
	a := serving(b, s, sections.Options{})
	ctx := context.Background()
	var n atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		keys := []uint64{0}
		for pb.Next() {
			keys[0] = n.Add(7919) % 1000000
			if _, err := a.Next(ctx, "b", keys); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// An allocator serves only the sections its group owns: a key of another
// group's section fails with ErrNotOwner and raises nothing, whatever the
// call (Next, Reserve, Current), and keys of its own sections are served.
func TestAllocatorRefusesSectionsItDoesNotOwn(t *testing.T) {
	s := newStore(t, seqd.DefaultSpace)
	const groups = 3
	owns := func(space string, section uint64) bool {
		return seqd.SlotGroup(seqd.SlotOf(space, section), groups) == 1
	}
	a := serving(t, s, sections.Options{Owns: owns})
	size := uint64(seqd.DefaultSectionSize)
	var mine, theirs uint64
	for sec := uint64(0); mine == 0 || theirs == 0; sec++ {
		if owns(seqd.DefaultSpaceName, sec) {
			mine = sec*size + 7
		} else {
			theirs = sec*size + 7
		}
	}
	ctx := context.Background()
	if _, err := a.Next(ctx, seqd.DefaultSpaceName, []uint64{theirs}); !errors.Is(err, seqd.ErrNotOwner) {
		t.Fatalf("Next of another group's key: %v, want ErrNotOwner", err)
	}
	if _, err := a.Reserve(ctx, seqd.DefaultSpaceName, theirs, 5); !errors.Is(err, seqd.ErrNotOwner) {
		t.Fatalf("Reserve of another group's key: %v, want ErrNotOwner", err)
	}
	if _, err := a.Current(ctx, seqd.DefaultSpaceName, []uint64{theirs}); !errors.Is(err, seqd.ErrNotOwner) {
		t.Fatalf("Current of another group's key: %v, want ErrNotOwner", err)
	}
	if got := s.f.Max(seqd.DefaultSpaceName, theirs/size); got != 0 {
		t.Fatalf("another group's section was raised to %d", got)
	}
	if v := next1(t, a, seqd.DefaultSpaceName, mine); v != 1 {
		t.Fatalf("own key: first value %d, want 1", v)
	}
}

// After Withhold no Grant renews the lease, not even one of the same epoch
// (a renewal that was committing as the leader withheld), until
// Unwithhold; a Revoke since makes Unwithhold refuse.
func TestWithholdBlocksGrantsUntilUnwithhold(t *testing.T) {
	a := serving(t, newStore(t, seqd.DefaultSpace), sections.Options{})
	epoch := a.Withhold()
	a.Grant(epoch, a.Now()+time.Hour)
	if a.Serving() {
		t.Fatal("a Grant after Withhold renewed the lease")
	}
	if !a.Unwithhold(epoch) {
		t.Fatal("Unwithhold of the current epoch refused")
	}
	a.Grant(epoch, a.Now()+time.Hour)
	if !a.Serving() {
		t.Fatal("a Grant after Unwithhold did not renew the lease")
	}
	epoch = a.Withhold()
	a.Revoke()
	if a.Unwithhold(epoch) {
		t.Fatal("Unwithhold of a revoked epoch accepted")
	}
}
