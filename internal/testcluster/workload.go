package testcluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/history"
)

// Workload runs concurrent clients against API addresses and records every
// successful operation in a history. Smart clients use package client (all
// addresses, leader tracking, retries); pinned clients call one node each
// with no retries, as Jepsen's clients do, which is what exposes a deposed
// leader that still answers.
type Workload struct {
	Space string
	Keys  uint64 // keys are 0..Keys-1

	rec    *history.Recorder
	ok     atomic.Int64
	failed atomic.Int64
	// badOrder counts calls where a key listed twice did not get increasing values.
	badOrder atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

// caller is the operations a workload client needs.
type caller interface {
	next(ctx context.Context, space string, keys []uint64) ([]uint64, error)
	reserve(ctx context.Context, space string, key uint64, count uint32) (uint64, error)
	current(ctx context.Context, space string, keys []uint64) ([]uint64, error)
}

type smart struct{ c *client.Client }

func (s smart) next(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	return s.c.Next(ctx, space, keys...)
}
func (s smart) reserve(ctx context.Context, space string, key uint64, n uint32) (uint64, error) {
	return s.c.Reserve(ctx, space, key, n)
}
func (s smart) current(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	return s.c.Current(ctx, space, keys...)
}

type pinned struct {
	c seqv1connect.SequenceServiceClient
}

func (p pinned) next(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	r, err := p.c.Next(ctx, connect.NewRequest(&seqv1.NextRequest{Space: space, Keys: keys}))
	if err != nil {
		return nil, err
	}
	return r.Msg.GetValues(), nil
}
func (p pinned) reserve(ctx context.Context, space string, key uint64, n uint32) (uint64, error) {
	r, err := p.c.Reserve(ctx, connect.NewRequest(&seqv1.ReserveRequest{Space: space, Key: key, Count: n}))
	if err != nil {
		return 0, err
	}
	return r.Msg.GetFirst(), nil
}
func (p pinned) current(ctx context.Context, space string, keys []uint64) ([]uint64, error) {
	r, err := p.c.Current(ctx, connect.NewRequest(&seqv1.CurrentRequest{Space: space, Keys: keys}))
	if err != nil {
		return nil, err
	}
	return r.Msg.GetValues(), nil
}

// StartWorkload starts smartClients clients over all addrs and two pinned
// clients per address. It runs until Stop.
func StartWorkload(t testing.TB, space string, keys uint64, addrs []string, smartClients int) *Workload {
	t.Helper()
	w := startSmart(t, space, keys, addrs, smartClients, 3*time.Second)
	// Pinned clients give up after a second, so that during a pause of
	// their node they keep sending new calls, which the node answers when it
	// resumes: the case the leader lease exists for.
	h := &http.Client{Timeout: time.Second}
	for i, a := range addrs {
		for j := range 2 {
			w.run(fmt.Sprintf("pinned-%d.%d", i, j), pinned{seqv1connect.NewSequenceServiceClient(h, "http://"+a)}, uint64(100+10*i+j))
		}
	}
	t.Cleanup(w.Stop)
	return w
}

// StartSmartWorkload starts only clients of package client, over all addrs,
// with the client's default retry budget: what an application sees.
func StartSmartWorkload(t testing.TB, space string, keys uint64, addrs []string, clients int) *Workload {
	t.Helper()
	w := startSmart(t, space, keys, addrs, clients, 0)
	t.Cleanup(w.Stop)
	return w
}

func startSmart(t testing.TB, space string, keys uint64, addrs []string, n int, retryFor time.Duration) *Workload {
	t.Helper()
	w := &Workload{Space: space, Keys: keys, rec: history.NewRecorder(), stop: make(chan struct{})}
	for i := range n {
		c, err := client.New(addrs, client.Options{RetryFor: retryFor})
		if err != nil {
			t.Fatal(err)
		}
		w.run(fmt.Sprintf("smart%d", i), smart{c}, uint64(i))
	}
	return w
}

func (w *Workload) run(name string, c caller, seed uint64) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		rng := rand.New(rand.NewPCG(seed, 7))
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			w.one(name, c, rng)
		}
	}()
}

func (w *Workload) one(name string, c caller, rng *rand.Rand) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k := rng.Uint64N(w.Keys)
	start := w.rec.Now()
	var err error
	switch p := rng.IntN(100); {
	case p < 45:
		var v []uint64
		if v, err = c.next(ctx, w.Space, []uint64{k}); err == nil {
			w.rec.Add(history.Op{Kind: history.Take, Key: k, First: v[0], Last: v[0], Start: start, End: w.rec.Now(), Client: name})
		}
	case p < 60:
		keys := []uint64{k, rng.Uint64N(w.Keys), k}
		var v []uint64
		if v, err = c.next(ctx, w.Space, keys); err == nil {
			end := w.rec.Now()
			if v[0] >= v[2] {
				w.badOrder.Add(1) // a key listed twice must get two increasing values
			}
			for i, key := range keys {
				w.rec.Add(history.Op{Kind: history.Take, Key: key, First: v[i], Last: v[i], Start: start, End: end, Client: name})
			}
		}
	case p < 75:
		n := uint32(1 + rng.IntN(50))
		var first uint64
		if first, err = c.reserve(ctx, w.Space, k, n); err == nil {
			w.rec.Add(history.Op{Kind: history.Take, Key: k, First: first, Last: first + uint64(n) - 1, Start: start, End: w.rec.Now(), Client: name})
		}
	default:
		keys := []uint64{k, (k + 1) % w.Keys}
		var v []uint64
		if v, err = c.current(ctx, w.Space, keys); err == nil {
			end := w.rec.Now()
			for i, key := range keys {
				w.rec.Add(history.Op{Kind: history.Read, Key: key, First: v[i], Last: v[i], Start: start, End: end, Client: name})
			}
		}
	}
	if err != nil {
		w.failed.Add(1)
		// Do not spin on a node that is down.
		time.Sleep(time.Duration(1+rng.IntN(10)) * time.Millisecond)
		return
	}
	w.ok.Add(1)
}

// Stop stops the clients and waits for them.
func (w *Workload) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// OK returns the number of successful calls so far.
func (w *Workload) OK() int64 { return w.ok.Load() }

// Failed returns the number of failed calls so far.
func (w *Workload) Failed() int64 { return w.failed.Load() }

// Ops returns the recorded history.
func (w *Workload) Ops() []history.Op { return w.rec.Ops() }

// WaitOK waits until n more calls than now have succeeded.
func (w *Workload) WaitOK(t testing.TB, n int64, timeout time.Duration) {
	t.Helper()
	target := w.OK() + n
	deadline := time.Now().Add(timeout)
	for w.OK() < target {
		if time.Now().After(deadline) {
			t.Fatalf("workload: fewer than %d successful calls within %v (ok %d, failed %d)", n, timeout, w.OK(), w.Failed())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Check verifies C1-C3 over the history and fails the test on any anomaly.
func (w *Workload) Check(t testing.TB) {
	t.Helper()
	ops := w.Ops()
	if n := w.badOrder.Load(); n > 0 {
		t.Errorf("%d calls gave a key listed twice non-increasing values", n)
	}
	anomalies := history.Check(ops, 5)
	for _, a := range anomalies {
		t.Errorf("%s", a)
		for _, o := range a.Ops {
			t.Errorf("    %s", o)
		}
	}
	t.Logf("history: %d ops recorded from %d ok and %d failed calls; %d anomalies", len(ops), w.OK(), w.Failed(), len(anomalies))
}
