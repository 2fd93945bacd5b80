package admit

import (
	"slices"
	"time"

	"github.com/seqd/seqd"
)

// SoloWait is how long the only voter of its configuration waits, after
// gossip started, for other servers of its cluster to show up before it
// vouches for itself. Every server joins again, every second, the gossip
// address of each server in its raft configuration, so a restarted node
// whose configuration others list is found well within it.
const SoloWait = 5 * time.Second

// Facts is what the host knows when it decides about one raft group.
type Facts struct {
	Group int
	Self  Self
	// Members is the gossip view (this server excluded).
	Members []Member
	// Answers are the other servers' answers about the group (failed
	// questions and answers about another group left out by the host).
	Answers []Answer
	// Joined is whether gossip has joined a server of the --join list (or
	// the list names none).
	Joined bool
	// CanAsk is whether the host has a way to ask other servers.
	CanAsk bool
	// SinceGossip is how long gossip has run on this server.
	SinceGossip time.Duration
	// SourceSeen is whether this server has seen an admitted server of an
	// older generation of its lineage (the cluster a restore replaces)
	// since it started, and SinceSource how long ago it last did.
	SourceSeen  bool
	SinceSource time.Duration
	// NewerSeen is whether this server has seen a live server of a newer
	// generation of its lineage (a restore of its cluster) since it
	// started, and SinceNewer how long ago it last did.
	NewerSeen  bool
	SinceNewer time.Duration
}

// SourceQuiet is how long a restored server that saw the cluster it
// replaces running waits, after it last saw it, before it may serve: that
// cluster may have gone out of reach (a pause, a partition) in the middle
// of a lease, and the longest lease seqd's defaults and documented ranges
// give, with its margin and the listen window, ends within it.
const SourceQuiet = 30 * time.Second

// Self describes the deciding server in the group.
type Self struct {
	ID         string
	Generation seqd.Generation // Cluster is its cluster ID ("" without one)
	Fenced     bool            // fenced for good (see Fence)
	HasState   bool            // holds raft state in the group
	LastIndex  uint64          // its log's last index in the group
	// Voters are the voters of its latest configuration of the group (it
	// may or may not be one); ConfigKnown is false when it could not be
	// read.
	Voters      []string
	ConfigKnown bool
	// AssumeGone are voters an operator named gone for good: they count
	// as having answered.
	AssumeGone []string
	// ContactMs is when the server last heard from a leader of the group
	// before it last stopped (its contact record, Unix ms; 0: none).
	ContactMs int64
}

// Member is a server as gossip shows it.
type Member struct {
	ID         string
	Alive      bool
	HasState   bool // holds raft state (in group 0)
	Generation seqd.Generation
	// Admitted is whether it has been admitted (its group 0 gate is open).
	Admitted bool
	// RaftAddr, Ready (it would bootstrap: no state, and it sees every
	// server its --join list names), Proto (the highest command protocol
	// it speaks, 0 for the first release) and Groups (its raft group
	// count, 0 for builds without groups: one) serve Bootstrap and
	// AdoptCount.
	RaftAddr string
	Ready    bool
	Proto    uint64
	Groups   int
}

// groups is how many raft groups the member runs.
func (m Member) groups() int { return max(m.Groups, 1) }

// Answer is another server's answer about the group (PeerService.Vouch).
type Answer struct {
	By            string
	Generation    seqd.Generation // Cluster is the answering server's cluster ID
	Authoritative bool            // from the group's serving leader
	Admitted      bool            // the answering server is admitted in the group
	// ContactMs is when the answering server last heard from a leader of
	// the group (Unix ms; 0: never or unknown): it holds the group's
	// progress records up to about then (see witnessed).
	ContactMs int64
	// InConfiguration and Voter describe the asking server in the
	// answering server's configuration of the group.
	InConfiguration, Voter bool
	// Seen is whether the answering server has a record of the asking
	// server holding state; RecordedIndex is the highest index recorded
	// for its log and RecordedTerm the answering server's term at it.
	Seen                        bool
	RecordedIndex, RecordedTerm uint64
	// TermHere is the asking server's own log's term at RecordedIndex (0
	// when its log does not have that entry), filled in by the host.
	TermHere uint64
	// LastIndex is the answering server's last log index in the group.
	LastIndex uint64
	// Voters are the voters of the answering server's configuration.
	Voters []string
}

