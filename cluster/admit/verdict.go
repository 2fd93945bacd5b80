package admit

import (
	"fmt"
	"strings"
)

// Outcome is what the host does with a verdict.
type Outcome uint8

const (
	// Wait: not decided yet; the host asks again on its next pass and says
	// why at most once a minute.
	Wait Outcome = iota
	// Admit: open the gate (or bootstrap, or adopt).
	Admit
	// Refuse: stay out until an operator acts; the host logs the refusal
	// with refusal=<kind> and reports the kind.
	Refuse
)

func (o Outcome) String() string {
	switch o {
	case Admit:
		return "admit"
	case Refuse:
		return "refuse"
	}
	return "wait"
}

// Kind says why a verdict was reached. Kinds are part of the operator
// interface: seqd status, ClusterStatus (GroupState.admission), the
// seqd_group_admission metric and the logs (refusal=<kind>) carry them, and
// jepsen matches them; never rename one.
type Kind string

// Admissions.
const (
	// ByLeader: the group's serving leader vouches for this server's log.
	ByLeader Kind = "leader"
	// ByWitness: no leader answers; a voter of its configuration that heard
	// from a leader no earlier than this server did (a witness: it holds
	// every record of this server's log) answered, and no answer recorded
	// its log beyond what it holds.
	ByWitness Kind = "witness"
	// ByAnswers: no leader answers; enough voters answered from a log of
	// the group to make a majority with this server, and none recorded its
	// log beyond what it holds.
	ByAnswers Kind = "answers"
	// BySolo: the only voter of its configuration, and no other server of
	// its cluster seen for SoloWait.
	BySolo Kind = "solo"
	// ByJoin: a server without state that the serving leader lets join.
	ByJoin Kind = "join"
	// ByFresh: a server without state joining a cluster that has just
	// bootstrapped (nothing committed it could have acknowledged).
	ByFresh Kind = "fresh"
	// ByBootstrap: this server bootstrapped the cluster with the others.
	ByBootstrap Kind = "bootstrap"
	// Unchecked: the host has no way to ask other servers (a test setup).
	Unchecked Kind = "unchecked"
)

// Waits.
const (
	// NotJoined: a server without state that has not joined gossip yet.
	NotJoined Kind = "not-joined"
	// NoAnswer: servers of its cluster are seen but none answered.
	NoAnswer Kind = "no-answer"
	// QuorumWait: no leader answers, and too few voters answered to make a
	// majority with this server.
	QuorumWait Kind = "quorum-wait"
	// LeaderWait: a server without state needs a serving leader to vouch.
	LeaderWait Kind = "leader-wait"
	// BootstrapWait: a server without state joining a just-bootstrapped
	// cluster waits to see every voter of its configuration.
	BootstrapWait Kind = "bootstrap-wait"
	// SoloWaiting: the only voter of its configuration waits SoloWait for
	// other servers of its cluster to show up.
	SoloWaiting Kind = "solo-wait"
)

// Refusals.
const (
	// Foreign: a server of another cluster lists this one in its raft
	// configuration (a restore or copy into a member's data directory).
	Foreign Kind = "foreign"
	// Clusters: a server without state sees servers of more than one
	// cluster and joins neither.
	Clusters Kind = "clusters"
	// Removed: the serving leader does not list this server any more.
	Removed Kind = "removed"
	// Stale: a record shows this server's log reached further than it
	// does now (an older copy of its data directory).
	Stale Kind = "stale"
	// Wiped: a voter recorded holding state came back without any.
	Wiped Kind = "wiped"
	// Sibling: a lone voter of a restored cluster sees another restore of
	// the same backup.
	Sibling Kind = "sibling"
	// SourceRunning: a restored server sees the cluster it replaces still
	// running (one of its servers admitted).
	SourceRunning Kind = "source-running"
	// NewerGeneration: a restore of this server's cluster is seen and none
	// of its own cluster runs: it defers to the restore.
	NewerGeneration Kind = "newer-generation"
	// Superseded: fenced for good, because a newer generation of this
	// server's lineage exists, or a sibling restore that served met this
	// one after it served too.
	Superseded Kind = "superseded"
)

