package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Vouching decides when a server may take part in raft (its gate opens) and
// hold a lease. Raft is safe only if no server forgets what it stored: a
// server whose data directory was wiped may vote twice in a term, and one
// running on an older copy of its directory may have acknowledged entries
// (counted towards a commit) that it no longer has. Such a server must stay
// out until an operator removes it and it joins again as a new server.
// Every server starts unvouched: its gate refuses raft connections both
// ways, and it never starts the lease loop (so it neither serves nor writes
// an entry of its own, even as the only voter of an old configuration).
//
// The invariant: a server is vouched for only on the strength of
//
//   - an authoritative answer: from the serving leader of its cluster. A
//     serving leader holds its lease, so it ran a barrier in its term and
//     has applied every committed entry: its configuration and its record
//     of each server (seen with state, the highest raft index recorded for
//     its log, see recordProgress) are committed knowledge. A follower that
//     is asked names the leader it knows, and the asker asks the leader;
//   - or, for a server that holds raft state, when no leader answers (a
//     full-cluster restart: nobody can lead until servers talk), the answers
//     of N - majority + 1 other voters of its configuration (N voters in
//     all: both others of 3, three others of 5), each from everything it
//     stored: its state machine and every entry of its raft log after what
//     it applied (a restarted server's state machine is rolled back to its
//     last snapshot until a leader commits, but its log is complete). A
//     committed record of how far this server's log reached sits on a
//     majority, which may include this server (whose copy is the one in
//     doubt), so that many other voters always include one that holds it;
//     the most damning answer counts. Voters an operator names with
//     --assume-gone (gone for good) count as having answered;
//   - or, for the only voter of its configuration, having seen no other
//     server of its cluster holding state for soloWait after gossip started
//     (a single-node cluster, a lone first node, a restored cluster's first
//     node: there is nobody to ask). Every server keeps joining the gossip
//     of every server in its configuration, so the old copy of a lone node
//     that has since grown is found by the others within a second.
//
// A server without raft state is never let in by unauthoritative answers
// (a server that knows no leader, or has not applied its whole log, might
// not know that the cluster recorded it), except while every other voter
// of the configuration it would join is seen holding nothing beyond the
// bootstrap configuration (no state, or a log ending at index 1): nothing
// has been committed that it could have acknowledged. That is how the
// servers of a new cluster that did not bootstrap themselves join those
// that did. It is refused when the answer lists it as a voter seen holding
// state (wiped). A server with state is refused when the answer records
// its log reaching beyond its own last index, or records a different term
// at that index than its own log has (an older copy, even one that
// appended entries of its own since), or, when authoritative, does not
// list it at all (removed).
//
// Servers of another cluster (another cluster ID in gossip: a restored
// cluster, a misconfigured --join) never vouch. A server refuses to take
// part while a server of another cluster lists it in that cluster's
// configuration: it is mistaken for one of that cluster's members (for
// example `seqd restore` run into a member's data directory), and serving
// would hand out values the other cluster hands out too. A server whose data
// directory was restored from a backup refuses as well while it sees a
// server of the cluster the backup was taken from, or another server
// restored from a backup of that cluster into a cluster of its own
// (checkRestoredTwice): each would serve the same sections from the same
// marks.
//
// Every raft group is vouched for on its own, by the same rules applied to
// that group: its raft gate (in the multiplexer), its log, its
// configuration, and the records its own leader keeps of how far each
// server's log of the group reaches (recordProgress runs on every group's
// leader). A data directory is several logs: an older copy of one group's
// directory put back while the others stay current, or one group's
// directory wiped, is caught in that group, whose gate stays shut while the
// others' open. Foreign clusters are told by group 0's cluster ID, the
// same for every group.
//
// Vouching happens once per process start; a gate never closes again.
// What it cannot tell apart: a copy taken within the last recordInterval;
// with every other server down, the old copy of a lone node from the node
// itself; and, with --assume-gone, a server that runs on an older copy of
// its data (the operator vouches for that).

// soloWait is how long the only voter of its configuration waits, after
// gossip starts, for other servers of its cluster to show up before it
// vouches for itself. Every server joins again, every rejoinInterval, the
// gossip address of each server in its raft configuration (see rejoin), so
// a restarted node whose configuration others list is found well within it.
const soloWait = 5 * time.Second

// vouchTimeout bounds one question to another server.
const vouchTimeout = 2 * time.Second

// vouchParallel bounds how many groups are vouched for at once (each asks
// every server that holds state).
const vouchParallel = 8

