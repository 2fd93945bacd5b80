package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/gen/seq/v1/seqv1connect"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/testcluster"
)

// groupFake is one fake node of a cluster of several groups: its Next
// answers value key*1000+n (n counting its own calls for the key), with the
// Seqd-Group, Seqd-Leader and Seqd-Routing-Version headers the test sets,
// and its ClusterStatus answers the test's status.
type groupFake struct {
	seqv1connect.UnimplementedSequenceServiceHandler
	addr   string
	status *atomic.Pointer[seqv1.ClusterStatusResponse]

	mu      sync.Mutex
	cur     map[uint64]uint64
	reqs    [][]uint64
	group   string       // Seqd-Group to answer with
	hint    string       // Seqd-Leader to answer with
	version string       // Seqd-Routing-Version to answer with
	fail    connect.Code // fail the next Next with this code (0: none)
}

func (f *groupFake) Next(_ context.Context, req *connect.Request[seqv1.NextRequest]) (*connect.Response[seqv1.NextResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, slices.Clone(req.Msg.GetKeys()))
	if code := f.fail; code != 0 {
		f.fail = 0
		return nil, connect.NewError(code, errors.New("fake failure"))
	}
	vals := make([]uint64, len(req.Msg.GetKeys()))
	for i, k := range req.Msg.GetKeys() {
		f.cur[k]++
		vals[i] = k*1000 + f.cur[k]
	}
	resp := connect.NewResponse(&seqv1.NextResponse{Values: vals})
	for h, v := range map[string]string{seqd.HeaderGroup: f.group, seqd.HeaderLeader: f.hint, seqd.HeaderRoutingVersion: f.version} {
		if v != "" {
			resp.Header().Set(h, v)
		}
	}
	return resp, nil
}

// set changes the headers f answers with.
func (f *groupFake) set(group, hint string) {
	f.mu.Lock()
	f.group, f.hint = group, hint
	f.mu.Unlock()
}

// take returns the requests f got since the last take.
func (f *groupFake) take() [][]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.reqs
	f.reqs = nil
	return out
}

type groupFakeAdmin struct {
	seqv1connect.UnimplementedAdminServiceHandler
	f *groupFake
}

func (a groupFakeAdmin) ClusterStatus(context.Context, *connect.Request[seqv1.ClusterStatusRequest]) (*connect.Response[seqv1.ClusterStatusResponse], error) {
	st := a.f.status.Load()
	if st == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("no status"))
	}
	return connect.NewResponse(st), nil
}