// Bootstrap and AdoptCount.
const (
	// JoinsWait: not every server the --join list names is seen yet.
	JoinsWait Kind = "bootstrap-joins"
	// ClusterExists: a server holding state is seen; this server waits to
	// be added by its leader instead of bootstrapping.
	ClusterExists Kind = "cluster-exists"
	// GroupsDiffer: a server about to bootstrap runs another group count.
	GroupsDiffer Kind = "groups-differ"
	// ExpectWait: fewer than --bootstrap-expect servers are ready.
	ExpectWait Kind = "expect-wait"
	// Adopt: a server without state adopts its cluster's group count.
	Adopt Kind = "adopt"
	// GroupsGiven: the cluster runs another group count than this
	// server's --groups, so it cannot join.
	GroupsGiven Kind = "groups-given"
)

// Verdict is a decision and the facts its message names.
type Verdict struct {
	Outcome Outcome
	Kind    Kind
	// Group is the raft group decided about (Decide only).
	Group int
	// By names the server whose answer decided (the leader, the stale
	// record's holder, the foreign or sibling server).
	By string
	// Cluster is the other cluster a refusal names (Foreign, Sibling).
	Cluster string
	// Missing lists the voters still to answer (QuorumWait, BootstrapWait).
	Missing []string
	// LastIndex is this server's last log index; RecordedIndex and
	// RecordedTerm the record that found it stale.
	LastIndex, RecordedIndex, RecordedTerm uint64
	// Answers counts the answers an admission rests on; Count is a group
	// count (GroupsDiffer: the other server's; Adopt, GroupsGiven: the
	// cluster's).
	Answers, Count int
}

