package group_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/group"
)

// member is one server of a group of three in these tests.
type member struct {
	g    *group.Group
	h    *host
	id   raft.ServerID
	addr raft.ServerAddress
}

// openThree opens a group of three voters on 127.0.0.1 whose hosts refuse
// every protocol move (hang) until a test lets one through: the group
// serves on protocol 1. It returns them with the serving leader first.
func openThree(t *testing.T) []member {
	t.Helper()
	return openThreeWith(t, nil)
}

// openThreeWith is openThree with each config changed by change.
func openThreeWith(t *testing.T, change func(*group.Config)) []member {
	t.Helper()
	ms := make([]member, 3)
	var conf raft.Configuration
	for i := range ms {
		h := &host{}
		h.hang.Store(true)
		h.vouched.Store(true)
		id := raft.ServerID(fmt.Sprintf("s%d", i+1))
		g, addr := openWith(t, t.TempDir(), h, func(c *group.Config) {
			c.ID = string(id)
			if change != nil {
				change(c)
			}
		})
		h.g.Store(g)
		ms[i] = member{g, h, id, addr}
		conf.Servers = append(conf.Servers, raft.Server{ID: id, Address: addr})
	}
	if err := ms[0].g.Raft().BootstrapCluster(conf).Error(); err != nil {
		t.Fatal(err)
	}
	var lead int
	waitFor(t, "a serving leader", func() bool {
		for i, m := range ms {
			if m.g.IsLeader() && m.g.Allocator().Serving() {
				lead = i
				return true
			}
		}
		return false
	})
	ms[0], ms[lead] = ms[lead], ms[0]
	if p := ms[0].g.FSM().Protocol(); p >= fsm.ProtocolVersion {
		t.Fatalf("the group is on protocol %d before any move", p)
	}
	return ms
}

// transfer hands leadership from one member to another and waits until
// the other leads.
func transfer(t *testing.T, from, to member) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s's leadership handed to %s", from.id, to.id), func() bool {
		if to.g.IsLeader() {
			return true
		}
		if from.g.IsLeader() {
			_ = from.g.Raft().LeadershipTransferToServer(to.id, to.addr).Error()
		}
		return to.g.IsLeader()
	})
}

// TestAnAddWhoseLeaderLostLeadershipWhileAskingAddsNothing: a leader that
// asks a server about its group's protocol, loses leadership while it asks
// to a server that moves the group to a newer protocol, and leads again
// before the answer, must not add the server on its answer about the
// older protocol: the server would join a group on a protocol it was
// never asked about.
func TestAnAddWhoseLeaderLostLeadershipWhileAskingAddsNothing(t *testing.T) {
	ms := openThree(t)
	a, b := ms[0], ms[1]
	asked := make(chan uint64, 1)
	release := make(chan struct{})
	type result struct {
		added bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		added, err := a.g.AddNonvoter("x", "127.0.0.1:1", 0, 5*time.Second, func(p uint64) bool {
			asked <- p
			<-release
			return true
		})
		done <- result{added, err}
	}()
	var p uint64
	select {
	case p = <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the add asked nothing within 10 s")
	}

	// While the question is out: b leads and moves the group, then a
	// leads again.
	b.h.hang.Store(false)
	transfer(t, a, b)
	waitFor(t, "b's move to the newest protocol", func() bool { return b.g.FSM().Protocol() == fsm.ProtocolVersion })
	transfer(t, b, a)
	waitFor(t, "a applying b's move", func() bool { return a.g.FSM().Protocol() == fsm.ProtocolVersion })
	close(release)

	r := <-done
	if r.added && r.err == nil {
		t.Fatalf("the server was added to a group on protocol %d, asked about protocol %d before a move committed", a.g.FSM().Protocol(), p)
	}
	if r.err != nil && !errors.Is(r.err, group.ErrNotReady) {
		t.Logf("the add failed: %v", r.err)
	}
	cf := a.g.Raft().GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == "x" {
			t.Fatalf("server x is in the configuration, asked about protocol %d, on protocol %d", p, a.g.FSM().Protocol())
		}
	}
}

