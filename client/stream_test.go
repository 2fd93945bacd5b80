package client_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/history"
	"github.com/seqd/seqd/internal/testcluster"
)

// streamLoad runs callers of single-key Next through clients (spread over
// them) over keys 0..keys-1 until stop is closed, recording every success
// in rec, and counts failures by code.
type streamLoad struct {
	rec  *history.Recorder
	mu   sync.Mutex
	errs map[connect.Code]int
	ok   atomic.Int64
	wg   sync.WaitGroup
	stop chan struct{}
}

func startStreamLoad(t *testing.T, clients []*client.Client, callers int, keys uint64, timeout func() time.Duration) *streamLoad {
	t.Helper()
	l := &streamLoad{rec: history.NewRecorder(), errs: map[connect.Code]int{}, stop: make(chan struct{})}
	for w := range callers {
		cl := clients[w%len(clients)]
		name := string(rune('a' + w%len(clients)))
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if i >= 200000 {
					return // a bound on the loop, far above what the tests reach
				}
				key := rand.Uint64N(keys)
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if timeout != nil {
					ctx, cancel = context.WithTimeout(ctx, timeout())
				}
				start := l.rec.Now()
				vals, err := cl.Next(ctx, "", key)
				end := l.rec.Now()
				cancel()
				if err != nil {
					l.mu.Lock()
					l.errs[connect.CodeOf(err)]++
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
				l.rec.Add(history.Op{Kind: history.Take, Key: key, First: vals[0], Last: vals[0], Start: start, End: end, Client: name})
			}
		})
	}
	return l
}

// finish stops the load and checks its history against C1-C3.
func (l *streamLoad) finish(t *testing.T) map[connect.Code]int {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	ops := l.rec.Ops()
	t.Logf("%d calls succeeded, failures by code: %v", len(ops), l.errs)
	if as := history.Check(ops, 10); len(as) > 0 {
		t.Fatalf("%d operations, anomalies: %v", len(ops), as)
	}
	return l.errs
}

// waitOK waits until the load has n more successes than when called.
func (l *streamLoad) waitOK(t *testing.T, n int64, what string) {
	t.Helper()
	from := l.ok.Load()
	deadline := time.Now().Add(30 * time.Second)
	for l.ok.Load()-from < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d successes in 30s, want %d", what, l.ok.Load()-from, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// streamCluster starts 3 nodes of 3 raft groups (with opts) and n clients,
// and waits until the first client's table knows every group's leader.
func streamCluster(t *testing.T, n int, opts testcluster.Options) (*testcluster.Cluster, []*client.Client) {
	t.Helper()
	opts.Groups = 3
	c := testcluster.Start(t, 3, opts)
	clients := streamClients(t, c, n)
	waitGroupsSettled(t, c, clients[0], 3)
	return c, clients
}

// streamClients returns n clients on their defaults (NextStream's framed
// transport), but the second of them with a given HTTP client (h2c), with
// which it streams over Connect instead.
func streamClients(t *testing.T, c *testcluster.Cluster, n int) []*client.Client {
	t.Helper()
	var out []*client.Client
	for i := range n {
		opts := client.Options{RetryFor: 30 * time.Second}
		if i == 1 {
			opts.HTTPClient = api.NewH2CClient()
		}
		cl, err := client.New(c.APIAddrs(), opts)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cl)
	}
	return out
}

// streamedShare checks that each client sent most of its coalesced
// requests as stream messages.
func streamedShare(t *testing.T, clients []*client.Client) {
	t.Helper()
	for i, cl := range clients {
		st := cl.BatchStats()
		if st.Requests == 0 || st.Streamed*10 < st.Requests*9 {
			t.Fatalf("client %d: %d of %d coalesced requests went as stream messages, want at least 90%%", i, st.Streamed, st.Requests)
		}
	}
}

// TestStreamPerKeyOrderAcrossClients: two clients of 16 callers each, on 30
// keys of a cluster of 3 raft groups, every coalesced Next on a stream to
// its group's leader (one client on the framed transport, the other on
// Connect): no value repeats, and a call that began after another completed
// gets a larger value for the same key, whichever client made either (C1,
// C2).
func TestStreamPerKeyOrderAcrossClients(t *testing.T) {
	_, clients := streamCluster(t, 2, testcluster.Options{})
	l := startStreamLoad(t, clients, 32, 30, nil)
	l.waitOK(t, 20000, "steady load")
	if errs := l.finish(t); len(errs) > 0 {
		t.Fatalf("failed calls on a steady cluster: %v", errs)
	}
	streamedShare(t, clients)
}

