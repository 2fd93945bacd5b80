package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

// GroupClass is the class of group-isolation: one raft group's traffic
// cut on one server, through the servers' test hook (--unsafe-test-hooks;
// every group shares one raft port, so iptables cannot do it).
const GroupClass = "group"

type groupCut struct {
	node  *nodes.Node
	group int
}

func (e *Env) noteCut(c groupCut, on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cuts == nil {
		e.cuts = map[groupCut]bool{}
	}
	if on {
		e.cuts[c] = true
	} else {
		delete(e.cuts, c)
	}
}

// uncut restores group c.group's traffic on c.node, retrying for up to
// timeout (the node may be paused by another lane).
func (e *Env) uncut(c groupCut, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := e.Cluster.CutGroup(ctx, c.node, c.group, false)
		cancel()
		if err == nil || c.node.State() == nodes.Killed || c.node.State() == nodes.Down {
			// A restarted process starts with no cut.
			e.noteCut(c, false)
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// uncutAll restores every group cut the nemesis left (HealAll).
func (e *Env) uncutAll() ([]string, error) {
	e.mu.Lock()
	var cs []groupCut
	for c := range e.cuts {
		cs = append(cs, c)
	}
	e.mu.Unlock()
	sort.Slice(cs, func(i, j int) bool {
		return cs[i].node.ID < cs[j].node.ID || cs[i].node.ID == cs[j].node.ID && cs[i].group < cs[j].group
	})
	var touched []string
	var errs []error
	for _, c := range cs {
		touched = append(touched, fmt.Sprintf("%s (group %d traffic restored)", c.node.ID, c.group))
		errs = append(errs, e.uncut(c, 10*time.Second))
	}
	return touched, errors.Join(errs...)
}

// groupIsolation cuts one raft group's traffic on the node that leads it
// (a random group), for that group only: its other groups keep working.
func groupIsolation(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	l, g, note := e.groupLeader(ctx, rng)
	if note == "" {
		note = fmt.Sprintf(" (group %d leader)", g)
	}
	c := groupCut{node: l, group: g}
	e.noteCut(c, true)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := e.Cluster.CutGroup(cctx, l, g, true)
	cancel()
	return []string{fmt.Sprintf("%s%s: group %d's raft traffic cut", l.ID, note, g)}, func() error {
		return e.uncut(c, 10*time.Second)
	}, err
}
