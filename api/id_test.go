package api_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/api"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/internal/testcluster"
)

func idClient(addr string) seqv1connect.IdServiceClient {
	return seqv1connect.NewIdServiceClient(api.NewH2CClient(), "http://"+addr)
}

func adminClient(addr string) seqv1connect.AdminServiceClient {
	return seqv1connect.NewAdminServiceClient(api.NewH2CClient(), "http://"+addr)
}

// nextIDs calls NextIds, retrying unavailable (a cluster that is still
// moving to the flake protocol) for up to 20 s.
func nextIDs(t *testing.T, c seqv1connect.IdServiceClient, ns string, n uint32) []int64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: ns, Count: n}))
		cancel()
		if err == nil {
			return resp.Msg.GetIds()
		}
		if connect.CodeOf(err) != connect.CodeUnavailable || time.Now().After(deadline) {
			t.Fatalf("NextIds(%q, %d): %v", ns, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNextIdsEveryNodeItsOwnWorker: every node answers NextIds from its own
// worker; no id repeats across nodes, each response strictly increases,
// and decoding names the node that issued it.
func TestNextIdsEveryNodeItsOwnWorker(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	l, _ := flake.Preset("snowflake")
	seen := map[int64]string{}
	workers := map[uint64]string{}
	for round := range 20 {
		for i, addr := range c.APIAddrs() {
			ids := nextIDs(t, idClient(addr), "", uint32(1+round*37%500))
			for j, id := range ids {
				if by, dup := seen[id]; dup {
					t.Fatalf("id %d from %s was issued by %s too", id, addr, by)
				}
				seen[id] = addr
				if j > 0 && id <= ids[j-1] {
					t.Fatalf("ids of one response not increasing: %d after %d", id, ids[j-1])
				}
				d, err := l.Decode(id)
				if err != nil {
					t.Fatal(err)
				}
				if w, ok := workers[d.Worker]; ok && w != c.Nodes[i].ID {
					t.Fatalf("worker %d used by %s and %s", d.Worker, w, c.Nodes[i].ID)
				}
				workers[d.Worker] = c.Nodes[i].ID
				if diff := time.Since(time.UnixMilli(d.UnixMs)); diff < -time.Second || diff > time.Second {
					t.Fatalf("id %d decodes to %v, %v from now", id, time.UnixMilli(d.UnixMs), diff)
				}
			}
		}
	}
	if len(workers) != 3 {
		t.Fatalf("workers %v, want one per node", workers)
	}
	resp, err := idClient(c.Nodes[0].APIAddr).Decode(context.Background(), connect.NewRequest(&seqv1.DecodeRequest{Id: nextIDs(t, idClient(c.Nodes[1].APIAddr), "", 1)[0]}))
	if err != nil || resp.Msg.GetHolderLabel() != c.Nodes[1].ID {
		t.Fatalf("Decode: %v %v, want the holder %s", resp, err, c.Nodes[1].ID)
	}
}

// TestIdBadInputCodes: each kind of bad input gets its documented code.
func TestIdBadInputCodes(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	addr := c.Nodes[0].APIAddr
	ids, admin := idClient(addr), adminClient(addr)
	nextIDs(t, ids, "", 1) // the cluster is on the flake protocol
	ctx := context.Background()
	if _, err := admin.CreateNamespace(ctx, connect.NewRequest(&seqv1.CreateNamespaceRequest{Name: "orders", Layout: "sonyflake"})); err != nil {
		t.Fatal(err)
	}
	next := func(ns string, n uint32) error {
		_, err := ids.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: ns, Count: n}))
		return err
	}
	create := func(r *seqv1.CreateNamespaceRequest) error {
		_, err := admin.CreateNamespace(ctx, connect.NewRequest(r))
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want connect.Code
	}{
		{"count 10001", next("", 10001), connect.CodeInvalidArgument},
		{"malformed namespace", next("Bad Name", 1), connect.CodeInvalidArgument},
		{"unknown namespace", next("nope", 1), connect.CodeNotFound},
		{"unknown preset", create(&seqv1.CreateNamespaceRequest{Name: "x", Layout: "tiny"}), connect.CodeInvalidArgument},
		{"64-bit layout", create(&seqv1.CreateNamespaceRequest{Name: "x", TimeBits: 42, WorkerBits: 10, SequenceBits: 12}), connect.CodeInvalidArgument},
		{"preset and widths", create(&seqv1.CreateNamespaceRequest{Name: "x", Layout: "js", TimeBits: 30}), connect.CodeInvalidArgument},
		{"exists with another layout", create(&seqv1.CreateNamespaceRequest{Name: "orders", Layout: "wide"}), connect.CodeAlreadyExists},
		{"obfuscation without a secret", create(&seqv1.CreateNamespaceRequest{Name: "y", Obfuscation: "ff1"}), connect.CodeFailedPrecondition},
		{"bad obfuscation", create(&seqv1.CreateNamespaceRequest{Name: "y", Obfuscation: "rot13"}), connect.CodeInvalidArgument},
	} {
		if got := connect.CodeOf(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	// A count of 0 is proto3's absent count: one id.
	if r, err := ids.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{})); err != nil || len(r.Msg.GetIds()) != 1 {
		t.Errorf("NextIds without a count: %v, %v; want one id", r, err)
	}
	if _, err := ids.Decode(ctx, connect.NewRequest(&seqv1.DecodeRequest{Id: -4})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("Decode(-4): %v", err)
	}
	g, err := ids.AcquireWorker(ctx, connect.NewRequest(&seqv1.AcquireWorkerRequest{Namespace: "orders", Holder: "h1", Label: "test"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ids.RenewWorker(ctx, connect.NewRequest(&seqv1.RenewWorkerRequest{Namespace: "orders", Worker: g.Msg.GetWorker(), Token: g.Msg.GetToken() + 1, Holder: "h1"})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("renewal with a wrong token: %v", err)
	}
	if _, err := ids.AcquireWorker(ctx, connect.NewRequest(&seqv1.AcquireWorkerRequest{Namespace: "orders"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("acquire without a holder: %v", err)
	}
	// Worker exhaustion: a layout with 2 workers, one held by this
	// server's own holder after a NextIds.
	if err := create(&seqv1.CreateNamespaceRequest{Name: "tiny", TimeBits: 40, WorkerBits: 1, SequenceBits: 4}); err != nil {
		t.Fatal(err)
	}
	nextIDs(t, ids, "tiny", 1)
	if _, err := ids.AcquireWorker(ctx, connect.NewRequest(&seqv1.AcquireWorkerRequest{Namespace: "tiny", Holder: "a"})); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.AcquireWorker(ctx, connect.NewRequest(&seqv1.AcquireWorkerRequest{Namespace: "tiny", Holder: "b"})); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("a third worker of two: %v", err)
	}
	ws, err := admin.ListWorkers(ctx, connect.NewRequest(&seqv1.ListWorkersRequest{Namespace: "tiny"}))
	if err != nil || len(ws.Msg.GetWorkers()) != 2 || !ws.Msg.GetWorkers()[0].GetHeld() || ws.Msg.GetWorkers()[0].GetLabel() != c.Nodes[0].ID {
		t.Fatalf("ListWorkers: %v %v", ws, err)
	}
}

// TestNextIdsThroughLeaderKill: calls to the surviving nodes keep
// succeeding while the leader is killed and a new one takes over: they
// answer from their own ranges, which outlast the failover.
func TestNextIdsThroughLeaderKill(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{})
	leader := c.WaitServingLeader(20 * time.Second)
	var survivors []*testcluster.Member
	for _, m := range c.Nodes {
		if m != leader {
			survivors = append(survivors, m)
			nextIDs(t, idClient(m.APIAddr), "", 1) // holds its worker
		}
	}
	var (
		mu     sync.Mutex
		seen   = map[int64]bool{}
		failed atomic.Int64
		calls  atomic.Int64
		worst  atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range survivors {
		wg.Add(1)
		go func(cl seqv1connect.IdServiceClient) {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				resp, err := cl.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Count: 10}))
				cancel()
				calls.Add(1)
				if d := int64(time.Since(start)); d > worst.Load() {
					worst.Store(d)
				}
				if err != nil {
					failed.Add(1)
					t.Errorf("NextIds: %v", err)
					continue
				}
				mu.Lock()
				for _, id := range resp.Msg.GetIds() {
					if seen[id] {
						t.Errorf("id %d twice", id)
					}
					seen[id] = true
				}
				mu.Unlock()
			}
		}(idClient(m.APIAddr))
	}
	time.Sleep(200 * time.Millisecond) // calls before the kill
	leader.Kill()
	c.WaitServingLeader(20*time.Second, leader)
	// Keep calling until the survivors renewed through the new leader.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, m := range survivors {
			ws, err := adminClient(m.APIAddr).ListWorkers(context.Background(), connect.NewRequest(&seqv1.ListWorkersRequest{}))
			if err != nil {
				ok = false
				break
			}
			renewed := false
			for _, w := range ws.Msg.GetWorkers() {
				if w.GetLabel() == m.ID && time.Since(time.UnixMilli(w.GetRenewedUnixMs())) < 2*time.Second {
					renewed = true
				}
			}
			ok = ok && renewed
		}
		if ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 || calls.Load() < 100 {
		t.Fatalf("%d of %d calls failed", failed.Load(), calls.Load())
	}
	t.Logf("%d calls through the failover, none failed; worst %v", calls.Load(), time.Duration(worst.Load()))
}

