package group_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/group"
)

// host is the smallest group.Host: this test plays the server that runs the
// group. vouched gates the lease loop as the real host's gate does.
type host struct {
	vouched  atomic.Bool
	stalled  atomic.Bool  // StalledSince answers this
	listens  atomic.Int64 // WaitListening calls
	changes  atomic.Int64
	moved    atomic.Int64
	logWrite atomic.Int64

	// With hang set, ProtocolConfirmed plays a server that never answers:
	// it waits until its context ends and says no. asked counts those
	// questions, and renewedWhileAsked those during which g renewed its
	// lease twice.
	hang              atomic.Bool
	asked             atomic.Int64
	renewedWhileAsked atomic.Int64
	g                 atomic.Pointer[group.Group]

	// With gate set, ProtocolConfirmed tells gate.asked that a move asks,
	// and answers yes once gate.release is closed.
	gate atomic.Pointer[moveGate]
}

type moveGate struct {
	asked, release chan struct{}
	// only, when set, gates only the questions whose context carries it
	// as a key; the others go on as without a gate.
	only any
}

func (h *host) WaitListening(context.Context, time.Time) bool { h.listens.Add(1); return true }

func (h *host) StalledSince(time.Time) bool { return h.stalled.Load() }

func (h *host) WaitAdmitted(ctx context.Context, _ int) bool {
	for !h.vouched.Load() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}
