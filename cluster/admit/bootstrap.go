package admit

// BootstrapFacts is what a server without raft state knows when it
// considers bootstrapping a new cluster.
type BootstrapFacts struct {
	Self     string
	HasState bool
	// Expect is --bootstrap-expect (0: never bootstrap); Groups is the
	// group count this server runs.
	Expect, Groups int
	// Ready is whether this server would bootstrap now: every server its
	// --join list names is alive in gossip.
	Ready bool
	// Members is the gossip view, this server included.
	Members []Member
}

// Server is a voter of a bootstrap configuration.
type Server struct {
	ID, RaftAddr string
}

// Bootstrap decides whether a server bootstraps a new cluster, and with
// which voters: every ready server seen (this one included) once there are
// Expect of them and none holds state. Requiring every server to see all
// of its --join list keeps servers that lost their data (wiped disks) from
// founding a new cluster while a server of their old cluster, which they
// were told to join, is down: a new cluster would hand out values the old
// one did. Servers of the first release do not say whether they are ready;
// they count when they hold no state. Every server must run the same group
// count.
func Bootstrap(f BootstrapFacts) ([]Server, Verdict) {
	if f.HasState || f.Expect == 0 {
		return nil, Verdict{Outcome: Wait}
	}
	if !f.Ready {
		return nil, Verdict{Outcome: Wait, Kind: JoinsWait}
	}
	var servers []Server
	for _, m := range f.Members {
		if !m.Alive {
			continue
		}
		if m.HasState && m.ID != f.Self {
			return nil, Verdict{Outcome: Wait, Kind: ClusterExists, By: m.ID}
		}
		if m.ID != f.Self && !m.Ready && m.Proto != 0 {
			continue // it would not bootstrap (yet): it does not count
		}
		if m.groups() != f.Groups {
			return nil, Verdict{Outcome: Wait, Kind: GroupsDiffer, By: m.ID, Count: m.groups()}
		}
		servers = append(servers, Server{ID: m.ID, RaftAddr: m.RaftAddr})
	}
	if len(servers) < f.Expect {
		return nil, Verdict{Outcome: Wait, Kind: ExpectWait, Answers: len(servers)}
	}
	return servers, Verdict{Outcome: Admit, Kind: ByBootstrap, Answers: len(servers)}
}

// CountFacts is what a server knows when it considers adopting the group
// count of the cluster it joins.
type CountFacts struct {
	// Running is the group count this server runs; Given is its --groups
	// (0 when not given); HasState is whether it holds raft state in any
	// group.
	Running, Given int
	HasState       bool
	// Members is the gossip view (this server excluded).
	Members []Member
}

// AdoptCount decides whether a server without raft state adopts the group
// count of the cluster it joins (it then records it and starts again: it
// held nothing, so nothing is lost). It adopts only when every server
// holding state that it sees, alive, agrees on one cluster and one count,
// and only when not given --groups (then it says what the cluster runs and
// stays out: the leader does not add it).
func AdoptCount(f CountFacts) Verdict {
	if f.HasState {
		return Verdict{Outcome: Wait}
	}
	counts, clusters := map[int]bool{}, map[string]bool{}
	for _, m := range f.Members {
		if m.Alive && m.HasState {
			counts[m.groups()] = true
			clusters[m.Generation.Cluster] = true
		}
	}
	if len(counts) != 1 || len(clusters) != 1 {
		return Verdict{Outcome: Wait} // nobody holds state yet, or servers disagree (see Decide)
	}
	var k int
	for c := range counts {
		k = c
	}
	switch {
	case k == f.Running:
		return Verdict{Outcome: Wait}
	case f.Given != 0:
		return Verdict{Outcome: Refuse, Kind: GroupsGiven, Count: k}
	}
	return Verdict{Outcome: Admit, Kind: Adopt, Count: k}
}
