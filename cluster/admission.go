package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster/admit"
)

// Admission: who may take part in each raft group. The decision is
// cluster/admit's (a pure function of facts, with the rules and the
// reasons); this file gathers the facts, asks the other servers, and
// applies each verdict in one place (applyVerdict): it opens a group's
// raft gate, records the verdict for ClusterStatus, and logs it. Fencing
// (fence.go) is the one thing that closes gates again.
//
// Every server starts unadmitted in every group: its raft gate (in the
// multiplexer) refuses raft connections both ways, and it never starts the
// lease loop, so it neither serves nor writes an entry of its own, even as
// raft leader of a configuration that lists only itself.

// vouchTimeout bounds one question to another server.
const vouchTimeout = 2 * time.Second

// vouchParallel bounds how many groups are decided at once (each asks
// every server that holds state).
const vouchParallel = 8

// VouchRequest is what a server asks another when it wants to be admitted
// in one raft group.
type VouchRequest struct {
	ID string
	// Generation is the asking server's (Cluster is its cluster ID, "" if
	// it has none yet).
	Generation seqd.Generation
	// Group is the raft group asked about; HasState and LastIndex describe
	// the asking server's log of that group.
	Group     int
	HasState  bool
	LastIndex uint64
}

// VouchAnswer is the answer (see the PeerService.Vouch protocol). Every
// field but Generation and NodeID describes the group asked about.
type VouchAnswer struct {
	// Generation is the answering server's (Cluster its cluster ID).
	Generation seqd.Generation
	// Admitted is whether the answering server is admitted in the group;
	// ContactMs when it last heard from a leader of the group (Unix ms, 0:
	// never or unknown; contact.go).
	Admitted  bool
	ContactMs int64
	// Group echoes the group asked about (a server of a build without
	// groups answers for group 0 whatever it is asked, and sets none).
	Group                   int
	Authoritative           bool
	NodeID                  string
	LeaderID, LeaderAPIAddr string
	InConfiguration, Voter  bool
	Seen                    bool
	RecordedIndex           uint64
	RecordedTerm            uint64
	LastIndex               uint64
	Protocol                uint64
	Voters                  []string // the voters of the answering server's configuration
}

// gate is one group's admission state on this server; the gate itself is
// in the multiplexer (muxLayer.Open, Shut).
type gate struct {
	mu      sync.Mutex
	open    bool
	opened  chan struct{} // closed while the gate is open
	verdict admit.Verdict // the last verdict reached
	scan    logScan       // see seenInLog
}

func newGate() *gate { return &gate{opened: make(chan struct{})} }

// Admitted reports whether this server is admitted in every raft group
// (each group's gate is open, and it may hold their leases).
func (n *Node) Admitted() bool {
	for i := range n.gates {
		if !n.GroupAdmitted(i) {
			return false
		}
	}
	return true
}

// GroupAdmitted reports whether this server is admitted in group i.
func (n *Node) GroupAdmitted(i int) bool { return n.mux.IsOpen(i) }

// Admission returns the kind of the last verdict reached about group i
// ("" before the first).
func (n *Node) Admission(i int) admit.Kind {
	g := n.gates[i]
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.verdict.Kind
}

// admitSlow is how long an elected server waits to be admitted before
// WaitAdmitted warns: far more than a routine start takes.
const admitSlow = 30 * time.Second

// WaitAdmitted implements group.Host: it waits until this server is
// admitted in group i or ctx ends.
func (n *Node) WaitAdmitted(ctx context.Context, i int) bool {
	r := n.groups[i].Raft()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	// Elected before it is admitted is routine at every start (a lone node
	// waits to see whether others of its cluster are up): INFO. Still
	// waiting long after that is worth a WARN; the admission verdicts say
	// why it waits.
	var electedAt time.Time
	for warned := false; ; {
		g := n.gates[i]
		g.mu.Lock()
		open, opened := g.open, g.opened
		g.mu.Unlock()
		if open {
			return true
		}
		if electedAt.IsZero() && r.State() == raft.Leader {
			n.log.Info("raft elected this server; it serves once it is admitted in the group (a few seconds at a start)", "group", i)
			electedAt = time.Now()
		}
		if !warned && !electedAt.IsZero() && time.Since(electedAt) > admitSlow {
			n.log.Warn("raft elected this server, but it is still not admitted in the group: it does not serve, or write entries, until it is (see the admission messages above)",
				"group", i, "admission", string(n.Admission(i)), "waiting", time.Since(electedAt).Round(time.Second))
			warned = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-opened:
		case <-t.C:
		}
	}
}