func (h *host) ProtocolTarget(raft.Configuration) uint64 { return fsm.ProtocolVersion }
func (h *host) ProtocolConfirmed(ctx context.Context, _ raft.Configuration, _ uint64) bool {
	if gt := h.gate.Load(); gt != nil && (gt.only == nil || ctx.Value(gt.only) != nil) {
		select {
		case gt.asked <- struct{}{}:
		default:
		}
		select {
		case <-gt.release:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !h.hang.Load() {
		return true
	}
	h.asked.Add(1)
	g := h.g.Load()
	var from int64
	if g != nil {
		from = g.Status().Renewals
	}
	counted := false
	for {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
		if g != nil && !counted && g.Status().Renewals >= from+2 {
			counted = true
			h.renewedWhileAsked.Add(1)
		}
	}
}
func (h *host) KindsApplied(raft.Configuration, uint64) error { return nil }
func (h *host) ProtocolMoved()                                { h.moved.Add(1) }
func (h *host) LeadershipChanged(bool)                        { h.changes.Add(1) }
func (h *host) WallClockOK() error                            { return nil }
func (h *host) LogWrite(error)                                { h.logWrite.Add(1) }
func (h *host) FSMDisk(bool, error)                           {}

func open(t *testing.T, dir string, h *host) (*group.Group, raft.ServerAddress) {
	t.Helper()
	return openWith(t, dir, h, nil)
}

// openWith is open with the config changed by change (nil: as it is).
func openWith(t *testing.T, dir string, h *host, change func(*group.Config)) (*group.Group, raft.ServerAddress) {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := group.Config{
		ID: "s1", Dir: dir, Transport: tr, Host: h,
		Options: group.Options{
			Lease: 200 * time.Millisecond, LeaseMargin: 50 * time.Millisecond,
			HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			LeaderLeaseTimeout: 50 * time.Millisecond,
		},
	}
	if change != nil {
		change(&cfg)
	}
	g, err := group.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(); _ = tr.Close() })
	return g, tr.LocalAddr()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A group serves only once its host vouches for it, creates the default
// space and moves to the newest protocol as its first leader, and after a
// restart of its data directory hands out values above every value it
// handed out before.
func TestGroupServesAfterVouchAndResumesAboveAfterReopen(t *testing.T) {
	dir := t.TempDir()
	h := &host{}
	g, addr := open(t, dir, h)
	if g.HadState() {
		t.Fatal("a new directory reported state")
	}
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "raft leadership", g.IsLeader)
	// Leader, but not vouched for: no entry, no lease.
	// Watch for longer than the lease wait (serving would have begun by then).
	for start := time.Now(); time.Since(start) < 400*time.Millisecond; time.Sleep(5 * time.Millisecond) {
		if g.Allocator().Serving() {
			t.Fatal("an unvouched group serves")
		}
	}
	if _, ok := g.FSM().Space(seqd.DefaultSpaceName); ok {
		t.Fatal("an unvouched group wrote the default space")
	}
	h.vouched.Store(true)
	waitFor(t, "serving", g.Allocator().Serving)
	if _, ok := g.FSM().Space(seqd.DefaultSpaceName); !ok {
		t.Fatal("the first leader did not create the default space")
	}
	if st := g.Status(); st.ClusterID == "" || h.moved.Load() == 0 || st.Renewals == 0 || h.changes.Load() == 0 {
		t.Fatalf("status %+v, protocol moves %d, leadership changes %d", st, h.moved.Load(), h.changes.Load())
	}
	var last uint64
	for range 5 {
		v, err := g.Allocator().Next(context.Background(), seqd.DefaultSpaceName, []uint64{7})
		if err != nil {
			t.Fatal(err)
		}
		if v[0] <= last {
			t.Fatalf("Next went from %d to %d", last, v[0])
		}
		last = v[0]
	}
	if created, err := g.CreateSpace(context.Background(), seqd.Space{Name: "x", Step: 5, SectionSize: 1}); err != nil || !created {
		t.Fatalf("CreateSpace: %v %v", created, err)
	}
	if _, err := g.CreateSpace(context.Background(), seqd.Space{Name: "x", Step: 6, SectionSize: 1}); !errors.Is(err, seqd.ErrSpaceExists) {
		t.Fatalf("CreateSpace with other settings: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if g.Allocator().Serving() {
		t.Fatal("a closed group serves")
	}

	h2 := &host{}
	h2.vouched.Store(true)
	g2, _ := open(t, dir, h2)
	if !g2.HadState() {
		t.Fatal("a reopened directory reported no state")
	}
	waitFor(t, "serving after reopen", g2.Allocator().Serving)
	v, err := g2.Allocator().Next(context.Background(), seqd.DefaultSpaceName, []uint64{7})
	if err != nil {
		t.Fatal(err)
	}
	if v[0] <= last {
		t.Fatalf("after reopen Next = %d, not above %d", v[0], last)
	}
	if h2.logWrite.Load() == 0 {
		t.Fatal("the host saw no log write")
	}
}

// A leader whose process stalled between listening and a renewal (paused:
// it heard nothing meanwhile) grants itself no lease from that renewal: it
// listens again first, and serves once a renewal was not interrupted.
func TestStallDuringRenewalGrantsNothing(t *testing.T) {
	h := &host{}
	h.stalled.Store(true)
	g, addr := open(t, t.TempDir(), h)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "raft leadership", g.IsLeader)
	h.vouched.Store(true)
	waitFor(t, "renewals while stalled", func() bool { return g.Status().Renewals == 0 && h.listens.Load() >= 3 })
	if g.Allocator().Serving() {
		t.Fatal("a leader serves on a renewal its process stalled through")
	}
	h.stalled.Store(false)
	waitFor(t, "serving once no stall interrupts a renewal", g.Allocator().Serving)
}

// The serving loop waits on nothing but its renewals: a protocol move's
// question to the other servers runs beside it, so a server that never
// answers (its API hung while its gossip is up) holds no renewal back. With
// the question in the loop, each one held a round for its whole bound
// (250 ms, above this 200 ms lease) and the lease lapsed.
func TestAProtocolQuestionNeverHoldsTheLeaseLoop(t *testing.T) {
	h := &host{}
	h.hang.Store(true)
	h.vouched.Store(true)
	g, addr := open(t, t.TempDir(), h)
	h.g.Store(g)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "serving", g.Allocator().Serving)
	asked := h.asked.Load()
	waitFor(t, "three questions while serving", func() bool { return h.asked.Load() >= asked+3 })
	if n := h.renewedWhileAsked.Load(); n < 2 {
		t.Fatalf("the lease was renewed twice during %d of %d questions that hung: the loop waited on them", n, h.asked.Load())
	}
	if p := g.FSM().Protocol(); p >= fsm.ProtocolVersion {
		t.Fatalf("the group moved to protocol %d although no server answered", p)
	}
}

