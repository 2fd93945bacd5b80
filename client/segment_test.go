package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// oneNode starts a one-node cluster and returns a client of it and a
// context for the test's calls.
func oneNode(t *testing.T) (*client.Client, context.Context) {
	t.Helper()
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return cl, ctx
}

// TestSegmentSizing: against a real cluster, a segment's ranges double
// while they last less than the target, up to Max, and halve once one
// lasted twice the target, down to Min; its values are the ranges',
// consecutive and increasing.
func TestSegmentSizing(t *testing.T) {
	cl, ctx := oneNode(t)
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	s := cl.Segment("", 42, client.SegmentOptions{Initial: 10, Min: 5, Max: 80, Target: time.Minute, Prefetch: 0.5})
	defer s.Close()
	client.SetSegmentClock(s, clock.Now)
	var last uint64
	take := func() {
		t.Helper()
		v, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v <= last {
			t.Fatalf("value %d after %d", v, last)
		}
		last = v
	}
	// reserve lets the clock run d, then takes values one at a time until
	// the segment made its next reservation, and returns that
	// reservation's size (the sizing rule's answer for a range that
	// lasted d).
	reserve := func(d time.Duration) uint32 {
		t.Helper()
		clock.Add(d)
		before := s.Stats().Reservations
		for s.Stats().Reservations == before {
			take()
			time.Sleep(2 * time.Millisecond) // the reservation runs in the background
		}
		return s.Stats().NextSize
	}
	take() // the first range: Initial
	if got := s.Stats().NextSize; got != 10 {
		t.Fatalf("first range %d, want Initial 10", got)
	}
	for i, st := range []struct {
		d    time.Duration
		want uint32
	}{
		{time.Second, 20}, {time.Second, 40}, {time.Second, 80}, {time.Second, 80}, // doubled, up to Max
		{90 * time.Second, 80},                                                        // between the target and twice it: kept
		{2 * time.Minute, 40}, {3 * time.Minute, 20}, {time.Hour, 10}, {time.Hour, 5}, // halved, down to Min
		{time.Hour, 5},
	} {
		if got := reserve(st.d); got != st.want {
			t.Fatalf("reservation %d, after %v: %d values, want %d", i+2, st.d, got, st.want)
		}
	}
}

// TestSegmentConcurrent: 64 goroutines on one segment get distinct values,
// each goroutine's increasing, and the segment hands out exactly what they
// took.
func TestSegmentConcurrent(t *testing.T) {
	cl, ctx := oneNode(t)
	s := cl.Segment("", 7, client.SegmentOptions{Initial: 100, Max: 5000})
	defer s.Close()
	const goroutines, each = 64, 2000
	got := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if i%10 == 0 {
					vs, err := s.NextN(ctx, 3)
					if err != nil {
						t.Error(err)
						return
					}
					got[g] = append(got[g], vs...)
					continue
				}
				v, err := s.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], v)
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	total := 0
	for g, vs := range got {
		for i, v := range vs {
			if seen[v] {
				t.Fatalf("value %d twice", v)
			}
			seen[v] = true
			if i > 0 && v <= vs[i-1] {
				t.Fatalf("goroutine %d: %d after %d", g, v, vs[i-1])
			}
		}
		total += len(vs)
	}
	if st := s.Stats(); st.Issued != uint64(total) {
		t.Fatalf("Issued %d, handed out %d", st.Issued, total)
	}
	// Close: the values in hand are skipped.
	v, _ := s.Next(ctx)
	s.Close()
	if _, err := s.Next(ctx); !errors.Is(err, client.ErrSegmentClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	s2 := cl.Segment("", 7, client.SegmentOptions{Initial: 100})
	defer s2.Close()
	if w, err := s2.Next(ctx); err != nil || w <= v {
		t.Fatalf("a new segment's first value %d (%v), after %d", w, err, v)
	}
}

// TestSegmentsUnderLeaderKills: many segments of one key, in parallel,
// while the leader is killed and restarted again and again, never hand
// out a value twice; each segment's values increase.
func TestSegmentsUnderLeaderKills(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	cl, err := client.New(c.APIAddrs(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const segments = 16
	var (
		mu   sync.Mutex
		seen = map[uint64]int{}
		ok   atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range segments {
		wg.Go(func() {
			s := cl.Segment("", uint64(i%2), client.SegmentOptions{Initial: 20, Min: 20, Max: 20, Prefetch: 0.5, FetchTimeout: time.Second})
			defer s.Close()
			var last uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				v, err := s.Next(ctx)
				cancel()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // unavailable while a leader is elected
					continue
				}
				if v <= last {
					t.Errorf("segment %d: %d after %d", i, v, last)
				}
				last = v
				mu.Lock()
				if other, dup := seen[v*2+uint64(i%2)]; dup {
					t.Errorf("key %d: value %d from segments %d and %d", i%2, v, other, i)
				}
				seen[v*2+uint64(i%2)] = i
				mu.Unlock()
				ok.Add(1)
			}
		})
	}
	for round := range 3 {
		before := ok.Load()
		waitFor(t, "values before a kill", 20*time.Second, func() bool { return ok.Load() > before+2000 })
		l := c.WaitServingLeader(20 * time.Second)
		t.Logf("round %d: killing the leader %s after %d values", round, l.ID, ok.Load())
		l.Kill()
		c.WaitServingLeader(20*time.Second, l)
		l.Restart()
	}
	before := ok.Load()
	waitFor(t, "values after the last kill", 20*time.Second, func() bool { return ok.Load() > before+2000 })
	close(stop)
	wg.Wait()
	t.Logf("%d values from %d segments, no value twice", ok.Load(), segments)
}