// Decide decides whether this server may take part in the group now.
func Decide(f Facts) Verdict {
	v := decide(f)
	v.Group = f.Group
	return v
}

func decide(f Facts) Verdict {
	me := f.Self
	if me.Fenced {
		return Verdict{Outcome: Refuse, Kind: Superseded}
	}
	if !me.HasState && !f.Joined {
		return Verdict{Outcome: Wait, Kind: NotJoined}
	}
	if !f.CanAsk {
		return Verdict{Outcome: Admit, Kind: Unchecked}
	}
	mine := me.Generation.Cluster
	// A restore next to the cluster it replaces while that cluster runs (a
	// server of it is admitted): a restore made by mistake, or before the
	// old servers were stopped. Both would hand out the same values; the
	// running one goes on (Fence leaves it alone while this one has not
	// served), and this one stays out.
	for _, a := range f.Answers {
		if a.Admitted && me.Generation.Supersedes(a.Generation) {
			return Verdict{Outcome: Refuse, Kind: SourceRunning, By: a.By, Cluster: a.Generation.String()}
		}
	}
	for _, m := range f.Members {
		if m.Alive && m.Admitted && me.Generation.Supersedes(m.Generation) {
			return Verdict{Outcome: Refuse, Kind: SourceRunning, By: m.ID, Cluster: m.Generation.String()}
		}
	}
	if f.SourceSeen && f.SinceSource < SourceQuiet {
		// Out of sight is not stopped: it may be paused or cut off in the
		// middle of a lease.
		return Verdict{Outcome: Refuse, Kind: SourceRunning, By: "(not seen for " + f.SinceSource.Round(time.Second).String() + ")"}
	}
	// A restore of this server's cluster is around, and none of this
	// server's own cluster runs (a site coming back while its restore
	// starts, both unadmitted): the restore goes first (it refuses only
	// while its source runs), and this server defers to it, for good once
	// it served (Fence). A cluster that runs keeps running next to a
	// restore made by mistake, and its restarted servers rejoin it.
	if f.NewerSeen && f.SinceNewer < SourceQuiet && !ownAdmitted(f) {
		return Verdict{Outcome: Refuse, Kind: NewerGeneration}
	}
	// A server of another cluster that lists this one: refuse. A cluster
	// this server's own generation supersedes does not count (it is
	// fenced as soon as it hears of this one).
	for _, a := range f.Answers {
		if mine != "" && a.Generation.Cluster != "" && a.Generation.Cluster != mine && a.InConfiguration &&
			!me.Generation.Supersedes(a.Generation) {
			return Verdict{Outcome: Refuse, Kind: Foreign, By: a.By, Cluster: a.Generation.Cluster}
		}
	}
	// A lone voter of a restored cluster (the only voter of its
	// configuration: nobody else could vouch for it) next to a sibling
	// restore of the same backup: both would hand out the same values.
	if me.HasState && soleVoter(me) {
		for _, a := range f.Answers {
			if me.Generation.Sibling(a.Generation) {
				return Verdict{Outcome: Refuse, Kind: Sibling, By: a.By, Cluster: a.Generation.Cluster}
			}
		}
		for _, m := range f.Members {
			if m.Alive && me.Generation.Sibling(m.Generation) {
				return Verdict{Outcome: Refuse, Kind: Sibling, By: m.ID, Cluster: m.Generation.Cluster}
			}
		}
	}
	// Only servers of this server's cluster vouch (a server that does not
	// know its cluster yet, or an answer that names none, counts).
	var own []Answer
	clusters := map[string]bool{}
	for _, a := range f.Answers {
		if c := a.Generation.Cluster; c != "" && !supersededBy(a.Generation, f.Answers) {
			clusters[c] = true
		}
		if mine == "" || a.Generation.Cluster == "" || a.Generation.Cluster == mine {
			own = append(own, a)
		}
	}
	if !me.HasState {
		if len(clusters) > 1 {
			return Verdict{Outcome: Refuse, Kind: Clusters}
		}
		return decideNoState(f, own)
	}
	return decideState(f, own)
}