func startGroupFake(t *testing.T, status *atomic.Pointer[seqv1.ClusterStatusResponse]) *groupFake {
	t.Helper()
	f := &groupFake{status: status, cur: map[uint64]uint64{}}
	mux := http.NewServeMux()
	mux.Handle(seqv1connect.NewSequenceServiceHandler(f))
	mux.Handle(seqv1connect.NewAdminServiceHandler(groupFakeAdmin{f: f}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.addr = ln.Addr().String()
	return f
}

// fakeStatus is a ClusterStatus of 3 groups whose leaders are given by
// address and term ("" for none), with the default space of section size 100.
func fakeStatus(version uint64, leader string, rows ...any) *seqv1.ClusterStatusResponse {
	st := &seqv1.ClusterStatusResponse{
		Version: version, LeaderApiAddr: leader, SlotCount: seqd.SlotCount, SlotMapVersion: seqd.SlotMapVersion,
		Spaces: []*seqv1.Space{{Name: seqd.DefaultSpaceName, Step: 1000, SectionSize: 100}},
	}
	for i := 0; i < len(rows); i += 2 {
		st.Groups = append(st.Groups, &seqv1.GroupRoute{Group: uint32(i / 2), LeaderApiAddr: rows[i].(string), Term: uint64(rows[i+1].(int))})
	}
	return st
}

// keyOfGroup returns a key of the default space (section size 100, 3
// groups) owned by group g, at least from.
func keyOfGroup(g int, from uint64) uint64 {
	for k := from; ; k += 100 {
		if seqd.GroupOfKey(seqd.DefaultSpaceName, 100, k, 3) == g {
			return k
		}
	}
}

// TestGroupTableRules checks the per-group rules against fake nodes whose
// answers the test writes: a refresh installs each group's leader, a
// call's keys are split by group and each share goes to its group's
// leader, values come back in the keys' order; an answer's Seqd-Group
// teaches a newer leader (the node that served it, or the hinted one) and
// a lower term teaches nothing; a refresh row with a lower term never
// replaces a leader held; a group leader's failure sends the retry to the
// cluster's leader and forgets that group's leader.
func TestGroupTableRules(t *testing.T) {
	var status atomic.Pointer[seqv1.ClusterStatusResponse]
	a, b, c := startGroupFake(t, &status), startGroupFake(t, &status), startGroupFake(t, &status)
	status.Store(fakeStatus(5<<32|1, a.addr, a.addr, 5, b.addr, 5, "", 5))
	a.version = fmt.Sprint(uint64(5<<32 | 1))
	cl := newClient(t, a.addr, client.Options{})
	ctx := context.Background()
	next := func(keys ...uint64) []uint64 {
		t.Helper()
		v, err := cl.Next(ctx, "", keys...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := func(what string, addrs []string, terms []uint64) {
		t.Helper()
		gotA, gotT := cl.GroupLeaders()
		if !slices.Equal(gotA, addrs) || !slices.Equal(gotT, terms) {
			t.Fatalf("%s: group leaders %v terms %v, want %v %v", what, gotA, gotT, addrs, terms)
		}
	}
	k0, k1, k2 := keyOfGroup(0, 1), keyOfGroup(1, 1), keyOfGroup(2, 1)
	k1b := keyOfGroup(1, k1+100) // another section of group 1

	// Before the first refresh: one call, to the given node.
	next(k0, k1, k2)
	deadline := time.Now().Add(10 * time.Second)
	for cl.Routing().Refreshes == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no refresh")
		}
		time.Sleep(time.Millisecond)
	}
	want("after the refresh", []string{a.addr, b.addr, ""}, []uint64{5, 5, 5})
	a.take()

	// Split: group 0's and group 2's shares go to a (the cluster's leader,
	// and the leader of group 2 being unknown), group 1's to b.
	a.set("", "") // no Seqd-Group: a share of two groups would have none
	keys := []uint64{k1, k0, k1b, k2, k1}
	vals := next(keys...)
	for i, k := range keys {
		if vals[i]/1000 != k {
			t.Fatalf("values %v for keys %v: not in the keys' order", vals, keys)
		}
	}
	if vals[4] <= vals[0] {
		t.Fatalf("key %d listed twice got %d then %d", k1, vals[0], vals[4])
	}
	ra, rb := a.take(), b.take()
	slices.SortFunc(ra, func(x, y []uint64) int { return int(x[0]) - int(y[0]) })
	if wantA := [][]uint64{{k0}, {k2}}; !slices.EqualFunc(ra, wantA, slices.Equal) {
		t.Fatalf("a got %v, want %v", ra, wantA)
	}
	if wantB := [][]uint64{{k1, k1b, k1}}; !slices.EqualFunc(rb, wantB, slices.Equal) {
		t.Fatalf("b got %v, want %v", rb, wantB)
	}

	// Answers: a lower term teaches nothing; a higher one from b, served
	// there, makes b the leader at that term.
	b.set("1 4", "")
	next(k1)
	want("after a lower term", []string{a.addr, b.addr, ""}, []uint64{5, 5, 5})
	b.set("1 6", "")
	next(k1)
	want("after a higher term", []string{a.addr, b.addr, ""}, []uint64{5, 6, 5})
	// b forwards at the same term: the hinted c leads.
	b.set("1 6", c.addr)
	next(k1)
	want("after the held leader forwarded", []string{a.addr, c.addr, ""}, []uint64{5, 6, 5})
	c.set("1 5", "")
	next(k1)
	if len(c.take()) != 1 || len(b.take()) != 3 {
		t.Fatal("group 1's calls did not follow its leader")
	}
	want("after an older answer", []string{a.addr, c.addr, ""}, []uint64{5, 6, 5})
	// Group 2's leader unknown at term 5: a's forwarded answer at term 5
	// names it.
	a.set("2 5", b.addr)
	next(k2)
	want("after a hint for an unknown leader", []string{a.addr, c.addr, b.addr}, []uint64{5, 6, 5})
	a.set("", "")

	// A refresh (a new routing version): a row with a lower term keeps the
	// leader held, a higher one replaces it, even with no leader named.
	refreshes := cl.Routing().Refreshes
	status.Store(fakeStatus(5<<32|2, a.addr, a.addr, 5, b.addr, 5, "", 7))
	a.mu.Lock()
	a.version = fmt.Sprint(uint64(5<<32 | 2))
	a.mu.Unlock()
	next(k0)
	deadline = time.Now().Add(10 * time.Second)
	for cl.Routing().Refreshes == refreshes {
		if time.Now().After(deadline) {
			t.Fatal("no second refresh")
		}
		time.Sleep(time.Millisecond)
	}
	want("after the second refresh", []string{a.addr, c.addr, ""}, []uint64{5, 6, 7})

	// Group 1's leader fails: the retry goes to the cluster's leader, and
	// the table forgets c (keeping term 6); a's answer at term 6 then makes
	// a group 1's leader.
	c.take()
	a.take()
	c.mu.Lock()
	c.fail = connect.CodeUnavailable
	c.mu.Unlock()
	a.set("1 6", "")
	next(k1)
	if rc, ra := c.take(), a.take(); len(rc) != 1 || len(ra) != 1 {
		t.Fatalf("after group 1's leader failed: %d requests to it, %d to the cluster's leader; want 1 and 1", len(rc), len(ra))
	}
	want("after group 1's leader failed", []string{a.addr, a.addr, ""}, []uint64{5, 6, 7})

	// A share that fails for good fails the whole call: b, learned as
	// group 2's leader from a's forwarded answer at term 8, refuses.
	a.set("2 8", b.addr)
	next(k2)
	want("b leads group 2", []string{a.addr, a.addr, b.addr}, []uint64{5, 6, 8})
	a.set("", "")
	b.mu.Lock()
	b.fail = connect.CodeFailedPrecondition
	b.mu.Unlock()
	if _, err := cl.Next(ctx, "", k0, k2, k1); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("a call with a failing share: %v, want failed_precondition", err)
	}
}

// groupKeys returns perGroup keys of the default space owned by each group,
// as the cluster locates them (keys[g] for group g).
func groupKeys(t *testing.T, cl *client.Client, groups, perGroup int) [][]uint64 {
	t.Helper()
	spaces, err := cl.ListSpaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	size := uint64(0)
	for _, sp := range spaces {
		if sp.GetName() == seqd.DefaultSpaceName {
			size = sp.GetSectionSize()
		}
	}
	if size == 0 {
		t.Fatal("no default space")
	}
	var cand []uint64
	for sec := range uint64(256) {
		cand = append(cand, sec*size+7)
	}
	located, err := cl.LocateKeys(context.Background(), "", cand...)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]uint64, groups)
	for i, g := range located {
		if len(keys[g]) < perGroup {
			keys[g] = append(keys[g], cand[i])
		}
	}
	for g, ks := range keys {
		if len(ks) < perGroup {
			t.Fatalf("found %d keys of group %d", len(ks), g)
		}
	}
	return keys
}