// authority plays group 0's committed state on this server for a group
// other than group 0: one space, x, whose step the test changes.
type authority struct{ step atomic.Uint64 }

func (a *authority) Space(name string) (seqd.Space, bool) {
	if name != "x" {
		return seqd.Space{}, false
	}
	return seqd.Space{Name: "x", Step: a.step.Load(), SectionSize: 1}, true
}
func (a *authority) Spaces() []seqd.Space          { x, _ := a.Space("x"); return []seqd.Space{x} }
func (a *authority) Deleted(string) (uint64, bool) { return 0, false }
func (a *authority) Record(name string) (fsm.SpaceRecord, bool) {
	sp, ok := a.Space(name)
	return fsm.SpaceRecord{Space: sp}, ok
}
func (a *authority) ClusterID() string   { return "c1" }
func (a *authority) Groups() (int, bool) { return 2, true }
func (a *authority) Protocol() uint64    { return fsm.ProtocolVersion }

// The serving loop waits on nothing but its renewals, a space's settings
// asked of group 0's leader included: when a group's record of a space
// differs from its copy of group 0, the question runs beside the loop. A
// leader of group 0 that never answers (its API hung) is asked until the
// question's bound, 2 s in the host, 1 s here, five leases: with the
// question in the loop, each one held a round for its whole bound and the
// lease lapsed.
func TestASpaceQuestionNeverHoldsTheLeaseLoop(t *testing.T) {
	h := &host{}
	h.vouched.Store(true)
	a := &authority{}
	a.step.Store(5)
	var asked, renewedWhileAsked atomic.Int64
	var gp atomic.Pointer[group.Group]
	ask := func(ctx context.Context, name string) (fsm.SpaceRecord, error) {
		asked.Add(1)
		g := gp.Load()
		from := g.Status().Renewals
		counted := false
		bound := time.After(time.Second)
		for {
			select {
			case <-ctx.Done():
				return fsm.SpaceRecord{}, ctx.Err()
			case <-bound:
				return fsm.SpaceRecord{}, context.DeadlineExceeded
			case <-time.After(5 * time.Millisecond):
			}
			if !counted && g.Status().Renewals >= from+2 {
				counted = true
				renewedWhileAsked.Add(1)
			}
		}
	}
	g, addr := openWith(t, t.TempDir(), h, func(c *group.Config) {
		c.Index, c.Groups, c.Authority, c.AskSpace = 1, 2, a, ask
	})
	gp.Store(g)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "serving", g.Allocator().Serving)
	waitFor(t, "the copy of group 0's space", func() bool { sp, ok := g.FSM().Space("x"); return ok && sp.Step == 5 })
	a.step.Store(7) // the record now differs from the copy: ask group 0
	waitFor(t, "three questions while serving", func() bool { return asked.Load() >= 3 })
	if n := renewedWhileAsked.Load(); n < 2 {
		t.Fatalf("the lease was renewed twice during %d of %d questions that hung: the loop waited on them", n, asked.Load())
	}
	if sp, _ := g.FSM().Space("x"); sp.Step != 5 {
		t.Fatalf("the group followed its copy of group 0 (step %d) without an answer from group 0's leader", sp.Step)
	}
}

// An entry is proposed only while its caller still waits: an apply whose
// context has ended (a term's lease loop or upkeep after a step-down) puts
// nothing in the log.
func TestAnApplyWhoseCallerIsGoneProposesNothing(t *testing.T) {
	h := &host{}
	h.vouched.Store(true)
	g, addr := open(t, t.TempDir(), h)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "serving", g.Allocator().Serving)
	if err := g.Apply(context.Background(), fsm.EncodeCreateSpace(seqd.Space{Name: "live", Step: 5, SectionSize: 1})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Apply(ctx, fsm.EncodeCreateSpace(seqd.Space{Name: "gone", Step: 5, SectionSize: 1})); !errors.Is(err, context.Canceled) {
		t.Fatalf("an apply with an ended context: %v", err)
	}
	// A barrier after it: everything proposed before is applied.
	if err := g.Apply(context.Background(), fsm.EncodeCreateSpace(seqd.Space{Name: "after", Step: 5, SectionSize: 1})); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.FSM().Space("gone"); ok {
		t.Fatal("an apply whose caller had gone was proposed and committed")
	}
}