// VouchRequest is what a server asks another when it wants to be vouched
// for in one raft group.
type VouchRequest struct {
	ID        string
	ClusterID string
	// Group is the raft group asked about; HasState and LastIndex describe
	// the asking server's log of that group.
	Group     int
	HasState  bool
	LastIndex uint64
}

// VouchAnswer is the answer (see the PeerService.Vouch protocol). Every
// field but ClusterID and NodeID describes the group asked about.
type VouchAnswer struct {
	ClusterID string
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
	// RestoredFrom is the cluster whose backup the answering server's data
	// directory was restored from ("" if not restored).
	RestoredFrom             string
	answeredBy, answeredAddr string
	answeredCluster          string
}

// PeerVouch asks the server at apiAddr to vouch (see Node.Vouch).
type PeerVouch func(ctx context.Context, apiAddr string, req VouchRequest) (VouchAnswer, error)

// groupVouch is one group's vouching state on this server.
type groupVouch struct {
	opened chan struct{} // closed when the group's gate opens
	once   sync.Once
	scan   logScan // see seenInLog
}

func newGroupVouch() *groupVouch { return &groupVouch{opened: make(chan struct{})} }

// Vouched reports whether this server has been vouched for in every raft
// group (each group's gate is open, and it may hold their leases).
func (n *Node) Vouched() bool {
	for i := range n.vouches {
		if !n.GroupVouched(i) {
			return false
		}
	}
	return true
}

// GroupVouched reports whether this server has been vouched for in group i.
func (n *Node) GroupVouched(i int) bool { return n.mux.IsOpen(i) }

// vouch opens group i's gate. Opening is one-way.
func (n *Node) vouch(i int, how string, args ...any) {
	if n.mux.Open(i) {
		return
	}
	if i > 0 || len(n.groups) > 1 {
		how = fmt.Sprintf("group %d: %s", i, how)
	}
	n.log.Info("raft gate open: "+how, args...)
	v := n.vouches[i]
	v.once.Do(func() { close(v.opened) })
}

// vouchAll opens every group's gate.
func (n *Node) vouchAll(how string, args ...any) {
	for i := range n.groups {
		n.vouch(i, how, args...)
	}
}

// vouchSlow is how long an elected server waits to be vouched for before
// WaitVouched warns: far more than a routine start takes.
const vouchSlow = 30 * time.Second

// WaitVouched implements group.Host: it waits until this server is vouched
// for in group i or ctx ends.
func (n *Node) WaitVouched(ctx context.Context, i int) bool {
	if n.GroupVouched(i) {
		return true
	}
	r := n.groups[i].Raft()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	// Elected before it is vouched for is routine at every start (a lone
	// node waits to see whether others of its cluster are up): INFO. Still
	// waiting long after that is worth a WARN; the gate's own messages say
	// why it waits.
	var electedAt time.Time
	for warned := false; ; {
		if electedAt.IsZero() && r.State() == raft.Leader {
			n.log.Info("raft elected this server; it serves once it is vouched for in the group (a few seconds at a start)", "group", i)
			electedAt = time.Now()
		}
		if !warned && !electedAt.IsZero() && time.Since(electedAt) > vouchSlow {
			n.log.Warn("raft elected this server, but it is still not vouched for in the group: it does not serve, or write entries, until it is (see the vouching messages above)", "group", i, "waiting", time.Since(electedAt).Round(time.Second))
			warned = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-n.vouches[i].opened:
			return true
		case <-t.C:
		}
	}
}

// gateWarn is warnOnce for group i's vouching: the message names the group
// when the server runs several.
func (n *Node) gateWarn(i int, key, msg string, args ...any) {
	if len(n.groups) > 1 {
		msg = fmt.Sprintf("group %d: %s", i, msg)
		args = append(args, "group", i)
	}
	n.warnOnce(fmt.Sprintf("gate%d:%s", i, key), msg, args...)
}

// checkGate runs on every gossip pass until this server is vouched for in
// every group: each group still shut is judged on its own (checkGroupGate),
// vouchParallel at a time.
func (g *gossip) checkGate(joined bool) {
	n := g.n
	if n.Vouched() {
		return
	}
	mine := n.fsm.ClusterID()
	var withState []Member
	sameSeen := 0 // servers with state of this server's cluster, as gossip says
	for _, m := range n.Members() {
		if m.Alive && m.ID != n.cfg.ID && m.HasState && m.APIAddr != "" {
			withState = append(withState, m)
			if mine == "" || m.Cluster == "" || m.Cluster == mine {
				sameSeen++
			}
		}
	}
	sem := make(chan struct{}, vouchParallel)
	var wg sync.WaitGroup
	for i := range n.groups {
		if n.GroupVouched(i) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			g.checkGroupGate(i, joined, mine, withState, sameSeen)
		})
	}
	wg.Wait()
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