// waitGroupsSettled waits until every group's leader serves and is its
// preferred leader (where the cluster's balancing leaves it), as both the
// cluster and ClusterStatus see it, and returns the leaders.
func waitGroupsSettled(t *testing.T, c *testcluster.Cluster, cl *client.Client, groups int) []*testcluster.Member {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		leaders := c.GroupLeaders()
		st, err := cl.ClusterStatus(context.Background())
		ok := err == nil && len(leaders) == groups && len(st.GetGroups()) == groups
		for g := 0; ok && g < groups; g++ {
			r := st.GetGroups()[g]
			ok = leaders[g] != nil && r.GetServing() && r.GetLeaderId() == r.GetPreferredLeader() && r.GetLeaderId() == leaders[g].ID
		}
		if ok {
			return leaders
		}
		if time.Now().After(deadline) {
			t.Fatalf("group leaders never settled: %v", st.GetGroups())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitGroupLeaders waits until the client's table names the given leaders,
// calling for keys meanwhile (answers carry what the table learns from).
func waitGroupLeaders(t *testing.T, cl *client.Client, leaders []*testcluster.Member, call func()) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		got, _ := cl.GroupLeaders()
		ok := len(got) == len(leaders) && cl.SectionSize("") != 0
		for g := 0; ok && g < len(leaders); g++ {
			ok = leaders[g] != nil && got[g] == leaders[g].APIAddr
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client's group leaders are %v, want those of %v", got, leaders)
		}
		call()
		time.Sleep(10 * time.Millisecond)
	}
}

// perKey checks that the values of keys strictly increase over last.
type perKey struct {
	mu   sync.Mutex
	last map[uint64]uint64
}

// nexter returns a function that calls Next for its keys through cl and
// checks the values with p (failing t on an error).
func (p *perKey) nexter(t *testing.T, cl *client.Client) func(ks ...uint64) {
	return func(ks ...uint64) {
		t.Helper()
		v, err := cl.Next(context.Background(), "", ks...)
		if err != nil {
			t.Fatal(err)
		}
		p.check(t, ks, v)
	}
}