// Open refuses a configuration without the parts only the host can give.
func TestOpenRefusesIncompleteConfig(t *testing.T) {
	_, err := group.Open(group.Config{ID: "s1", Dir: t.TempDir(), Options: group.Options{Lease: time.Second}})
	if !errors.Is(err, group.ErrInvalidConfig) {
		t.Fatalf("Open without transport and host: %v", err)
	}
}

// TestRaftWaitsEndWhenTheGroupStops: raft may accept a leadership transfer
// as it shuts down and never answer it (the request waits in a buffered
// channel no loop reads any more; raft picks at random between that and
// refusing). A wait on raft ends when the group stops, so a host's close
// never hangs on a move that was under way.
func TestRaftWaitsEndWhenTheGroupStops(t *testing.T) {
	h := &host{}
	h.vouched.Store(true)
	g, addr := open(t, t.TempDir(), h)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "raft leadership", g.IsLeader)
	if err := g.ShutdownRaft(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		done := make(chan error, 1)
		go func() { done <- group.AwaitTransfer(g) }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("attempt %d: a transfer on a stopped group succeeded", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("attempt %d: a wait on a transfer raft accepted after it stopped did not end", i)
		}
	}
}

// TestAServerAddedDuringAMoveIsAskedAboutTheNewProtocol: a server added
// while the leader's move to a newer protocol asks the configuration's
// servers is asked, once the move committed, about the newer protocol,
// never about the older one while the move is under way: otherwise it
// would join a group on a protocol it was never asked about (members.go).
func TestAServerAddedDuringAMoveIsAskedAboutTheNewProtocol(t *testing.T) {
	h := &host{}
	h.hang.Store(true) // no move yet: the group serves on protocol 1
	h.vouched.Store(true)
	g, addr := open(t, t.TempDir(), h)
	h.g.Store(g)
	if err := g.Raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "s1", Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "serving", g.Allocator().Serving)
	if p := g.FSM().Protocol(); p >= fsm.ProtocolVersion {
		t.Fatalf("the group is on protocol %d before any move", p)
	}
	gt := &moveGate{asked: make(chan struct{}, 1), release: make(chan struct{})}
	h.gate.Store(gt)
	h.hang.Store(false)
	select {
	case <-gt.asked: // the upkeep's move asks, and waits for the answer
	case <-time.After(10 * time.Second):
		t.Fatal("no move asked within 10 s")
	}

	type question struct {
		protocol  uint64
		duringAsk bool
	}
	var moving atomic.Bool
	moving.Store(true)
	questions := make(chan question, 2)
	added := make(chan error, 1)
	go func() {
		ok, err := g.AddNonvoter("s2", "127.0.0.1:1", 0, 5*time.Second, func(p uint64) bool {
			questions <- question{p, moving.Load()}
			return true
		})
		if err == nil && !ok {
			err = errors.New("not added")
		}
		added <- err
	}()
	// Give an add that does not wait for the move the time to ask (it
	// would at once); the move's question is bounded at 250 ms.
	var early *question
	select {
	case q := <-questions:
		early = &q
	case <-time.After(100 * time.Millisecond):
	}
	moving.Store(false)
	close(gt.release)
	if err := <-added; err != nil {
		t.Fatalf("the add: %v", err)
	}
	q := early
	if q == nil {
		q = new(<-questions)
	}
	if q.duringAsk || q.protocol != fsm.ProtocolVersion {
		t.Fatalf("the added server was asked about protocol %d (while the move asked: %v), want %d after the move",
			q.protocol, q.duringAsk, fsm.ProtocolVersion)
	}
	if p := g.FSM().Protocol(); p != fsm.ProtocolVersion {
		t.Fatalf("the group is on protocol %d after the move, want %d", p, fsm.ProtocolVersion)
	}
}