// applyVerdict is the one place a verdict about a group takes effect.
func (n *Node) applyVerdict(v admit.Verdict) {
	i := v.Group
	g := n.gates[i]
	g.mu.Lock()
	g.verdict = v
	g.mu.Unlock()
	msg := v.Message(n.cfg.ID)
	args := []any{"admission", string(v.Kind), "id", n.cfg.ID}
	if len(n.groups) > 1 {
		args = append(args, "group", i)
	}
	switch v.Outcome {
	case admit.Admit:
		n.openGate(i, msg, args)
	case admit.Refuse:
		n.logEvery(fmt.Sprintf("gate%d:%s", i, v.Kind), slog.LevelWarn, msg, append(args, "refusal", string(v.Kind))...)
	default:
		level := slog.LevelInfo
		switch v.Kind {
		case "", admit.NotJoined, admit.NoAnswer, admit.SoloWaiting, admit.LeaderWait:
			level = slog.LevelDebug
		}
		n.logEvery(fmt.Sprintf("gate%d:%s", i, v.Kind), level, msg, args...)
	}
}

// openGate opens group i's raft gate, unless this server is fenced.
func (n *Node) openGate(i int, how string, args []any) {
	g := n.gates[i]
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open || n.fenced.Load() {
		return
	}
	n.mux.Open(i)
	g.open = true
	close(g.opened)
	n.log.Info("raft gate open: "+how, args...)
}

// shutGates closes every group's raft gate and the connections through
// it (see fence).
func (n *Node) shutGates() {
	for i, g := range n.gates {
		g.mu.Lock()
		if g.open {
			g.open = false
			g.opened = make(chan struct{})
		}
		g.mu.Unlock()
		n.mux.Shut(i)
	}
}

// admitAll opens every group's gate: this server just bootstrapped the
// cluster with the others.
func (n *Node) admitAll() {
	for i := range n.groups {
		n.applyVerdict(admit.Verdict{Outcome: admit.Admit, Kind: admit.ByBootstrap, Group: i})
	}
}

// admitPass runs on every gossip pass: each group whose gate is shut is
// decided on its own, vouchParallel at a time.
func (g *gossip) admitPass(joined bool) {
	n := g.n
	if n.Admitted() || n.fenced.Load() {
		return
	}
	members := n.admitMembers()
	sem := make(chan struct{}, vouchParallel)
	var wg sync.WaitGroup
	for i := range n.groups {
		if n.GroupAdmitted(i) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f, ok := n.facts(i, joined, members)
			if ok {
				n.applyVerdict(admit.Decide(f))
			}
		})
	}
	wg.Wait()
}

// admitMembers is the gossip view as admit sees it (this server excluded).
func (n *Node) admitMembers() []admit.Member {
	var out []admit.Member
	for _, m := range n.Members() {
		if m.ID == n.cfg.ID {
			continue
		}
		out = append(out, m.admitMember())
	}
	return out
}

// facts gathers what admit.Decide needs about group i, asking the servers
// that hold state. It reports false when there is nothing to decide yet (a
// server without state in the group that has not joined gossip).
func (n *Node) facts(i int, joined bool, members []admit.Member) (admit.Facts, bool) {
	has := n.groupHasState(i)
	r := n.groups[i].Raft()
	self := admit.Self{ID: n.cfg.ID, Generation: n.Generation(), HasState: has, LastIndex: r.LastIndex(), AssumeGone: n.cfg.AssumeGone,
		ContactMs: n.recordedContact[i]}
	if cf := r.GetConfiguration(); cf.Error() == nil {
		self.ConfigKnown = true
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				self.Voters = append(self.Voters, string(s.ID))
			}
		}
	}
	f := admit.Facts{Group: i, Self: self, Members: members, Joined: joined, CanAsk: n.cfg.Peers != nil, SinceGossip: time.Since(n.gossipStarted)}
	if (!has && !joined) || !f.CanAsk {
		return f, true
	}
	n.noteSource(members, nil)
	var withState []Member
	for _, m := range n.Members() {
		if m.Alive && m.ID != n.cfg.ID && m.HasState && m.APIAddr != "" {
			withState = append(withState, m)
		}
	}
	req := VouchRequest{ID: n.cfg.ID, Generation: self.Generation, Group: i, HasState: has, LastIndex: self.LastIndex}
	for _, a := range n.ask(withState, req) {
		n.learn(admit.Learned{Generation: a.Generation, Served: a.Admitted, From: a.NodeID})
		ans := admit.Answer{By: a.NodeID, Generation: a.Generation, Authoritative: a.Authoritative, Admitted: a.Admitted, ContactMs: a.ContactMs,
			InConfiguration: a.InConfiguration, Voter: a.Voter, Seen: a.Seen, RecordedIndex: a.RecordedIndex, RecordedTerm: a.RecordedTerm,
			LastIndex: a.LastIndex, Voters: a.Voters}
		if a.Seen {
			ans.TermHere = termAt(n.groups[i].LogStore(), a.RecordedIndex)
		}
		f.Answers = append(f.Answers, ans)
	}
	n.noteSource(nil, f.Answers)
	if last := n.sourceSeen.Load(); last != 0 {
		f.SourceSeen, f.SinceSource = true, time.Since(time.Unix(0, last))
	}
	if last := n.newerSeen.Load(); last != 0 {
		f.NewerSeen, f.SinceNewer = true, time.Since(time.Unix(0, last))
	}
	return f, true
}