// TestALeaderAddsNoServerBeforeItsBarrier: a leader adds no server before
// its barrier applied the entries of earlier terms (a move among them
// would change the protocol the server must be asked about), even when it
// led, barrier applied, in an earlier term; once it applied, it adds.
func TestALeaderAddsNoServerBeforeItsBarrier(t *testing.T) {
	ms := openThree(t)
	a, b := ms[0], ms[1]
	transfer(t, a, b)
	waitFor(t, "b serving", b.g.Allocator().Serving)
	transfer(t, b, a)
	// b leads again, in a later term, held before its barrier.
	b.h.vouched.Store(false)
	transfer(t, a, b)
	asked := false
	added, err := b.g.AddNonvoter("x", "127.0.0.1:1", 0, 5*time.Second, func(uint64) bool { asked = true; return true })
	if !errors.Is(err, group.ErrNotReady) || added || asked {
		t.Fatalf("a leader before its barrier: added %v, asked %v, err %v; want ErrNotReady, nothing asked", added, asked, err)
	}
	b.h.vouched.Store(true)
	waitFor(t, "b serving", b.g.Allocator().Serving)
	added, err = b.g.AddNonvoter("x", "127.0.0.1:1", 0, 5*time.Second, func(p uint64) bool { return p == b.g.FSM().Protocol() })
	if !added || err != nil {
		t.Fatalf("a leader past its barrier: added %v, err %v", added, err)
	}
}

type moveKey struct{}

// TestAMoveWhoseLeaderLostLeadershipWhileAskingMovesNothing: a leader that
// asks its configuration's servers about a newer protocol, loses
// leadership while it asks to a server that adds another server (asked,
// rightly, about the older protocol), and leads again before the answers,
// must not move the group on answers that never covered the added server.
func TestAMoveWhoseLeaderLostLeadershipWhileAskingMovesNothing(t *testing.T) {
	// A lease of 3 s bounds a move's question at 1 s.
	ms := openThreeWith(t, func(c *group.Config) { c.Lease = 3 * time.Second })
	a, b := ms[0], ms[1]
	gt := &moveGate{asked: make(chan struct{}, 1), release: make(chan struct{}), only: moveKey{}}
	a.h.gate.Store(gt)
	a.h.hang.Store(false)
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		// As membership calls it, on every reconcile pass.
		a.g.EnsureProtocol(context.WithValue(context.Background(), moveKey{}, true))
	}()
	select {
	case <-gt.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the move asked nothing within 10 s")
	}
	started := time.Now()

	transfer(t, a, b)
	var asked uint64
	waitFor(t, "b adding x", func() bool {
		added, err := b.g.AddNonvoter("x", "127.0.0.1:1", 0, 5*time.Second, func(p uint64) bool { asked = p; return true })
		return added && err == nil
	})
	transfer(t, b, a)
	if time.Since(started) > 900*time.Millisecond {
		t.Skip("the leadership moves took longer than the move's question")
	}
	close(gt.release)
	<-moved

	p := a.g.FSM().Protocol()
	if p != asked {
		t.Fatalf("the group moved to protocol %d with server x in its configuration, asked only about protocol %d", p, asked)
	}
}

// TestARemovalDecidesAfterAnAddInProgress: a removal decides on the
// configuration under the lock every change takes. While an add of a
// server is under way (it holds the lock while it asks the server its
// questions, and the server is not in the configuration yet), a removal
// of that server waits for it and removes what it added; it must not find
// the server absent and answer that it is not in the group, leaving it
// added once the add ends.
func TestARemovalDecidesAfterAnAddInProgress(t *testing.T) {
	a := openThree(t)[0]
	asked := make(chan struct{})
	release := make(chan struct{})
	added := make(chan error, 1)
	go func() {
		ok, err := a.g.AddNonvoter("x", "127.0.0.1:1", 0, 5*time.Second, func(uint64) bool {
			close(asked)
			<-release
			return true
		})
		if err == nil && !ok {
			err = errors.New("the add was refused")
		}
		added <- err
	}()
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the add asked nothing within 10 s")
	}
	removed := make(chan error, 1)
	entered := make(chan struct{})
	decided := make(chan struct{})
	go func() {
		close(entered)
		removed <- a.g.RemoveDecided(context.Background(), func(conf raft.Configuration) (raft.Server, error) {
			close(decided)
			for _, s := range conf.Servers {
				if s.ID == "x" {
					return s, nil
				}
			}
			return raft.Server{}, errors.New("x is not in the group")
		}, 5*time.Second)
	}()
	<-entered
	// The removal must not decide while the add is under way: a decision
	// made then cannot see the server it adds.
	select {
	case <-decided:
		t.Fatal("the removal decided while the add was under way")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	for what, ch := range map[string]chan error{"the add": added, "the removal after the add": removed} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10 s", what)
		}
	}
	cf := a.g.Raft().GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == "x" {
			t.Fatalf("x is in the configuration after its removal: %+v", s)
		}
	}
}