// TestStreamCancellation: callers whose calls are cancelled at random
// points (before they are queued, while queued, while their message is in
// flight) get canceled or deadline_exceeded, and promptly; the other calls
// on the same streams keep their values and order, and the streams keep
// working after.
func TestStreamCancellation(t *testing.T) {
	_, clients := streamCluster(t, 1, testcluster.Options{})
	short := startStreamLoad(t, clients, 8, 50, func() time.Duration {
		return time.Duration(rand.Int64N(int64(400 * time.Microsecond)))
	})
	steady := startStreamLoad(t, clients, 8, 50, nil)
	steady.waitOK(t, 2000, "callers without deadline next to cancelled ones")
	short.waitOK(t, 1, "callers with a deadline")
	before := clients[0].BatchStats().Streamed
	for code, n := range short.finish(t) {
		if code != connect.CodeDeadlineExceeded && code != connect.CodeCanceled {
			t.Errorf("%d calls failed with %v, want only deadline_exceeded or canceled", n, code)
		}
	}
	if errs := steady.finish(t); len(errs) > 0 {
		t.Fatalf("calls without deadline failed: %v", errs)
	}

	// A call whose deadline passes while its message waits for an answer
	// returns at its deadline, not the answer's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if _, err := clients[0].Next(ctx, "", 1); connect.CodeOf(err) != connect.CodeCanceled || time.Since(start) > time.Second {
		t.Fatalf("a cancelled call: %v after %v", err, time.Since(start))
	}
	for range 100 {
		if _, err := clients[0].Next(context.Background(), "", 7); err != nil {
			t.Fatal(err)
		}
	}
	if after := clients[0].BatchStats().Streamed; after < before+100 {
		t.Fatalf("%d stream messages after the cancellations for 100 calls, want 100", after-before)
	}
}

// TestStreamServerRestartMidStream: a server leading a raft group is killed
// (as a crash: its streams break with messages in flight) and restarted
// while 16 callers run. Calls on it are retried elsewhere or fail
// unavailable, never another error; no value repeats or goes backwards
// (C1, C2); and once it is back the calls flow on streams again.
func TestStreamServerRestartMidStream(t *testing.T) {
	c, clients := streamCluster(t, 1, testcluster.Options{})
	l := startStreamLoad(t, clients, 16, 40, nil)
	l.waitOK(t, 3000, "before the kill")
	victim := c.WaitGroupLeader(1, 30*time.Second)
	victim.Kill()
	l.waitOK(t, 3000, "after the kill")
	victim.Restart()
	c.WaitAdmitted(victim, 30*time.Second)
	before := clients[0].BatchStats()
	l.waitOK(t, 3000, "after the restart")
	for code, n := range l.finish(t) {
		if code != connect.CodeUnavailable {
			t.Errorf("%d calls failed with %v, want only unavailable", n, code)
		}
	}
	after := clients[0].BatchStats()
	if streamed, reqs := after.Streamed-before.Streamed, after.Requests-before.Requests; streamed*10 < reqs*9 {
		t.Fatalf("after the restart %d of %d requests went as stream messages, want at least 90%%", streamed, reqs)
	}
}

// TestStreamLeaderChangeMidStream: every raft group's leadership is moved
// three times while 16 callers run on streams to the leaders. The old
// leader answers the messages it gets after the move by forwarding them
// (or unavailable, which the client retries), the client learns the new
// leader from those answers, no call fails with anything but unavailable,
// and no value repeats or goes backwards (C1, C2).
func TestStreamLeaderChangeMidStream(t *testing.T) {
	c, clients := streamCluster(t, 1, testcluster.Options{LeaseHandoff: true})
	l := startStreamLoad(t, clients, 16, 40, nil)
	l.waitOK(t, 2000, "before the moves")
	for round := range 3 {
		for g, m := range c.GroupLeaders() {
			if m == nil {
				continue
			}
			if err := m.Node().Group(g).TransferLeadership("", nil); err != nil {
				t.Logf("round %d: moving group %d from %s: %v", round, g, m.ID, err)
			}
		}
		l.waitOK(t, 2000, "after a round of moves")
	}
	for code, n := range l.finish(t) {
		if code != connect.CodeUnavailable {
			t.Errorf("%d calls failed with %v, want only unavailable", n, code)
		}
	}
	streamedShare(t, clients)
}

// TestStreamFallsBackOnAServerWithoutIt: a server that does not register
// NextStream (an older build: its mux answers 404, which Connect reads as
// unimplemented) gets the client's coalesced Next requests as unary calls,
// every call succeeds with its values in order, and the client tries the
// stream once, not on every request.
func TestStreamFallsBackOnAServerWithoutIt(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	full := api.New(c.Nodes[0].Node(), nil).Handler()
	var streams atomic.Int64
	old := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == seqv1connect.SequenceServiceNextStreamProcedure {
			streams.Add(1)
			http.NotFound(w, r)
			return
		}
		full.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewHTTPServer(old)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	// DisableRouting keeps the client on this address (the cluster's
	// routing table names the node's own API address, which streams).
	cl, err := client.New([]string{ln.Addr().String()}, client.Options{DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	var last [8]uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := range 300 {
				k := uint64((w + i) % len(last))
				mu.Lock() // one call per key at a time, so that each must exceed the last
				v, err := cl.Next(context.Background(), "", k)
				if err == nil && v[0] <= last[k] {
					err = errors.New("a value not above the last one of its key")
				}
				if err == nil {
					last[k] = v[0]
				}
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := streams.Load(); n != 1 {
		t.Fatalf("the server without NextStream saw %d stream calls, want 1 (then unary calls for a while)", n)
	}
	if st := cl.BatchStats(); st.Requests-st.Streamed < 4000 {
		t.Fatalf("%+v: want the 4800 calls as unary requests", st)
	}
}