// checkGroupGate decides whether this server may take part in group i.
func (g *gossip) checkGroupGate(i int, joined bool, mine string, withState []Member, sameSeen int) {
	n := g.n
	has := n.groupHasState(i)
	if !has && !joined {
		return
	}
	if n.cfg.PeerVouch == nil {
		n.vouch(i, "no way to ask other servers (PeerVouch unset)")
		return
	}
	r := n.groups[i].Raft()
	req := VouchRequest{ID: n.cfg.ID, ClusterID: mine, Group: i, HasState: has, LastIndex: r.LastIndex()}
	answers := n.ask(withState, req)

	// Another cluster that lists this server: refuse.
	clusters := map[string]bool{}
	for _, a := range answers {
		if a.answeredCluster != "" {
			clusters[a.answeredCluster] = true
		}
		if mine != "" && a.answeredCluster != "" && a.answeredCluster != mine && a.InConfiguration {
			n.warnOnce("foreign:"+a.answeredCluster, fmt.Sprintf("server %s of cluster %s lists this server (%s) in its raft configuration, but this server's data belongs to cluster %s "+
				"(restored from a backup, or copied from another server?): it refuses to take part or serve. "+
				"If this server should be a member of %s: stop it, delete its data directory, run `seqd node remove %s` against that cluster, and start it again. "+
				"If it was restored to replace that cluster (lost), stop that cluster's remaining servers first (%s is one). "+
				"If it should form a cluster of its own: give it an ID and --join list of its own",
				a.answeredBy, a.answeredCluster, n.cfg.ID, mine, a.answeredCluster, n.cfg.ID, a.answeredBy), "id", n.cfg.ID)
			return
		}
	}
	if n.checkRestoredTwice(i, mine, answers) {
		return
	}
	for _, a := range answers {
		if mine != "" && a.answeredCluster == mine {
			n.adoptRestoredFrom(a.RestoredFrom, a.answeredBy)
		}
	}
	// Only servers of this server's cluster vouch.
	var own []VouchAnswer
	for _, a := range answers {
		if mine == "" || a.answeredCluster == "" || a.answeredCluster == mine {
			own = append(own, a)
		}
	}
	if !has {
		g.checkGateNoState(i, own, len(clusters))
		return
	}
	var auth *VouchAnswer
	for k := range own {
		if own[k].Authoritative {
			auth = &own[k]
		}
	}
	if len(own) == 0 {
		if sameSeen == 0 {
			n.checkSolo(i)
		}
		return // servers of its cluster are up but did not answer: ask again
	}
	last := r.LastIndex()
	// Without a leader, only servers that hold state in this group can
	// hold a record of this server's log of it: gossip's "holds state"
	// (whom checkGate asks) describes group 0, and a voter whose directory
	// of this group alone was wiped answers from an empty log (index 0).
	// Its answer does not count towards the voters that must answer.
	var judge []VouchAnswer
	for _, a := range own {
		if a.LastIndex > 0 {
			judge = append(judge, a)
		}
	}
	if auth != nil {
		judge = []VouchAnswer{*auth}
		if !auth.InConfiguration {
			n.gateWarn(i, "removed", "this server holds raft state but the serving leader "+auth.NodeID+" does not list it in the raft configuration (it was removed): "+
				"it refuses to take part or serve. To use it again: stop it, delete its data directory, and start it again (it joins as a new server)",
				"id", n.cfg.ID)
			return
		}
	} else if missing := n.unanswered(i, judge); len(missing) > 0 {
		n.gateWarn(i, "quorum-wait", fmt.Sprintf("no leader answers, and vouching without one needs answers from enough voters to include every committed record: waiting for %v. "+
			"If some of them are gone for good (dead, their disks lost) and no server runs on an older copy of its data directory, restart the survivors with --assume-gone naming them",
			missing), "id", n.cfg.ID)
		return
	}
	for _, a := range judge {
		if !a.Seen {
			continue
		}
		stale := a.RecordedIndex > last
		if !stale && a.RecordedTerm != 0 {
			if t := termAt(n.groups[i].LogStore(), a.RecordedIndex); t != 0 && t != a.RecordedTerm {
				stale = true
			}
		}
		if stale {
			n.gateWarn(i, "stale", fmt.Sprintf("this server's raft log ends at index %d, but %s recorded it reaching index %d (term %d): "+
				"its data directory is an older copy, so it refuses to take part or serve. "+
				"To re-add it: run `seqd node remove %s` against the cluster, stop this server, delete its data directory, and start it again",
				last, a.answeredBy, a.RecordedIndex, a.RecordedTerm, n.cfg.ID),
				"id", n.cfg.ID, "last_index", last, "recorded_index", a.RecordedIndex)
			return
		}
	}
	if auth != nil {
		n.vouch(i, "the serving leader vouches for this server's log", "leader", auth.NodeID, "last_index", last)
		return
	}
	n.vouch(i, "no leader answers; enough voters answered, and none recorded this server's log beyond what it holds", "answers", len(judge), "last_index", last)
}