// Message says, for people, what the verdict means and what to do (self is
// this server's ID).
func (v Verdict) Message(self string) string {
	var s string
	switch v.Kind {
	case ByLeader:
		s = "the serving leader " + v.By + " vouches for this server's log"
	case ByWitness:
		s = fmt.Sprintf("no leader answers; %d voters answered, one of which heard from a leader no earlier than this server did (it holds every record of this server's log), and none recorded this server's log beyond what it holds", v.Answers)
	case ByAnswers:
		s = fmt.Sprintf("no leader answers; %d voters answered, a majority with this server, and none recorded its log beyond what it holds", v.Answers)
	case BySolo:
		s = "the only voter of its configuration, and no other server of its cluster is seen"
	case ByJoin:
		s = "joining as a new server, let in by the serving leader " + v.By
	case ByFresh:
		s = "joining a cluster that has just bootstrapped"
	case ByBootstrap:
		s = "bootstrapped a new cluster"
	case Unchecked:
		s = "no way to ask other servers"
	case NotJoined:
		s = "waiting to join gossip"
	case NoAnswer:
		s = "servers of its cluster are seen but none answered yet"
	case QuorumWait:
		s = fmt.Sprintf("no leader answers, and admission without one needs answers from enough voters to make a majority with this server, as raft's election does: waiting for %v. "+
			"If they are gone for good (dead, their disks lost) and no server runs on an older copy of its data directory, restart the survivors with --assume-gone naming them",
			v.Missing)
	case LeaderWait:
		s = "this server has no raft state and no serving leader answers yet: waiting for one to vouch for it"
	case BootstrapWait:
		s = fmt.Sprintf("this server has no raft state; the cluster it sees has just bootstrapped, but voters %v of its configuration are not seen: waiting for them, or for a serving leader", v.Missing)
	case SoloWaiting:
		s = "the only voter of its configuration: waiting a few seconds for other servers of its cluster to show up"
	case Foreign:
		s = fmt.Sprintf("server %s of cluster %s lists this server (%s) in its raft configuration, but this server's data belongs to another cluster "+
			"(restored from a backup, or copied from another server?): it refuses to take part or serve. "+
			"If this server should be a member of %s: stop it, delete its data directory, run `seqd node remove %s` against that cluster, and start it again. "+
			"If it should form a cluster of its own: give it an ID and --join list of its own",
			v.By, v.Cluster, self, v.Cluster, self)
	case Clusters:
		s = "servers of more than one cluster are in this server's gossip (check --join): it refuses to join any of them"
	case Removed:
		s = "this server holds raft state but the serving leader " + v.By + " does not list it in the raft configuration (it was removed): " +
			"it refuses to take part or serve. To use it again: stop it, delete its data directory, and start it again (it joins as a new server)"
	case Stale:
		s = fmt.Sprintf("this server's raft log ends at index %d, but %s recorded it reaching index %d (term %d): "+
			"its data directory is an older copy, so it refuses to take part or serve. "+
			"To re-add it: run `seqd node remove %s` against the cluster, stop this server, delete its data directory, and start it again",
			v.LastIndex, v.By, v.RecordedIndex, v.RecordedTerm, self)
	case Wiped:
		s = "this server is a voter in the cluster's raft configuration and held raft state before, but its data directory has none (wiped or replaced): " +
			"it refuses to vote or serve. To re-add it, run `seqd node remove " + self + "` against the cluster; it then joins as a new server by itself"
	case Sibling:
		s = fmt.Sprintf("this server's cluster and server %s's (cluster %s) were both restored from one backup: it refuses to take part or serve, since both would hand out the same values. "+
			"Keep one restore: stop this server, delete its data directory, and start it empty with a --join naming the one you keep", v.By, v.Cluster)
	case SourceRunning:
		s = fmt.Sprintf("this server's data was restored from a backup of a cluster that is still running (server %s, generation %s, is admitted; one seen running waits a while after it goes out of sight): "+
			"it refuses to take part or serve, since both would hand out the same values. If the restore replaces that cluster: stop every server of it "+
			"(when one comes back later, it learns of this restore and stops for good). If the restore was a mistake: stop this server, delete its data directory, "+
			"and start it empty to join the running cluster", v.By, v.Cluster)
	case NewerGeneration:
		s = "a restore of this server's cluster (a newer generation of its lineage) is running, and no server of this server's own cluster is: " +
			"it defers to the restore and refuses to take part or serve (once the restore serves, this server is fenced for good). " +
			"To use it again: stop it, delete its data directory, and start it with a --join naming the restored cluster's servers"
	case Superseded:
		s = "this server's cluster was replaced by a restore (" + v.Cluster + ", learned from " + v.By + "): it stopped serving and refuses raft for good. " +
			"To use this server again: stop it, delete its data directory, and start it with a --join naming the restored cluster's servers"
	case JoinsWait:
		s = "not bootstrapping yet: waiting to see every server --join names (a server bootstraps only with all of them)"
	case ClusterExists:
		s = "not bootstrapping: a cluster exists (" + v.By + " holds state); waiting for its leader to add this server"
	case GroupsDiffer:
		s = fmt.Sprintf("not bootstrapping: server %s runs %d raft groups, and this one another count; start every server of a new cluster with the same --groups", v.By, v.Count)
	case ExpectWait:
		s = "not bootstrapping yet: fewer servers than --bootstrap-expect are ready"
	case Adopt:
		s = fmt.Sprintf("this server holds no raft state, and the cluster it joins runs %d raft groups: it adopts the cluster's count and starts again", v.Count)
	case GroupsGiven:
		s = fmt.Sprintf("the cluster this server joins runs %d raft groups, and this server was started with another --groups: "+
			"it cannot join (the leader does not add it). Its data directory holds no raft state yet: start it with --groups %d, or without --groups to adopt the cluster's count",
			v.Count, v.Count)
	default:
		s = string(v.Kind)
	}
	if v.Group > 0 && v.Kind != Superseded {
		s = fmt.Sprintf("group %d: %s", v.Group, s)
	}
	return s
}

// String is a short form for tests and logs: "refuse stale (group 2)".
func (v Verdict) String() string {
	var b strings.Builder
	b.WriteString(v.Outcome.String() + " " + string(v.Kind))
	if v.Group > 0 {
		fmt.Fprintf(&b, " (group %d)", v.Group)
	}
	return b.String()
}
