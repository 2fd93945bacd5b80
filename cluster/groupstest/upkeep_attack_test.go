package groupstest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/internal/history"
)

// TestGroupsUpkeepUnderStepChurnAndMoves attacks the leader's upkeep
// (group/lease.go upkeepBeside): for about 12 s, group 0's serving leader
// changes space "churn"'s step every 50 ms while every group's leadership
// is moved every 400 ms (so that step-downs land while an upkeep is
// between its question to group 0 and its apply), and 12 callers take
// values of the space's keys in every group. Then a last step is set and
// every group's record must reach it within 10 s (an old leader's upkeep
// neither blocks the next one nor lands after it), and the whole history
// has no repeat and no value below one taken by a call that ended before
// the call began.
func TestGroupsUpkeepUnderStepChurnAndMoves(t *testing.T) {
	const groups = 3
	c, cl, ctx := balancedCluster(t, groups, 2*time.Minute)
	if _, err := cl.CreateSpace(ctx, "churn", 10, 10); err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for _, k := range keysOfGroups("churn", 10, groups) {
		keys = append(keys, k, k+1)
	}
	rec := history.NewRecorder()
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var oks atomic.Int64
	var mu sync.Mutex
	codes := map[connect.Code]int{}
	for w := range 12 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			for lctx.Err() == nil {
				k := keys[rng.IntN(len(keys))]
				cctx, cancel := context.WithTimeout(lctx, 5*time.Second)
				op := history.Op{Key: k, Client: fmt.Sprintf("w%d", w), Start: rec.Now()}
				vals, err := cl.Next(cctx, "churn", k)
				op.End = rec.Now()
				cancel()
				if err != nil {
					if lctx.Err() == nil {
						mu.Lock()
						codes[connect.CodeOf(err)]++
						mu.Unlock()
					}
					time.Sleep(2 * time.Millisecond)
					continue
				}
				op.First, op.Last = vals[0], vals[0]
				rec.Add(op)
				oks.Add(1)
			}
		})
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	var changes, moves int
	end := time.Now().Add(12 * time.Second)
	nextMove := time.Now()
	for step := uint64(11); time.Now().Before(end); step++ {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if m := c.ServingLeader(); m != nil && m.Node().UpdateSpace(sctx, "churn", step) == nil {
			changes++
		}
		cancel()
		if time.Now().After(nextMove) {
			for g, m := range c.GroupLeaders() {
				if m != nil && m.Node().Group(g).TransferLeadership("", nil) == nil {
					moves++
				}
			}
			nextMove = time.Now().Add(400 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d step changes, %d leadership moves, %d calls so far", changes, moves, oks.Load())

	const final = 5000
	waitUntil(t, 30*time.Second, "the last step set in group 0", func() bool {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m := c.ServingLeader()
		return m != nil && m.Node().UpdateSpace(sctx, "churn", final) == nil
	})
	set := time.Now()
	waitUntil(t, 10*time.Second, "every group's leader's record of the last step", func() bool {
		for g, m := range c.GroupLeaders() {
			if m == nil {
				return false
			}
			if sp, ok := m.Node().Group(g).FSM().Space("churn"); !ok || sp.Step != final {
				return false
			}
		}
		return true
	})
	t.Logf("every group on the last step %v after it was set", time.Since(set).Round(time.Millisecond))
	// The records stay there: no late apply of an old upkeep takes one back.
	time.Sleep(2 * time.Second)
	for _, m := range c.Nodes {
		for g := range groups {
			if sp, ok := m.Node().Group(g).FSM().Space("churn"); !ok || sp.Step != final {
				t.Errorf("%s group %d: record %+v (found %v), want step %d", m.ID, g, sp, ok, final)
			}
		}
	}
	stop()
	wg.Wait()
	ops := rec.Ops()
	an := history.Check(ops, 10)
	for _, a := range an {
		t.Errorf("%s: %v", a, a.Ops)
	}
	for code, n := range codes {
		if code != connect.CodeUnavailable && code != connect.CodeDeadlineExceeded {
			t.Errorf("%d calls failed with %v", n, code)
		}
	}
	if len(ops) < 500 {
		t.Errorf("only %d calls succeeded (errors %v)", len(ops), codes)
	}
	t.Logf("%d calls, %d anomalies, errors %v", len(ops), len(an), codes)
}