// unanswered returns, when no leader of group i answers, the voters of
// this server's configuration of the group whose answers it still needs. A
// committed record (how far this server's log reached) is on a majority of
// the voters, which may include this server itself, whose copy is the one
// in doubt; the answers of N - majority + 1 other voters (N voters in all)
// always include one that holds it. Voters named in AssumeGone count as
// answered. The only voter of its configuration needs no answer (see
// checkSolo and the answers of the servers it sees).
func (n *Node) unanswered(i int, own []VouchAnswer) []string {
	cf := n.groups[i].Raft().GetConfiguration()
	if cf.Error() != nil {
		return []string{"(configuration unknown)"}
	}
	var others []string
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			others = append(others, string(s.ID))
		}
	}
	voters := len(others) + 1
	if voters == 1 {
		return nil
	}
	need := voters - (voters/2 + 1) + 1
	answered := map[string]bool{}
	for _, a := range own {
		answered[a.answeredBy] = true
	}
	for _, id := range n.cfg.AssumeGone {
		answered[id] = true
	}
	got := 0
	var missing []string
	for _, id := range others {
		if answered[id] {
			got++
		} else {
			missing = append(missing, id)
		}
	}
	if got >= need {
		return nil
	}
	return missing
}

// checkGateNoState decides for a server without raft state in group i.
func (g *gossip) checkGateNoState(i int, own []VouchAnswer, clusters int) {
	n := g.n
	if clusters > 1 {
		n.warnOnce("clusters", "servers of more than one cluster are in this server's gossip (check --join): it refuses to join any of them", "id", n.cfg.ID)
		return
	}
	for _, a := range own {
		if !a.Authoritative {
			continue
		}
		if a.Voter && a.Seen {
			n.gateWarn(i, "wiped", "this server is a voter in the cluster's raft configuration and held raft state before, "+
				"but its data directory has none (wiped or replaced): it refuses to vote or serve. "+
				"To re-add it, run `seqd node remove "+n.cfg.ID+"` against the cluster; it then joins as a new server by itself",
				"id", n.cfg.ID)
			return
		}
		n.adoptRestoredFrom(a.RestoredFrom, a.answeredBy)
		n.vouch(i, "joining as a new server", "leader", a.NodeID, "listed_as_voter", a.Voter)
		return
	}
	if len(own) == 0 {
		return
	}
	// A cluster that has just bootstrapped: nothing beyond the bootstrap
	// configuration was ever committed, so there is nothing this server
	// could have acknowledged and lost. That is known only if every other
	// voter of that configuration is seen holding nothing beyond it: in
	// gossip without state, or answering with a log that ends at index 1.
	fresh := map[string]bool{}
	voters := map[string]bool{}
	for _, a := range own {
		if a.LastIndex > 1 {
			n.gateWarn(i, "nostate-wait", "this server has no raft state and no serving leader answers yet: waiting for one to vouch for it", "id", n.cfg.ID)
			return
		}
		fresh[a.answeredBy] = true
		for _, v := range a.Voters {
			voters[v] = true
		}
	}
	for _, m := range n.Members() {
		if m.Alive && !m.HasState {
			fresh[m.ID] = true
		}
	}
	for v := range voters {
		if v != n.cfg.ID && !fresh[v] {
			n.gateWarn(i, "bootstrap-wait", "this server has no raft state; the cluster it sees has just bootstrapped, but voter "+v+
				" of its configuration is not seen: waiting for it, or for a serving leader", "id", n.cfg.ID)
			return
		}
	}
	// A restored server answers with a log ending at index 1 too (its state
	// is a snapshot there): its joiners learn its source here.
	for _, a := range own {
		n.adoptRestoredFrom(a.RestoredFrom, a.answeredBy)
	}
	n.vouch(i, "joining a cluster that has just bootstrapped", "answers", len(own))
}

// checkSolo lets the only voter of group i's configuration vouch for itself
// once no other server of its cluster has shown up for soloWait.
func (n *Node) checkSolo(i int) {
	if !n.soleVoter(i) {
		return // waits for the other servers of its configuration
	}
	if since := time.Since(n.gossipStarted); since < soloWait {
		return
	}
	n.vouch(i, "the only voter of its configuration, and no other server of its cluster is seen")
}

