package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

// Membership faults use the operator procedures of README.md's Operations
// section, run against the live cluster as an operator would: the seqd
// binary (`seqd node remove --addr A ID`), stopping a server, deleting its
// data directory and starting it again with unchanged flags (so it joins
// through gossip as a new server: a non-voter first, promoted once caught
// up). They never remove a voter unless at least 3 are running, and leave
// at least 3 (on 3 nodes: transiently 2, one server being replaced).

const (
	// rejoinTimeout bounds the wait for a re-added server to be a voter
	// again (it is added as a non-voter within about a second and promoted
	// after about two seconds of keeping up).
	rejoinTimeout = 45 * time.Second
	// removeTimeout bounds one `seqd node remove` (its --timeout, retries
	// included).
	removeTimeout = 15 * time.Second
	// leaderShare is the share of membership faults that pick the leader.
	leaderShare = 4 // one in leaderShare
)

// view asks the cluster for its membership, waiting (bounded) for an answer
// from a leader.
func (e *Env) view(ctx context.Context, wait time.Duration) (nodes.View, error) {
	deadline := time.Now().Add(wait)
	for {
		v, err := e.Cluster.Members(ctx, 3*time.Second)
		if err == nil && v.Leader != "" {
			return v, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err == nil {
				err = errors.New("no leader answered")
			}
			return v, err
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// busy reports whether a node is in the middle of a membership change or an
// operator fault (other faults leave it alone).
func (e *Env) busy(n *nodes.Node) bool {
	e.mu.Lock()
	dirty := e.dirty[n.ID]
	e.mu.Unlock()
	return dirty || e.isBroken(n)
}

// pickVoters picks up to k running voters for a membership fault: at most
// as many as leave 3 voters (at least one, so on 3 voters one is removed
// transiently), the leader in one fault of leaderShare, followers
// otherwise. The leader, when picked, comes last (removing it hands
// leadership over). It refuses with fewer than 3 running voters.
func (e *Env) pickVoters(ctx context.Context, rng *rand.Rand, k int) ([]*nodes.Node, nodes.View, error) {
	v, err := e.view(ctx, 10*time.Second)
	if err != nil {
		return nil, v, fmt.Errorf("membership unknown: %w", err)
	}
	var leader *nodes.Node
	var followers []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if m := v.Members[n.ID]; !m.Voter || n.State() != nodes.Running || e.busy(n) {
			continue
		}
		if n.ID == v.Leader {
			leader = n
		} else {
			followers = append(followers, n)
		}
	}
	voters := len(followers)
	if leader != nil {
		voters++
	}
	if voters < 3 {
		return nil, v, fmt.Errorf("only %d running voters: not removing any", voters)
	}
	k = max(1, min(k, voters-3))
	rng.Shuffle(len(followers), func(i, j int) { followers[i], followers[j] = followers[j], followers[i] })
	if leader != nil && rng.IntN(leaderShare) == 0 {
		return append(followers[:k-1:k-1], leader), v, nil
	}
	return followers[:min(k, len(followers))], v, nil
}

// nodeRemove runs `seqd node remove --addr A ID` against the running nodes
// other than the target (the target too if it is the only one). An ID the
// cluster does not know (not_found) counts as removed.
func (e *Env) nodeRemove(ctx context.Context, n *nodes.Node) error {
	var addrs []string
	for _, x := range e.Cluster.Nodes {
		if x != n && x.State() == nodes.Running {
			addrs = append(addrs, x.API)
		}
	}
	if len(addrs) == 0 {
		addrs = []string{n.API}
	}
	args := []string{"node", "remove", "--addr", strings.Join(addrs, ","), "--timeout", removeTimeout.String(), n.ID}
	out, err := e.Cluster.Seqd(ctx, removeTimeout+5*time.Second, args...)
	e.logf("nemesis:   seqd %s → %s%s", strings.Join(args, " "), oneLine(out), errSuffix(err))
	if err != nil && strings.Contains(out, "not_found") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("seqd node remove %s: %v: %s", n.ID, err, oneLine(out))
	}
	return nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// markDirty notes that a node's membership is being changed: until it is a
// voter again, HealAll restores it.
func (e *Env) markDirty(n *nodes.Node, dirty bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dirty == nil {
		e.dirty = map[string]bool{}
	}
	if dirty {
		e.dirty[n.ID] = true
	} else {
		delete(e.dirty, n.ID)
	}
}

func (e *Env) dirtyNodes() []*nodes.Node {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if e.dirty[n.ID] {
			out = append(out, n)
		}
	}
	return out
}

// waitVoters waits (bounded) until every node in ns is a voter in the
// leader's configuration, answers, and takes part in raft (vouched for: no
// refusing-raft, as README's rolling restart says to wait for), then
// clears their dirty marks.
func (e *Env) waitVoters(ns []*nodes.Node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	last := ""
	for {
		v, err := e.Cluster.Members(ctx, 3*time.Second)
		var missing []string
		if err != nil || v.Leader == "" {
			last = fmt.Sprintf("no leader answered (%v)", err)
		} else {
			for _, n := range ns {
				if m := v.Members[n.ID]; !m.Voter || m.RaftState == "unreachable" || !m.RaftOpen {
					missing = append(missing, fmt.Sprintf("%s: %s", n.ID, describe(m)))
				}
			}
			last = strings.Join(missing, ", ")
			if len(missing) == 0 {
				for _, n := range ns {
					e.markDirty(n, false)
				}
				e.logf("nemesis:   %s voter again after %v (leader %s, term %d)", strings.Join(ids(ns), "+"), time.Since(start).Round(10*time.Millisecond), v.Leader, v.Term)
				return nil
			}
		}
		if !sleep(ctx, 250*time.Millisecond) {
			return fmt.Errorf("not a voter again within %v: %s", timeout, last)
		}
	}
}

func describe(m nodes.Member) string {
	var d string
	switch {
	case m.ID == "":
		return "not listed"
	case m.Voter:
		d = "voter, " + m.RaftState
	case m.InConfig:
		d = "non-voter, " + m.RaftState
	default:
		d = "not in the configuration, " + m.RaftState
	}
	if m.RaftState != "unreachable" && !m.RaftOpen {
		d += ", refusing-raft"
	}
	if m.DiskFull {
		d += ", disk-full"
	}
	if m.Fenced {
		d += ", fenced by " + m.FencedBy
	}
	return d
}

// rejoin starts the nodes again (their data directories must be empty) and
// waits until they are voters.
func (e *Env) rejoin(ns []*nodes.Node) error {
	var errs []error
	for _, n := range ns {
		errs = append(errs, n.Start())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return e.waitVoters(ns, rejoinTimeout)
}

// restore brings a node whose membership change did not complete back as a
// voter, by README's general procedure: remove it, stop it, delete its data
// directory, start it again.
func (e *Env) restore(n *nodes.Node) error {
	if e.waitVoters([]*nodes.Node{n}, 5*time.Second) == nil {
		return nil
	}
	e.logf("nemesis:   restoring %s: remove, stop, wipe, start", n.ID)
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout+10*time.Second)
	rerr := e.nodeRemove(ctx, n)
	cancel()
	if err := errors.Join(n.Stop(10*time.Second), n.Wipe()); err != nil {
		return errors.Join(rerr, err)
	}
	return errors.Join(rerr, e.rejoin([]*nodes.Node{n}))
}

// memberRemove shrinks the cluster: `seqd node remove` k voters (a minority
// that leaves at least 3, one on 3 nodes), stop them and wipe their data.
// Healing grows it back: each starts empty with the same ID and flags,
// joins through gossip as a non-voter and is promoted.
func memberRemove(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	picked, v, err := e.pickVoters(ctx, rng, minority(len(e.Cluster.Nodes)))
	if err != nil {
		return nil, nil, err
	}
	var removed []*nodes.Node
	var targets []string
	var errs []error
	for _, n := range picked {
		e.markDirty(n, true)
		if err := e.nodeRemove(ctx, n); err != nil {
			errs = append(errs, err)
			targets = append(targets, n.ID+" (remove failed)")
			continue
		}
		note := ""
		if n.ID == v.Leader {
			note = " (leader)"
		}
		serr := n.Stop(10 * time.Second)
		if serr != nil {
			errs = append(errs, serr)
		}
		if err := n.Wipe(); err != nil {
			errs = append(errs, err)
		}
		removed = append(removed, n)
		targets = append(targets, n.ID+note)
	}
	heal := func() error {
		var errs []error
		for _, n := range picked {
			if !contains(removed, n) {
				errs = append(errs, e.restore(n)) // its removal failed midway
			}
		}
		if len(removed) > 0 {
			errs = append(errs, e.rejoin(removed))
		}
		return errors.Join(errs...)
	}
	sort.Strings(targets)
	return targets, heal, errors.Join(errs...)
}

// pickOne picks one running voter for a fault (see pickVoters) and marks it
// as being changed; note is " (leader)" when it leads.
func (e *Env) pickOne(ctx context.Context, rng *rand.Rand) (n *nodes.Node, note string, v nodes.View, err error) {
	picked, v, err := e.pickVoters(ctx, rng, 1)
	if err != nil {
		return nil, "", v, err
	}
	n = picked[0]
	e.markDirty(n, true)
	if n.ID == v.Leader {
		note = " (leader)"
	}
	return n, note, v, nil
}

// memberReturn kills a voter (kill -9), removes it with `seqd node remove`
// while it is down, and restarts it with its data: a removed server coming
// back that never saw its removal, so its log still lists it as a voter and
// it campaigns with ever higher terms (hashicorp/raft#524). It must not be
// added back nor disturb the leader. Healing is README's procedure: stop
// it, delete its data directory, start it.
func memberReturn(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	n, note, v, err := e.pickOne(ctx, rng)
	if err != nil {
		return nil, nil, err
	}
	if err := n.Kill(); err != nil {
		return []string{n.ID + note + " (kill failed)"}, func() error { return e.restore(n) }, err
	}
	if err := e.nodeRemove(ctx, n); err != nil {
		return []string{n.ID + note + " (remove failed)"}, func() error { return e.restore(n) }, err
	}
	offsets := logOffsets(e.Cluster)
	err = n.Start()
	heal := func() error {
		var errs []error
		if w, err := e.Cluster.Members(context.Background(), 3*time.Second); err == nil {
			if m := w.Members[n.ID]; m.InConfig {
				errs = append(errs, fmt.Errorf("%s was removed and came back with its data, and is in the configuration again (%s)", n.ID, describe(m)))
			}
			e.logf("nemesis:   %s back with its data: %s; cluster term %d → %d; it refused: %s; %s campaigned: %v",
				n.ID, describe(w.Members[n.ID]), v.Term, w.Term, orNone(e.refusedNow(n, offsets[n.ID])), n.ID, n.LogContains(offsets[n.ID], "starting election"))
		}
		errs = append(errs, n.Stop(10*time.Second), n.Wipe(), e.rejoin([]*nodes.Node{n}))
		return errors.Join(errs...)
	}
	return []string{n.ID + note + " removed, back with its data"}, heal, err
}

// memberWipe replaces a voter's disk: kill -9 it, delete its data directory
// and start it again, still listed as a voter. Having forgotten its votes it
// must refuse to vote or serve. Healing is what its log and README say:
// `seqd node remove` it; it then joins by itself as a new server.
func memberWipe(ctx context.Context, e *Env, rng *rand.Rand) ([]string, func() error, error) {
	n, note, _, err := e.pickOne(ctx, rng)
	if err != nil {
		return nil, nil, err
	}
	offset := n.LogSize()
	err = errors.Join(n.Kill(), n.Wipe(), n.Start())
	heal := func() error {
		e.logf("nemesis:   %s wiped: it refused: %s", n.ID, orNone(e.refusedNow(n, offset)))
		ctx, cancel := context.WithTimeout(context.Background(), removeTimeout+10*time.Second)
		rerr := e.nodeRemove(ctx, n)
		cancel()
		if rerr != nil {
			return errors.Join(rerr, e.restore(n))
		}
		return e.waitVoters([]*nodes.Node{n}, rejoinTimeout)
	}
	return []string{n.ID + note + " wiped"}, heal, err
}

func contains(ns []*nodes.Node, n *nodes.Node) bool {
	for _, x := range ns {
		if x == n {
			return true
		}
	}
	return false
}

func logOffsets(c *nodes.Cluster) map[string]int64 {
	out := map[string]int64{}
	for _, n := range c.Nodes {
		out[n.ID] = n.LogSize()
	}
	return out
}

// orNone is s, or "no" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "no"
	}
	return s
}
