package testcluster

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/internal/history"
)

// NextLoad is callers taking one value at a time of a key of a set given,
// each through one of several routes (a server, a client), into one
// history; failed calls are counted by code. Check ends it and checks the
// history (internal/history: no value twice, no value below one of a call
// that ended before the call began).
type NextLoad struct {
	rec  *history.Recorder
	stop context.CancelFunc
	wg   sync.WaitGroup
	ok   []atomic.Int64 // successful calls per route

	mu    sync.Mutex
	codes map[connect.Code]int
}

// StartNextLoad starts callers; caller w takes values through route
// w % routes with next, each call bounded by timeout. It runs until Check
// or the end of the test.
func StartNextLoad(t testing.TB, keys []uint64, callers, routes int, timeout time.Duration,
	next func(ctx context.Context, route int, key uint64) (uint64, error)) *NextLoad {
	l := &NextLoad{rec: history.NewRecorder(), ok: make([]atomic.Int64, routes), codes: map[connect.Code]int{}}
	ctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	for w := range callers {
		l.wg.Go(func() {
			route := w % routes
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for ctx.Err() == nil {
				k := keys[rng.IntN(len(keys))]
				op := history.Op{Key: k, Client: fmt.Sprintf("w%d/%d", w, route)}
				cctx, cancel := context.WithTimeout(ctx, timeout)
				op.Start = l.rec.Now()
				v, err := next(cctx, route, k)
				op.End = l.rec.Now()
				cancel()
				if err != nil {
					if ctx.Err() != nil {
						return // stopped: the call's error is the stop's
					}
					l.mu.Lock()
					l.codes[connect.CodeOf(err)]++
					l.mu.Unlock()
					time.Sleep(2 * time.Millisecond)
					continue
				}
				op.First, op.Last = v, v
				l.rec.Add(op)
				l.ok[route].Add(1)
			}
		})
	}
	t.Cleanup(func() { stop(); l.wg.Wait() })
	return l
}

// OK returns the successful calls so far.
func (l *NextLoad) OK() (n int64) {
	for i := range l.ok {
		n += l.ok[i].Load()
	}
	return n
}

// OKVia returns the successful calls so far through route.
func (l *NextLoad) OKVia(route int) int64 { return l.ok[route].Load() }

// Codes returns the failed calls so far by code.
func (l *NextLoad) Codes() map[connect.Code]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.codes)
}

// WaitOK waits until n more calls succeeded.
func (l *NextLoad) WaitOK(t testing.TB, n int64, what string) {
	t.Helper()
	want := l.OK() + n
	deadline := time.Now().Add(20 * time.Second)
	for l.OK() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d more calls did not succeed in 20s (errors %v)", what, n, l.Codes())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Check stops the load and fails the test on an anomaly of the history, a
// failed call with a code not in allowed, or fewer than min successful
// calls.
func (l *NextLoad) Check(t testing.TB, min int, allowed ...connect.Code) {
	t.Helper()
	l.stop()
	l.wg.Wait()
	ops := l.rec.Ops()
	an := history.Check(ops, 10)
	for _, a := range an {
		t.Errorf("%s: %v", a, a.Ops)
	}
	codes := l.Codes()
	for code, n := range codes {
		if !slices.Contains(allowed, code) {
			t.Errorf("%d calls failed with %v, want only %v", n, code, allowed)
		}
	}
	if len(ops) < min {
		t.Errorf("only %d calls succeeded, want at least %d (errors %v)", len(ops), min, codes)
	}
	t.Logf("%d calls, %d anomalies, errors %v", len(ops), len(an), codes)
}