// TestObfuscatedNamespace: with a cluster secret, an obfuscated
// namespace's ids are unique and positive, decode (with the secret) to the
// time of the call, and do not look sequential.
func TestObfuscatedNamespace(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{ClusterSecret: []byte("a-cluster-secret-for-tests")})
	c.WaitServingLeader(20 * time.Second)
	addr := c.Nodes[0].APIAddr
	ctx := context.Background()
	nextIDs(t, idClient(addr), "", 1)
	for _, mode := range []string{"ff1", "ff1-hour"} {
		if _, err := adminClient(addr).CreateNamespace(ctx, connect.NewRequest(&seqv1.CreateNamespaceRequest{Name: "o-" + mode, Obfuscation: mode})); err != nil {
			t.Fatal(err)
		}
		ids := nextIDs(t, idClient(addr), "o-"+mode, 1000)
		seen := map[int64]bool{}
		rising := 0
		for i, id := range ids {
			if id <= 0 || seen[id] {
				t.Fatalf("%s: id %d", mode, id)
			}
			seen[id] = true
			if i > 0 && id > ids[i-1] {
				rising++
			}
		}
		if mode == "ff1" && (rising < 300 || rising > 700) {
			t.Fatalf("%s: %d of 999 neighbours rise: the ids look ordered", mode, rising)
		}
		d, err := idClient(addr).Decode(ctx, connect.NewRequest(&seqv1.DecodeRequest{Namespace: "o-" + mode, Id: ids[0]}))
		if err != nil {
			t.Fatal(err)
		}
		if diff := time.Since(time.UnixMilli(d.Msg.GetUnixMs())); diff < -time.Second || diff > 5*time.Second {
			t.Fatalf("%s: decoded time %v off by %v", mode, time.UnixMilli(d.Msg.GetUnixMs()), diff)
		}
	}
}