// ownAdmitted reports whether a server of this server's own cluster is
// seen admitted (its cluster runs).
func ownAdmitted(f Facts) bool {
	mine := f.Self.Generation.Cluster
	for _, a := range f.Answers {
		if a.Admitted && a.Generation.Cluster == mine {
			return true
		}
	}
	for _, m := range f.Members {
		if m.Alive && m.Admitted && m.Generation.Cluster == mine {
			return true
		}
	}
	return false
}

// supersededBy reports whether another answer's generation supersedes g.
func supersededBy(g seqd.Generation, answers []Answer) bool {
	for _, a := range answers {
		if a.Generation.Supersedes(g) {
			return true
		}
	}
	return false
}

// decideState decides for a server that holds raft state in the group.
func decideState(f Facts, own []Answer) Verdict {
	me := f.Self
	if len(own) == 0 && soleVoter(me) {
		// Nobody else could vouch for the only voter of its configuration
		// (a lone node, a restored cluster's first server). An older copy
		// of a lone node that has since grown is found by the servers that
		// joined it: while one is seen, wait for its answer.
		for _, m := range f.Members {
			if m.Alive && m.HasState && (me.Generation.Cluster == "" || m.Generation.Cluster == "" || m.Generation.Cluster == me.Generation.Cluster) {
				return Verdict{Outcome: Wait, Kind: NoAnswer}
			}
		}
		if f.SinceGossip < SoloWait {
			return Verdict{Outcome: Wait, Kind: SoloWaiting}
		}
		return Verdict{Outcome: Admit, Kind: BySolo}
	}
	var auth *Answer
	for i := range own {
		if own[i].Authoritative {
			auth = &own[i]
		}
	}
	var judge []Answer
	var kind Kind
	if auth != nil {
		if !auth.InConfiguration {
			return Verdict{Outcome: Refuse, Kind: Removed, By: auth.By}
		}
		judge = []Answer{*auth}
	} else {
		// Without a leader, only an answer from a log of the group counts:
		// a voter whose directory of this group alone was wiped answers
		// from an empty log (index 0) and holds no record.
		for _, a := range own {
			if a.LastIndex > 0 {
				judge = append(judge, a)
			}
		}
		kind = ByWitness
		if !witnessed(me, judge) {
			kind = ByAnswers
			if missing, ok := majorityAnswered(me, judge); !ok {
				return Verdict{Outcome: Wait, Kind: QuorumWait, Missing: missing}
			}
		}
	}
	for _, a := range judge {
		if !a.Seen {
			continue
		}
		if a.RecordedIndex > me.LastIndex || (a.RecordedTerm != 0 && a.TermHere != 0 && a.TermHere != a.RecordedTerm) {
			return Verdict{Outcome: Refuse, Kind: Stale, By: a.By, LastIndex: me.LastIndex, RecordedIndex: a.RecordedIndex, RecordedTerm: a.RecordedTerm}
		}
	}
	if auth != nil {
		return Verdict{Outcome: Admit, Kind: ByLeader, By: auth.By, LastIndex: me.LastIndex, Answers: 1}
	}
	return Verdict{Outcome: Admit, Kind: kind, LastIndex: me.LastIndex, Answers: len(judge)}
}

// ContactSlack is how much earlier than the asking server an answering
// voter may have heard from a leader and still witness for it: the last
// leader's own record runs up to its stop, its followers' a heartbeat and a
// record's interval behind, and servers that stopped together (a power
// loss) must witness for each other.
const ContactSlack = time.Second

// Witnesses reports whether a voter that heard from a leader at contactMs
// witnesses for a server that heard from one at askerMs (Unix ms; see
// witnessed).
func Witnesses(askerMs, contactMs int64) bool {
	return askerMs > 0 && contactMs > 0 && contactMs >= askerMs-ContactSlack.Milliseconds()
}

