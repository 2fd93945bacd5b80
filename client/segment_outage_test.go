package client_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/proctest"
)

// TestSegmentRidesOutAnOutage stops every server of a real 3-process
// cluster (SIGSTOP) for longer than a range lasts at the rate values are
// taken: the segment keeps issuing from the values in hand (the range in
// use and the prefetched one), as many as it had, then fails cleanly with
// unavailable while the cluster stays stopped, and issues again once the
// servers continue (SIGCONT); no value is repeated or goes backwards.
func TestSegmentRidesOutAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs seqd processes for about half a minute")
	}
	ps := proctest.Start(t, 3, "--lease", "500ms", "--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms",
		"--raft-leader-lease-timeout", "150ms")
	proctest.WaitHealthy(t, ps, 60*time.Second)
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.API)
	}
	cl, err := client.New(addrs, client.Options{AttemptTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const rangeSize = 3000
	s := cl.Segment("", 1, client.SegmentOptions{Initial: rangeSize, Min: rangeSize, Max: rangeSize, FetchTimeout: 500 * time.Millisecond, RetryEvery: 100 * time.Millisecond})
	defer s.Close()

	// One caller takes 20 values every 10 ms (about 2000 a second) and
	// records what it got and when its calls failed.
	type event struct {
		at   time.Time
		vals []uint64
		err  error
		took time.Duration
	}
	var (
		mu     sync.Mutex
		events []event
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			start := time.Now()
			vs, err := s.NextN(ctx, 20)
			cancel()
			mu.Lock()
			events = append(events, event{at: time.Now(), vals: vs, err: err, took: time.Since(start)})
			mu.Unlock()
		}
	}()
	snapshot := func() []event {
		mu.Lock()
		defer mu.Unlock()
		return append([]event(nil), events...)
	}
	waitFor(t, "the segment's first ranges", 30*time.Second, func() bool {
		st := s.Stats()
		return st.Issued > 2*rangeSize && st.Prefetched
	})
	time.Sleep(1100 * time.Millisecond) // a rate over a full second
	before := s.Stats()
	for _, p := range ps {
		p.Signal(syscall.SIGSTOP)
	}
	stopped := time.Now()
	at := s.Stats()
	t.Logf("stopped every server: %d values in hand, %.0f values/s, expected to last %v (next size %d)", at.InHand, at.Rate, at.Lasts, at.NextSize)
	if before.Lasts <= 0 || at.InHand < rangeSize {
		t.Fatalf("before the outage: %+v; at it: %+v", before, at)
	}

	// The values in hand are handed out, then calls fail, unavailable.
	waitFor(t, "a call failing once the values in hand are spent", at.Lasts+10*time.Second, func() bool {
		for _, e := range snapshot() {
			if e.err != nil && e.at.After(stopped) {
				return true
			}
		}
		return false
	})
	hold := time.Until(stopped.Add(max(5*time.Second, 2*at.Lasts))) // longer than a range lasts: 1.5 s at 2000/s
	time.Sleep(hold)
	var during uint64
	var firstFail time.Time
	fails := 0
	for _, e := range snapshot() {
		if !e.at.After(stopped) {
			continue
		}
		if e.err != nil {
			if connect.CodeOf(e.err) != connect.CodeUnavailable {
				t.Fatalf("a call failed with %v during the outage, want unavailable", e.err)
			}
			if e.took > 700*time.Millisecond {
				t.Fatalf("a failing call took %v: it must fail at once once a reservation failed", e.took)
			}
			if firstFail.IsZero() {
				firstFail = e.at
			}
			fails++
			continue
		}
		if !firstFail.IsZero() {
			t.Fatalf("a call succeeded at %v with every server stopped, after one failed at %v", e.at.Sub(stopped), firstFail.Sub(stopped))
		}
		during += uint64(len(e.vals))
	}
	rode := firstFail.Sub(stopped)
	t.Logf("rode out %v issuing %d values (had %d in hand, expected %v); then %d calls failed unavailable", rode, during, at.InHand, at.Lasts, fails)
	// Everything in hand is handed out (the caller takes 20 at a time;
	// a call that straddles the end takes what is left, then fails).
	if during+20 < at.InHand || during > at.InHand+20 {
		t.Fatalf("issued %d values during the outage, had %d in hand", during, at.InHand)
	}
	if fails < 10 {
		t.Fatalf("only %d calls failed while the cluster was stopped", fails)
	}

	for _, p := range ps {
		p.Signal(syscall.SIGCONT)
	}
	resumed := time.Now()
	waitFor(t, "issuing again after the servers continue", 30*time.Second, func() bool {
		evs := snapshot()
		return len(evs) > 0 && evs[len(evs)-1].err == nil && evs[len(evs)-1].at.After(resumed)
	})
	t.Logf("issuing again %v after SIGCONT", time.Since(resumed).Round(10*time.Millisecond))
	close(stop)
	<-done
	var last uint64
	seen := map[uint64]bool{}
	for _, e := range snapshot() {
		for _, v := range e.vals {
			if seen[v] || v <= last {
				t.Fatalf("value %d after %d (repeated: %v)", v, last, seen[v])
			}
			seen[v], last = true, v
		}
	}
}
