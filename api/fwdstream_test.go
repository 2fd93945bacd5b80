package api_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/api"
	"github.com/seqd/seqd/api/frame"
	"github.com/seqd/seqd/internal/testcluster"
)

// fwdCluster starts 3 servers with 3 raft groups and returns them once
// every group has a serving leader, with group 1's leader and a server that
// does not lead group 1 (which forwards group 1's keys to it).
func fwdCluster(t *testing.T, opts testcluster.Options) (c *testcluster.Cluster, leader, fwd *testcluster.Member) {
	t.Helper()
	opts.Groups = 3
	c = testcluster.Start(t, 3, opts)
	// Balanced first: the balancer moves no leadership of a balanced
	// cluster, so group 1's leader stays the one the test names.
	c.WaitBalanced(60 * time.Second)
	leader = waitGroupLeader(t, c, 1, nil)
	for _, m := range c.Nodes {
		if m != leader {
			return c, leader, m
		}
	}
	panic("unreachable")
}

// waitGroupLeader waits until group g has a serving leader other than
// except and every group has one, and returns g's.
func waitGroupLeader(t *testing.T, c *testcluster.Cluster, g int, except *testcluster.Member) *testcluster.Member {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ls := c.GroupLeaders()
		if len(ls) > g && !slices.Contains(ls, nil) && ls[g] != except {
			return ls[g]
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d has no serving leader (other than %v) after 30s: %v", g, except, ls)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fwdLoad is callers calling Next for one key of group 1 through a
// server's front-end path (Sequences), each checking that its values
// increase (C2), all recording every value (C1) and every error's code.
type fwdLoad struct {
	stop   atomic.Bool
	wg     sync.WaitGroup
	ok     atomic.Int64
	mu     sync.Mutex
	vals   map[uint64]int // value: the caller that got it
	codes  map[connect.Code]int
	broken []string
}

func startFwdLoad(t *testing.T, q *api.Sequences, key uint64, callers int) *fwdLoad {
	l := &fwdLoad{vals: map[uint64]int{}, codes: map[connect.Code]int{}}
	for i := range callers {
		l.wg.Go(func() {
			var last uint64
			for !l.stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				// The key twice: one call's values increase too.
				vals, errs := q.Next(ctx, "", []uint64{key, key})
				cancel()
				l.mu.Lock()
				switch {
				case errs != nil:
					l.codes[connect.CodeOf(errs[0])]++
				case vals[0] <= last || vals[1] <= vals[0]:
					l.broken = append(l.broken, "caller got "+u(vals[0])+", "+u(vals[1])+" after "+u(last))
				}
				for _, v := range vals {
					if errs != nil {
						break
					}
					if o, dup := l.vals[v]; dup {
						l.broken = append(l.broken, "value "+u(v)+" handed out twice (callers "+u(uint64(o))+" and "+u(uint64(i))+")")
					}
					l.vals[v] = i
				}
				l.mu.Unlock()
				if errs == nil {
					last = vals[1]
					l.ok.Add(1)
				}
			}
		})
	}
	t.Cleanup(l.finish)
	return l
}

func (l *fwdLoad) finish() { l.stop.Store(true); l.wg.Wait() }

// waitOK waits until n more calls succeeded.
func (l *fwdLoad) waitOK(t *testing.T, n int64, what string) {
	t.Helper()
	want := l.ok.Load() + n
	deadline := time.Now().Add(30 * time.Second)
	for l.ok.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d calls succeeded in 30s, want %d more (errors %v)", what, l.ok.Load(), n, l.codes)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// check finishes the load and fails the test on a repeated or decreasing
// value, or an error other than unavailable.
func (l *fwdLoad) check(t *testing.T) {
	t.Helper()
	l.finish()
	for _, b := range l.broken {
		t.Error(b)
	}
	for code, n := range l.codes {
		if code != connect.CodeUnavailable {
			t.Errorf("%d calls failed with %v, want only unavailable", n, code)
		}
	}
	t.Logf("%d calls, %d values, errors %v", l.ok.Load(), len(l.vals), l.codes)
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

// TestForwardStreamKeepsOrderAndSharesOneStream: 16 callers of one
// server's front-end path take values for a key of a group another server
// leads; every forward goes over one stream to that leader, and every
// caller's values increase, none repeated.
func TestForwardStreamKeepsOrderAndSharesOneStream(t *testing.T) {
	_, leader, fwd := fwdCluster(t, testcluster.Options{})
	q := fwd.Server().Sequences()
	l := startFwdLoad(t, q, testcluster.KeyPerGroup(3)[1], 16)
	l.waitOK(t, 3000, "forwarded calls")
	l.check(t)
	dials, sent, _ := api.ForwardStreamStats(q, leader.APIAddr)
	if dials != 1 || sent < 100 {
		t.Fatalf("%d streams opened to the leader, %d messages sent: want one stream carrying the forwards", dials, sent)
	}
}

// TestForwardStreamLeaderChangeNoRepeat: group 1's leadership moves three
// times, and then its leader is killed, while 16 callers of another
// server's front-end path take values on the forward streams. An old
// leader answers the messages it gets after a move with unavailable (a
// forwarded call is never forwarded again), a killed one breaks its
// stream; either way the front end retries through the new leader, no call
// fails with anything but unavailable, and no value repeats or goes back.
func TestForwardStreamLeaderChangeNoRepeat(t *testing.T) {
	c, _, fwd := fwdCluster(t, testcluster.Options{})
	q := fwd.Server().Sequences()
	l := startFwdLoad(t, q, testcluster.KeyPerGroup(3)[1], 16)
	l.waitOK(t, 500, "before the moves")
	for range 3 {
		cur := waitGroupLeader(t, c, 1, nil)
		if err := cur.Node().Group(1).TransferLeadership("", nil); err != nil {
			t.Logf("moving group 1 from %s: %v", cur.ID, err)
		}
		l.waitOK(t, 500, "after a move")
	}
	cur := waitGroupLeader(t, c, 1, nil)
	for cur == fwd { // the server killed is the leader the others forward to
		if err := cur.Node().Group(1).TransferLeadership("", nil); err != nil {
			t.Logf("moving group 1 from %s: %v", cur.ID, err)
		}
		cur = waitGroupLeader(t, c, 1, nil)
	}
	l.waitOK(t, 200, "before the kill")
	dials, sent, _ := api.ForwardStreamStats(q, cur.APIAddr)
	cur.Kill()
	l.waitOK(t, 500, "after the leader was killed")
	l.check(t)
	if dials == 0 || sent == 0 {
		t.Errorf("no forward stream to the leader before it was killed (%d opened, %d sent)", dials, sent)
	}
}

// TestForwardStreamReopensAfterLeaderRestart: the leader of a group that
// another server forwards to restarts and leads the group again; the
// forwarding server's stream broke with the restart and a new one carries
// the forwards, whose values continue above those before (C2).
func TestForwardStreamReopensAfterLeaderRestart(t *testing.T) {
	c, leader, fwd := fwdCluster(t, testcluster.Options{})
	q := fwd.Server().Sequences()
	key := testcluster.KeyPerGroup(3)[1]
	next := func() uint64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			vals, errs := q.Next(ctx, "", []uint64{key})
			cancel()
			if errs == nil {
				return vals[0]
			}
			if connect.CodeOf(errs[0]) != connect.CodeUnavailable || time.Now().After(deadline) {
				t.Fatalf("Next: %v", errs[0])
			}
		}
	}
	before := next()
	if dials, _, open := api.ForwardStreamStats(q, leader.APIAddr); dials != 1 || !open {
		t.Fatalf("before the restart: %d streams opened, open %v; want one open", dials, open)
	}
	leader.Kill()
	leader.Restart()
	c.WaitAdmitted(leader, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur := waitGroupLeader(t, c, 1, nil)
		if cur == leader {
			break
		}
		if err := cur.Node().Group(1).TransferLeadership(leader.ID, nil); err != nil {
			t.Logf("moving group 1 back to %s: %v", leader.ID, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("group 1 never came back to %s", leader.ID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	last := before
	deadline = time.Now().Add(30 * time.Second)
	for {
		v := next()
		if v <= last {
			t.Fatalf("after the restart: %d after %d", v, last)
		}
		last = v
		dials, _, open := api.ForwardStreamStats(q, leader.APIAddr)
		if dials == 2 && open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new stream to the restarted leader in 30s (%d opened, open %v)", dials, open)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestForwardStreamRefusesAsUnary: a forward with a wrong token, or to a
// leader that a newer generation fenced, is refused with the code the same
// forward gets as a unary call: on a stream already open (the leader checks
// every message) and on a stream the leader will not open (the forward then
// goes unary, and no stream stays open).
func TestForwardStreamRefusesAsUnary(t *testing.T) {
	c, leader, fwd := fwdCluster(t, testcluster.Options{Token: "secret", TokenSequence: true})
	var other *testcluster.Member // a second forwarding server, with no stream yet
	for _, m := range c.Nodes {
		if m != leader && m != fwd {
			other = m
		}
	}
	key := testcluster.KeyPerGroup(3)[1]
	right := http.Header{"Authorization": {"Bearer secret"}}
	wrong := http.Header{"Authorization": {"Bearer wrong"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, q2 := fwd.Server().Sequences(), other.Server().Sequences()
	forward := func(q *api.Sequences, h http.Header, stream bool) error {
		for {
			_, err := api.ForwardNext(ctx, q, 1, h, stream, key)
			if connect.CodeOf(err) != connect.CodeUnavailable || errors.Is(err, context.DeadlineExceeded) || !leader.Node().Group(1).IsLeader() {
				return err
			}
			if leader.Node().Fenced() {
				return err
			}
			time.Sleep(20 * time.Millisecond) // a lease renewal running late
		}
	}
	if err := forward(q, right, true); err != nil {
		t.Fatalf("a forward with the token: %v", err)
	}
	if dials, sent, open := api.ForwardStreamStats(q, leader.APIAddr); dials != 1 || sent == 0 || !open {
		t.Fatalf("%d streams, %d sent, open %v: want the forward on a stream", dials, sent, open)
	}
	same := func(what string, stream, unary error, want connect.Code) {
		t.Helper()
		if connect.CodeOf(unary) != want || connect.CodeOf(stream) != want {
			t.Errorf("%s: over the stream %v, unary %v; want %v both", what, stream, unary, want)
		}
	}
	// q2 asked for a stream once more since the last check, and opened
	// none (its backoff, after which it asks again, may have passed on a
	// slow machine: the count, not the backoff, says it was refused).
	refusals := api.ForwardStreamRefusals(q2, leader.APIAddr)
	refused := func(what string) {
		t.Helper()
		n := api.ForwardStreamRefusals(q2, leader.APIAddr)
		if dials, _, open := api.ForwardStreamStats(q2, leader.APIAddr); dials != 0 || open || n != refusals+1 {
			t.Errorf("%s: %d streams opened (open %v), %d refused, want none opened and 1 refused", what, dials, open, n-refusals)
		}
		refusals = n
	}
	awaitOnline := func() { // q2's backoff after a refused stream ends
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for api.ForwardStreamOffline(q2, leader.APIAddr) {
			if time.Now().After(deadline) {
				t.Fatal("forwards to the leader still unary 10s after a refused stream")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// A wrong token: a stream opened with the right one is not used for
	// it (it goes unary); a stream asked with it is refused.
	same("a wrong token, stream open", forward(q, wrong, true), forward(q, wrong, false), connect.CodeUnauthenticated)
	same("a wrong token, no stream", forward(q2, wrong, true), forward(q2, wrong, false), connect.CodeUnauthenticated)
	refused("a wrong token")
	awaitOnline()

	// A fenced leader refuses the messages of the open stream, and a new
	// stream.
	g := leader.Node().Generation()
	if !leader.Node().LearnGeneration(seqd.Generation{Lineage: g.Lineage, Number: g.Number + 1, Cluster: "a-restore"}) {
		t.Fatal("the leader was not fenced by a newer generation")
	}
	same("a fenced leader, stream open", forward(q, right, true), forward(q, right, false), connect.CodeUnavailable)
	if dials, _, open := api.ForwardStreamStats(q, leader.APIAddr); dials != 1 || !open {
		t.Errorf("a refused message closed the stream (%d opened, open %v)", dials, open)
	}
	same("a fenced leader, no stream", forward(q2, right, true), forward(q2, right, false), connect.CodeUnavailable)
	// q2 may not ask the fenced leader at all: its server may have learned
	// the newer generation first, or see another leader of the group by
	// then (the fenced one shut its raft traffic). Whatever it asked, the
	// fenced leader opened it no stream.
	if dials, _, open := api.ForwardStreamStats(q2, leader.APIAddr); dials != 0 || open {
		t.Errorf("a fenced leader: %d streams opened (open %v), want none", dials, open)
	}
	if n := api.ForwardStreamRefusals(q2, leader.APIAddr); n > refusals+1 {
		t.Errorf("a fenced leader: %d streams refused, want at most 1", n-refusals)
	}
}

// BenchmarkForwardNextStream and BenchmarkForwardNextUnary forward a Next
// of one key from a server to the leader of the key's group, as the front
// ends' shares go, from 4 callers per CPU: over the forward stream, and as
// the unary call it replaces. ns/op is per forward, both servers in this
// process.
func BenchmarkForwardNextStream(b *testing.B) { benchForward(b, true) }
func BenchmarkForwardNextUnary(b *testing.B)  { benchForward(b, false) }

func benchForward(b *testing.B, stream bool) {
	c := testcluster.Start(b, 3, testcluster.Options{Groups: 3})
	// Balanced, the balancer moves no leadership during the run.
	c.WaitBalanced(60 * time.Second)
	leader := c.GroupLeaders()[1]
	var fwd *testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			fwd = m
		}
	}
	q, key := fwd.Server().Sequences(), testcluster.KeyPerGroup(3)[1]
	// The forwarder's first call may find group 0's leader still waiting
	// out its lease (the space's lookup answers unavailable): retried, as a
	// client does, before the clock starts.
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := api.ForwardNext(context.Background(), q, 1, http.Header{}, stream, key)
		if err == nil {
			break
		}
		if connect.CodeOf(err) != connect.CodeUnavailable || time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := api.ForwardNext(context.Background(), q, 1, http.Header{}, stream, key); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestForwardStreamBoundedAndClosedWhenStalled: a leader that takes a
// stream and then never answers (stopped, say) holds at most 64 messages
// of it: the forwards beyond wait for a place and fail at their deadline
// without being sent; a forward whose deadline passes closes the stream,
// and the next forward opens a new one.
func TestForwardStreamBoundedAndClosedWhenStalled(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	q := c.Nodes[0].Server().Sequences()

	// The stalled leader: answers the upgrade, reads messages, answers none.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns, msgs atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				if _, err := http.ReadRequest(r); err != nil {
					return
				}
				if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: "+seqd.StreamUpgrade+"\r\nConnection: Upgrade\r\n\r\n"); err != nil {
					return
				}
				for {
					if _, err := frame.Read(r, nil); err != nil {
						return
					}
					msgs.Add(1)
				}
			}()
		}
	}()
	addr := ln.Addr().String()

	const calls = 100
	var wg sync.WaitGroup
	var timedOut atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for range calls {
		wg.Go(func() {
			sent, err := api.ForwardStreamTo(ctx, q, addr, 1)
			if sent && errors.Is(err, context.DeadlineExceeded) {
				timedOut.Add(1)
			} else {
				t.Errorf("a forward to a stalled leader: sent %v, %v; want a time-out", sent, err)
			}
		})
	}
	wg.Wait()
	if n := msgs.Load(); n != 64 {
		t.Errorf("the stalled leader read %d messages, want the bound, 64", n)
	}
	if _, _, open := api.ForwardStreamStats(q, addr); open {
		t.Error("the stalled stream is still open after its forwards' deadline")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if sent, err := api.ForwardStreamTo(ctx2, q, addr, 1); !sent || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the next forward: sent %v, %v", sent, err)
	}
	if dials, _, _ := api.ForwardStreamStats(q, addr); dials != 2 || conns.Load() != 2 {
		t.Errorf("%d streams opened (%d connections), want a new one after the stall", dials, conns.Load())
	}
}