// witnessed reports whether an answering voter heard from a leader of the
// group no earlier than ContactSlack before this server did (before it
// stopped): a witness for it.
//
// Why a witness is let stand for the records: this server's own log is
// what is in doubt (an older copy of its directory put back). The group's
// leaders record how far its log reached; a record that damns a copy
// describes an acknowledgement the server made after the copy's log ends,
// and reaches every voter in touch with a leader from about a record
// interval after it. When the server ran on after the copy was taken, a
// voter that heard from a leader no earlier than this server did (its
// copy's contact record says when: a copy carries the copy's) holds every
// such record but those of a short window, and finds the copy stale if it
// is. Raft's own election still needs a majority. So a restart that meets
// a crash of another voter, or a full-cluster restart with voters gone,
// elects as raft alone would as soon as one voter that stayed in touch as
// long answers; a voter that lost touch with the leaders well before this
// server did (it lagged: a partition, an earlier stop) is no witness, and
// neither is a server's own admission (admitted after a restart with no
// leader, it has heard from none since). What remains (DESIGN.md §6): a
// copy of a server that was down when it was taken and acknowledged more
// only after it returned, with the witness out of touch by then; a copy
// taken within the record interval before, or ContactSlack after, the
// witness lost touch with the leaders; a witness whose log lagged behind
// its leader while it still received heartbeats; two older copies that
// witness for each other; wall clocks further apart than the slack.
func witnessed(me Self, answers []Answer) bool {
	if me.ContactMs <= 0 {
		return false // no record of its own (a build before them): a majority must answer
	}
	for _, a := range answers {
		if slices.Contains(me.Voters, a.By) && Witnesses(me.ContactMs, a.ContactMs) {
			return true
		}
	}
	return false
}

// majorityAnswered reports whether enough voters answered from a log of
// the group to make a majority with this server (one other of 3, two of
// 5), and if not which voters are still to answer. Voters named gone count
// as answered.
//
// Why a majority with itself, and not the answer of every record's holder:
// raft elects a leader from any majority, and so must admission (the
// availability rule: whenever a majority of a group's voters run on their
// own current data, the group serves again, whatever else is down). A
// rule that waits for more than a majority turns a crash that meets a
// restart, or servers that stop one by one and come back without the last
// one, into an outage only an operator ends. The protection against an
// older copy of a data directory rests on what that majority holds: the
// progress records every answering voter has (a record beyond the asker's
// log refuses it, kind stale). What remains (DESIGN.md §6): an older copy
// of a server's directory put back while every voter that holds a record
// of its log beyond the copy is away (down or wiped): an operator's mistake
// that meets the loss of the servers that could tell, two faults, where
// the answering majority holds nothing that could.
func majorityAnswered(me Self, answers []Answer) (missing []string, ok bool) {
	if !me.ConfigKnown {
		return []string{"(configuration unknown)"}, false
	}
	answered := map[string]bool{}
	for _, a := range answers {
		answered[a.By] = true
	}
	for _, id := range me.AssumeGone {
		answered[id] = true
	}
	others := others(me)
	voters := len(me.Voters)
	if !slices.Contains(me.Voters, me.ID) {
		voters++ // judged as the voter it would be
	}
	need := voters / 2 // with this server, a majority
	got := 0
	for _, id := range others {
		if answered[id] {
			got++
		} else {
			missing = append(missing, id)
		}
	}
	return missing, got >= need
}

// decideNoState decides for a server without raft state in the group.
func decideNoState(f Facts, own []Answer) Verdict {
	me := f.Self
	for _, a := range own {
		if !a.Authoritative {
			continue
		}
		if a.Voter && a.Seen {
			return Verdict{Outcome: Refuse, Kind: Wiped, By: a.By}
		}
		return Verdict{Outcome: Admit, Kind: ByJoin, By: a.By}
	}
	if len(own) == 0 {
		return Verdict{Outcome: Wait, Kind: LeaderWait}
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
			return Verdict{Outcome: Wait, Kind: LeaderWait}
		}
		fresh[a.By] = true
		for _, id := range a.Voters {
			voters[id] = true
		}
	}
	for _, m := range f.Members {
		if m.Alive && !m.HasState {
			fresh[m.ID] = true
		}
	}
	var missing []string
	for id := range voters {
		if id != me.ID && !fresh[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return Verdict{Outcome: Wait, Kind: BootstrapWait, Missing: missing}
	}
	return Verdict{Outcome: Admit, Kind: ByFresh, Answers: len(own)}
}

// soleVoter reports whether the server is the only voter of its
// configuration.
func soleVoter(me Self) bool {
	return me.ConfigKnown && len(me.Voters) == 1 && me.Voters[0] == me.ID
}

// others lists the voters of the configuration other than this server.
func others(me Self) []string {
	var out []string
	for _, id := range me.Voters {
		if id != me.ID {
			out = append(out, id)
		}
	}
	return out
}