func (p *perKey) check(t *testing.T, keys, vals []uint64) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(vals) != len(keys) {
		t.Fatalf("%d values for %d keys", len(vals), len(keys))
	}
	for i, k := range keys {
		if vals[i] <= p.last[k] {
			t.Fatalf("key %d: %d after %d", k, vals[i], p.last[k])
		}
		p.last[k] = vals[i]
	}
}

// TestGroupRouting runs a client against 3 nodes with 3 raft groups. Once
// every group's leader serves and the client has its table, calls naming
// keys of every group are split and each share goes straight to its
// group's leader: no answer comes forwarded, and each leader gets exactly
// its group's requests. Coalesced concurrent calls over keys of every
// group all get correct values. After one group's leader is killed, calls
// keep succeeding with values increasing per key, and once the client has
// learned the new leader they go straight to it again.
func TestGroupRouting(t *testing.T) {
	const groups = 3
	c := testcluster.Start(t, 3, testcluster.Options{Groups: groups})
	log := &hostLog{base: &http.Transport{}}
	// Unary calls, counted per node (TestStreamGroupRouting covers streams).
	cl, err := client.New(c.APIAddrs(), client.Options{HTTPClient: &http.Client{Transport: log}, RetryFor: time.Minute, DisableStreaming: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitGroupsSettled(t, c, cl, groups)
	keys := groupKeys(t, cl, groups, 2)
	all := slices.Concat(keys...)
	seen := &perKey{last: map[uint64]uint64{}}
	next := seen.nexter(t, cl)

	t.Run("direct", func(t *testing.T) {
		for attempt := 1; ; attempt++ {
			if directOnce(t, c, cl, log, keys, all, seen, next, attempt) {
				return
			}
		}
	})
	_ = ctx

	t.Run("coalesced", func(t *testing.T) {
		for attempt := 1; ; attempt++ {
			if coalescedOnce(t, c, cl, keys, all, seen, next, ctx, attempt) {
				return
			}
		}
	})

	t.Run("leader_killed", func(t *testing.T) {
		leaderKilled(t, c, cl, all, next)
	})
}

// groupTerms is every group's serving leader and its term, to tell whether
// leadership moved during a measurement.
func groupTerms(c *testcluster.Cluster) string {
	var b strings.Builder
	for g, m := range c.GroupLeaders() {
		if m == nil {
			fmt.Fprintf(&b, "%d:none ", g)
			continue
		}
		fmt.Fprintf(&b, "%d:%s@%d ", g, m.ID, m.Node().Group(g).Raft().CurrentTerm())
	}
	return b.String()
}

// moved reports, for a measurement that found forwarded answers, whether
// leadership changed meanwhile (a loaded machine: then the measurement is
// taken again, at most 5 times).
func moved(t *testing.T, before string, c *testcluster.Cluster, attempt int) bool {
	t.Helper()
	after := groupTerms(c)
	if after == before {
		return false
	}
	if attempt >= 5 {
		t.Fatalf("leadership kept changing during the measurement (%d attempts): %s -> %s", attempt, before, after)
	}
	t.Logf("leadership changed during attempt %d (%s -> %s): measuring again", attempt, before, after)
	return true
}

func directOnce(t *testing.T, c *testcluster.Cluster, cl *client.Client, log *hostLog,
	keys [][]uint64, all []uint64, seen *perKey, next func(ks ...uint64), attempt int) bool {
	t.Helper()
	ctx := context.Background()
	leaders := c.GroupLeaders()
	{
		waitGroupLeaders(t, cl, leaders, func() { next(all...) })
		before := groupTerms(c)
		log.take()
		forwarded, retried := cl.ForwardedAnswers(), cl.RetriedAttempts()
		const calls = 20
		for range calls {
			next(all...)
		}
		// Current and Reserve go to their group's leader as well.
		cur, err := cl.Current(ctx, "", all...)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range all {
			if cur[i] != seen.last[k] {
				t.Fatalf("Current of key %d: %d, want the last value %d", k, cur[i], seen.last[k])
			}
		}
		first, err := cl.Reserve(ctx, "", keys[2][0], 10)
		if err != nil {
			t.Fatal(err)
		}
		if first <= seen.last[keys[2][0]] {
			t.Fatalf("Reserve gave %d after %d", first, seen.last[keys[2][0]])
		}
		seen.last[keys[2][0]] = first + 9
		if n := cl.ForwardedAnswers() - forwarded; n != 0 {
			if moved(t, before, c, attempt) {
				return false
			}
			if r := cl.RetriedAttempts() - retried; r > 0 && attempt < 5 {
				t.Logf("%d answers came forwarded after %d retried attempts (attempt %d): measuring again", n, r, attempt)
				return false
			}
			t.Fatalf("%d answers came forwarded with a fresh table, want none", n)
		}
		hosts := map[string]int{}
		for _, h := range log.take() {
			hosts[h]++
		}
		want := map[string]int{}
		for g, m := range leaders {
			want[m.APIAddr] += calls + 1 // Next calls and Current
			if g == 2 {
				want[m.APIAddr]++ // Reserve
			}
		}
		if fmt.Sprint(hosts) != fmt.Sprint(want) {
			if moved(t, before, c, attempt) {
				return false
			}
			if r := cl.RetriedAttempts() - retried; r > 0 && attempt < 5 {
				t.Logf("requests per node %v after %d retried attempts (attempt %d): measuring again", hosts, r, attempt)
				return false
			}
			t.Fatalf("requests per node %v, want %v (each group's share to its leader)", hosts, want)
		}
	}
	return true
}

func coalescedOnce(t *testing.T, c *testcluster.Cluster, cl *client.Client, keys [][]uint64, all []uint64,
	seen *perKey, next func(ks ...uint64), ctx context.Context, attempt int) bool {
	t.Helper()
	const groups = 3
	waitGroupLeaders(t, cl, c.GroupLeaders(), func() { next(all...) })
	terms := groupTerms(c)
	{
		forwarded, retried := cl.ForwardedAnswers(), cl.RetriedAttempts()
		before := cl.BatchStats()
		var mu sync.Mutex
		values := map[[2]uint64]bool{}
		var wg sync.WaitGroup
		for w := range 50 {
			wg.Go(func() {
				last := map[uint64]uint64{}
				for i := range 50 {
					// Keys of two or three groups, in varying order.
					ks := []uint64{keys[(w+i)%groups][i%2], keys[(w+i+1)%groups][(i/2)%2]}
					if i%3 == 0 {
						ks = append(ks, keys[(w+i+2)%groups][w%2])
					}
					v, err := cl.Next(ctx, "", ks...)
					if err != nil {
						t.Error(err)
						return
					}
					for j, k := range ks {
						if v[j] <= last[k] {
							t.Errorf("key %d: %d after %d", k, v[j], last[k])
							return
						}
						last[k] = v[j]
						mu.Lock()
						if values[[2]uint64{k, v[j]}] {
							t.Errorf("key %d: value %d twice", k, v[j])
						}
						values[[2]uint64{k, v[j]}] = true
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		st := cl.BatchStats()
		t.Logf("%d shares in %d requests", st.Calls-before.Calls, st.Requests-before.Requests)
		if n := cl.ForwardedAnswers() - forwarded; n != 0 {
			if moved(t, terms, c, attempt) {
				return false
			}
			// An attempt that timed out on a loaded machine is tried
			// again through group 0's leader, which forwards it.
			if r := cl.RetriedAttempts() - retried; r > 0 && attempt < 5 {
				t.Logf("%d answers came forwarded after %d retried attempts (attempt %d): measuring again", n, r, attempt)
				return false
			}
			t.Fatalf("%d coalesced answers came forwarded, want none", n)
		}
		// Later calls still see larger values than any given out.
		for k, v := range values {
			if v && k[1] > seen.last[k[0]] {
				seen.last[k[0]] = k[1]
			}
		}
		next(all...)
	}
	return true
}

func leaderKilled(t *testing.T, c *testcluster.Cluster, cl *client.Client, all []uint64, next func(ks ...uint64)) {
	t.Helper()
	{
		leaders := c.GroupLeaders()
		victim := leaders[1]
		if victim == leaders[0] {
			t.Fatalf("group 1's leader %s also leads group 0", victim.ID)
		}
		victim.Kill()
		// Calls keep succeeding (after the group re-elects), values
		// increasing per key.
		for range 20 {
			next(all...)
		}
		var now []*testcluster.Member
		deadline := time.Now().Add(45 * time.Second)
		for {
			now = c.GroupLeaders()
			if now[1] != nil && now[1] != victim {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("group 1 has no new serving leader")
			}
			next(all...)
		}
		t.Logf("group 1 moved from %s to %s", victim.ID, now[1].ID)
		waitGroupLeaders(t, cl, now, func() { next(all...) })
		forwarded := cl.ForwardedAnswers()
		for range 10 {
			next(all...)
		}
		if n := cl.ForwardedAnswers() - forwarded; n != 0 {
			t.Fatalf("%d answers came forwarded after the client learned the new leader, want none", n)
		}
	}
}