// TestNextIdsAsRuns: a request for runs gets its ids as runs of
// consecutive ids (each in one time unit, in order, adding up to the
// count), the same request without runs gets ids, and an obfuscated
// namespace answers ids even when runs are asked for.
func TestNextIdsAsRuns(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{ClusterSecret: []byte("a-cluster-secret-for-tests")})
	c.WaitServingLeader(20 * time.Second)
	ic := idClient(c.Nodes[0].APIAddr)
	ctx := context.Background()
	nextIDs(t, ic, "", 1)
	l, _ := flake.Preset("snowflake")
	var last int64
	for _, n := range []uint32{1, 999, 1000, 4097, 10000} {
		resp, err := ic.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Count: n, Runs: true}))
		if err != nil {
			t.Fatalf("NextIds(%d, runs): %v", n, err)
		}
		if len(resp.Msg.GetIds()) != 0 {
			t.Fatalf("NextIds(%d, runs): %d ids besides the runs", n, len(resp.Msg.GetIds()))
		}
		total := 0
		for _, r := range resp.Msg.GetRuns() {
			first, err1 := l.Decode(r.GetFirst())
			end, err2 := l.Decode(r.GetFirst() + int64(r.GetCount()) - 1)
			switch {
			case err1 != nil || err2 != nil:
				t.Fatalf("run %v: %v %v", r, err1, err2)
			case r.GetCount() == 0 || r.GetFirst() <= last:
				t.Fatalf("NextIds(%d, runs): run %v after id %d", n, r, last)
			case first.Unit != end.Unit || first.Worker != end.Worker:
				t.Fatalf("NextIds(%d, runs): run %v spans %+v to %+v", n, r, first, end)
			}
			last = r.GetFirst() + int64(r.GetCount()) - 1
			total += int(r.GetCount())
		}
		if total != int(n) || len(resp.Msg.GetRuns()) > int(n+4095)/4096+1 {
			t.Fatalf("NextIds(%d, runs): %d ids in %d runs", n, total, len(resp.Msg.GetRuns()))
		}
		ids := nextIDs(t, ic, "", n)
		if len(ids) != int(n) || ids[0] <= last {
			t.Fatalf("NextIds(%d) without runs: %d ids, first %d after %d", n, len(ids), ids[0], last)
		}
		last = ids[len(ids)-1]
	}
	if _, err := adminClient(c.Nodes[0].APIAddr).CreateNamespace(ctx, connect.NewRequest(&seqv1.CreateNamespaceRequest{Name: "hidden", Obfuscation: "ff1"})); err != nil {
		t.Fatal(err)
	}
	resp, err := ic.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: "hidden", Count: 500, Runs: true}))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Msg.GetRuns()) != 0 || len(resp.Msg.GetIds()) != 500 {
		t.Fatalf("obfuscated namespace with runs asked: %d runs, %d ids; want 0 runs, 500 ids", len(resp.Msg.GetRuns()), len(resp.Msg.GetIds()))
	}
	if _, err := ic.NextIds(ctx, connect.NewRequest(&seqv1.NextIdsRequest{Count: 10001, Runs: true})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("10001 ids as runs: %v, want invalid_argument", err)
	}
}