// noteSource notes when this server last saw an admitted server of an
// older generation of its lineage, and a live server of a newer one (see
// admit.SourceQuiet).
func (n *Node) noteSource(members []admit.Member, answers []admit.Answer) {
	mine := n.Generation()
	source, newer := false, false
	for _, m := range members {
		source = source || (m.Alive && m.Admitted && mine.Supersedes(m.Generation))
		newer = newer || (m.Alive && m.Generation.Supersedes(mine))
	}
	for _, a := range answers {
		source = source || (a.Admitted && mine.Supersedes(a.Generation))
		newer = newer || a.Generation.Supersedes(mine)
	}
	if source {
		n.sourceSeen.Store(time.Now().UnixNano())
	}
	if newer {
		n.newerSeen.Store(time.Now().UnixNano())
	}
}

// groupHasState reports whether this server holds raft state in group i.
func (n *Node) groupHasState(i int) bool {
	if i == 0 {
		return n.hasState.Load()
	}
	if n.groups[i].HadState() {
		return true
	}
	cf := n.groups[i].Raft().GetConfiguration()
	return cf.Error() == nil && len(cf.Configuration().Servers) > 0
}

// ask puts req to each server concurrently, then to the leaders they name
// that were not asked yet. Failed questions, and answers about another
// group than the one asked (a server of a build without groups answers for
// group 0 whatever it is asked), are left out.
func (n *Node) ask(servers []Member, req VouchRequest) []VouchAnswer {
	var (
		mu    sync.Mutex
		out   []VouchAnswer
		asked = map[string]bool{}
	)
	round := func(addrs map[string]string) map[string]string {
		hints := map[string]string{}
		var wg sync.WaitGroup
		for addr, id := range addrs {
			asked[addr] = true
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), vouchTimeout)
				a, err := n.cfg.Peers.Vouch(ctx, addr, req)
				cancel()
				if err == nil && a.Group != req.Group {
					err = fmt.Errorf("answered for group %d", a.Group)
				}
				if err != nil {
					n.log.Debug("vouch question failed", "peer", id, "addr", addr, "group", req.Group, "err", err)
					return
				}
				if a.NodeID == "" {
					a.NodeID = id
				}
				mu.Lock()
				out = append(out, a)
				if !a.Authoritative && a.LeaderAPIAddr != "" && a.LeaderID != n.cfg.ID {
					hints[a.LeaderAPIAddr] = a.LeaderID
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		for addr := range hints {
			if asked[addr] {
				delete(hints, addr)
			}
		}
		return hints
	}
	first := map[string]string{}
	for _, m := range servers {
		first[m.APIAddr] = m.ID
	}
	if hints := round(first); len(hints) > 0 {
		round(hints)
	}
	return out
}

// logEvery logs msg at level at most once a minute per key.
func (n *Node) logEvery(key string, level slog.Level, msg string, args ...any) {
	n.memMu.Lock()
	last, ok := n.warned[key]
	if ok && time.Since(last) < time.Minute {
		n.memMu.Unlock()
		return
	}
	n.warned[key] = time.Now()
	n.memMu.Unlock()
	n.log.Log(context.Background(), level, msg, args...)
}