// soleVoter reports whether this server is the only voter of group i's
// configuration (a lone node, or a restored one before others joined).
func (n *Node) soleVoter(i int) bool {
	cf := n.groups[i].Raft().GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	voters := 0
	self := false
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
			self = self || string(s.ID) == n.cfg.ID
		}
	}
	return voters == 1 && self
}

// sourceCluster returns the cluster this server's cluster was restored
// from ("" if not, or not known).
func (n *Node) sourceCluster() string {
	s, _ := n.restoredFrom.Load().(string)
	return s
}

// adoptRestoredFrom records that this server's cluster was restored from
// cluster from, as a server of its own cluster answered (only the server a
// restore was run on holds the file at first): every server of a restored
// cluster then answers with it, so that a later restore of the same source
// that gossips with the cluster is refused even while the restored server
// itself is down. It is kept in the data directory's restored-from file.
func (n *Node) adoptRestoredFrom(from, by string) {
	// Once: every group's check may offer it, concurrently.
	if from == "" || !n.restoredFrom.CompareAndSwap("", from) {
		return
	}
	if err := writeSynced(n.cfg.DataDir, restoredFromFile, []byte(from+"\n")); err != nil {
		n.log.Warn("recording the cluster this cluster was restored from", "restored_from", from, "err", err)
		return
	}
	n.log.Info("this server's cluster was restored from a backup of another cluster", "restored_from", from, "told_by", by)
}

// checkRestoredTwice reports whether group i must stay refused because
// this server's data directory was restored from a backup of a cluster
// (restoredFrom) while answers show that cluster still running (one of its
// servers answered with its cluster ID) or another server restored from a
// backup of it into another cluster: two clusters would then serve the
// same sections from the same marks, as when the same backup is restored
// on every server of a cluster, each becoming a one-server cluster of its
// own (`seqd restore` makes one server; the others join it empty). Both
// sides of a simultaneous start refuse; one that started alone earlier and
// serves goes on, the later one refuses. Servers that never gossip with
// each other (different --join lists) are not told apart.
func (n *Node) checkRestoredTwice(i int, mine string, answers []VouchAnswer) bool {
	from := n.sourceCluster()
	if from == "" || mine == "" || !n.soleVoter(i) {
		// A server that is not its configuration's only voter is let in
		// by other voters of its cluster, never by itself; only a lone
		// voter (a restored server before others joined it) could serve
		// next to another restore.
		return false
	}
	for _, a := range answers {
		if a.answeredCluster == "" || a.answeredCluster == mine {
			continue
		}
		switch {
		case a.answeredCluster == from:
			n.gateWarn(i, "restored-source", fmt.Sprintf("this server's data directory was restored from a backup of cluster %s, and server %s of that cluster is running: "+
				"it refuses to take part or serve, since both clusters would hand out the same values. Stop every server of cluster %s (and delete their data directories) "+
				"before the restored cluster serves", from, a.answeredBy, from), "id", n.cfg.ID, "restored_from", from, "seen", a.answeredBy)
			return true
		case a.RestoredFrom == from:
			n.gateWarn(i, "restored-twice", fmt.Sprintf("this server (cluster %s) and server %s (cluster %s) were both restored from a backup of cluster %s into clusters of their own: "+
				"they refuse to take part or serve, since both would hand out the same values. Keep one restored server: stop the others, delete their data directories, "+
				"and start them empty with the same --join so that they join it", mine, a.answeredBy, a.answeredCluster, from), "id", n.cfg.ID, "restored_from", from, "seen", a.answeredBy)
			return true
		}
	}
	return false
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
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), vouchTimeout)
				a, err := n.cfg.PeerVouch(ctx, addr, req)
				cancel()
				if err == nil && a.Group != req.Group {
					err = fmt.Errorf("answered for group %d", a.Group)
				}
				if err != nil {
					n.log.Debug("vouch question failed", "peer", id, "addr", addr, "group", req.Group, "err", err)
					return
				}
				a.answeredBy, a.answeredAddr, a.answeredCluster = a.NodeID, addr, a.ClusterID
				if a.answeredBy == "" {
					a.answeredBy = id
				}
				mu.Lock()
				out = append(out, a)
				if !a.Authoritative && a.LeaderAPIAddr != "" && a.LeaderID != n.cfg.ID {
					hints[a.LeaderAPIAddr] = a.LeaderID
				}
				mu.Unlock()
			}()
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