// TestLeaderWithSkewedClockRefusesGrants: a leader whose wall clock is far
// from its peers' refuses flake grants (unavailable) instead of pushing the
// namespace's floor and its ids' times with it, and grants again once its
// clock is back.
func TestLeaderWithSkewedClockRefusesGrants(t *testing.T) {
	offsets := make([]atomic.Int64, 3)
	c := testcluster.New(t, 3, testcluster.Options{}, func(i int, m *testcluster.Member) {
		m.WallClock = func() int64 { return time.Now().UnixMilli() + offsets[i].Load() }
	})
	leader := c.WaitServingLeader(20 * time.Second)
	li := 0
	for i, m := range c.Nodes {
		if m == leader {
			li = i
		}
	}
	ids := idClient(leader.APIAddr)
	nextIDs(t, ids, "", 1) // on the flake protocol, with the clocks read
	acquire := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := ids.AcquireWorker(ctx, connect.NewRequest(&seqv1.AcquireWorkerRequest{Holder: "h", Label: "skew"}))
		return err
	}
	held, err := ids.AcquireWorker(context.Background(), connect.NewRequest(&seqv1.AcquireWorkerRequest{Holder: "r", Label: "renewer"}))
	if err != nil {
		t.Fatal(err)
	}
	offsets[li].Store(3_600_000) // the leader's clock an hour ahead
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := acquire()
		if connect.CodeOf(err) == connect.CodeUnavailable && strings.Contains(err.Error(), "clock") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the skewed leader still grants: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Holders renew meanwhile (their leases go on; the range grows only
	// from the floor trusted times set).
	rn, err := ids.RenewWorker(context.Background(), connect.NewRequest(&seqv1.RenewWorkerRequest{Worker: held.Msg.GetWorker(), Token: held.Msg.GetToken(), Holder: "r"}))
	if err != nil {
		t.Fatalf("a renewal on the skewed leader: %v", err)
	}
	if rn.Msg.GetHi() > held.Msg.GetHi()+60_000 {
		t.Fatalf("the renewal on the skewed leader extended the range to %d from %d", rn.Msg.GetHi(), held.Msg.GetHi())
	}
	ns, err := adminClient(leader.APIAddr).ListNamespaces(context.Background(), connect.NewRequest(&seqv1.ListNamespacesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if f := ns.Msg.GetNamespaces()[0].GetFloorUnixMs(); f > time.Now().Add(time.Minute).UnixMilli() {
		t.Fatalf("the floor followed the skewed clock to %v", time.UnixMilli(f))
	}
	offsets[li].Store(0)
	for deadline := time.Now().Add(15 * time.Second); ; {
		if err := acquire(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no grant after the clock came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNodeHoldsMoreWorkersForMoreIds: a node asked for more ids than one
// worker's rate acquires more workers of the namespace (up to a 64th of
// the layout's, at most 8), and never more than one of a small layout.
func TestNodeHoldsMoreWorkersForMoreIds(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.Options{})
	c.WaitServingLeader(20 * time.Second)
	addr := c.Nodes[0].APIAddr
	ids, admin := idClient(addr), adminClient(addr)
	ctx := context.Background()
	// 16 ids per second per worker: a worker is at its lead (1 s) after
	// about 32 ids.
	for name, bits := range map[string]uint32{"slow512": 9, "slow8": 3} {
		if _, err := admin.CreateNamespace(ctx, connect.NewRequest(&seqv1.CreateNamespaceRequest{
			Name: name, UnitMs: 1000, TimeBits: 40, WorkerBits: bits, SequenceBits: 4})); err != nil {
			t.Fatal(err)
		}
	}
	held := func(name string) int {
		ws, err := admin.ListWorkers(ctx, connect.NewRequest(&seqv1.ListWorkersRequest{Namespace: name}))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, w := range ws.Msg.GetWorkers() {
			if w.GetHeld() && w.GetLabel() == c.Nodes[0].ID {
				n++
			}
		}
		return n
	}
	for range 12 { // 192 ids, 6 workers' worth of one second
		nextIDs(t, ids, "slow512", 16)
	}
	if n := held("slow512"); n < 2 || n > 8 {
		t.Fatalf("the node holds %d workers of a 512-worker namespace after 12 calls of 16 ids, want 2 to 8", n)
	}
	for range 4 { // 64 ids: the third call waits for the clock
		nextIDs(t, ids, "slow8", 16)
	}
	if n := held("slow8"); n != 1 {
		t.Fatalf("the node holds %d workers of an 8-worker namespace, want 1", n)
	}
	// More ids than the deadline allows without running ahead of the lead:
	// resource_exhausted, naming why.
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := ids.NextIds(dctx, connect.NewRequest(&seqv1.NextIdsRequest{Namespace: "slow8", Count: 1000}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "ahead of the clock") {
		t.Fatalf("1000 ids at 16 per second within 300 ms: %v", err)
	}
}
