package admit

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd"
)

// Generations of one lineage L: the cluster that bootstrapped (S), two
// restores of one of its backups (X, Y: siblings), and a restore of X's
// backup (Z); and a cluster of another lineage (O).
var (
	genS = seqd.Generation{Lineage: "L", Number: 0, Cluster: "S"}
	genX = seqd.Generation{Lineage: "L", Number: 1, Cluster: "X"}
	genY = seqd.Generation{Lineage: "L", Number: 1, Cluster: "Y"}
	genZ = seqd.Generation{Lineage: "L", Number: 2, Cluster: "Z"}
	genO = seqd.Generation{Lineage: "O", Number: 0, Cluster: "O"}
)

// lastContact is when the deciding server (voter) last heard from a
// leader before it stopped, in Unix ms.
const lastContact = 1_800_000_000_000

// voter builds a server of cluster S with state in a 3-voter group.
func voter(id string, last uint64) Self {
	return Self{ID: id, Generation: genS, HasState: true, LastIndex: last, Voters: []string{"n1", "n2", "n3"}, ConfigKnown: true, ContactMs: lastContact}
}

// peer is an answer from server by of generation g about the asking
// server: a voter of its configuration, recorded at index rec with term
// recTerm (0: not recorded), its own log ending at last.
func peer(by string, g seqd.Generation, rec, recTerm, last uint64) Answer {
	return Answer{By: by, Generation: g, InConfiguration: true, Voter: true, Seen: rec > 0, RecordedIndex: rec, RecordedTerm: recTerm,
		TermHere: recTerm, LastIndex: last, Voters: []string{"n1", "n2", "n3"}}
}

func leader(a Answer) Answer { a.Authoritative, a.Admitted = true, true; return a }

// up marks an answer as coming from a server admitted in the group that
// heard from a leader after the deciding server did (it ran on while that
// one restarted).
func up(a Answer) Answer { a.Admitted, a.ContactMs = true, lastContact+10_000; return a }

// later marks an answer as coming from a server that restarted too, having
// heard from a leader after the deciding server did (a full restart).
func later(a Answer) Answer { a.ContactMs = lastContact + 10_000; return a }

// lagged marks an answer as coming from a server that lost touch with the
// leaders before the deciding server did (cut off, stopped earlier).
func lagged(a Answer) Answer { a.ContactMs = lastContact - 60_000; return a }

func TestDecide(t *testing.T) {
	base := func(self Self, answers ...Answer) Facts {
		return Facts{Self: self, Answers: answers, Joined: true, CanAsk: true, SinceGossip: time.Minute}
	}
	with := func(f Facts, edit func(*Facts)) Facts { edit(&f); return f }
	stale := up(peer("n2", genS, 500, 7, 900))
	cases := []struct {
		name string
		f    Facts
		want Outcome
		kind Kind
	}{
		// Admissions.
		{"the serving leader vouches", base(voter("n1", 100), leader(peer("n2", genS, 90, 3, 120))), Admit, ByLeader},
		{"no leader: one admitted voter of 3 answers, a majority with this server (a restart meeting a crash of the leader: review, groups stayed down 30 s)",
			base(voter("n1", 100), up(peer("n3", genS, 90, 3, 120))), Admit, ByWitness},
		{"no leader: two admitted voters of 5 answer", with(base(voter("n1", 100), up(peer("n2", genS, 90, 3, 120)), up(peer("n3", genS, 80, 3, 100))),
			func(f *Facts) { f.Self.Voters = []string{"n1", "n2", "n3", "n4", "n5"} }), Admit, ByWitness},
		{"no leader: a full-cluster restart with a voter gone, the answering voter in touch with a leader after this one",
			base(voter("n1", 100), later(peer("n2", genS, 90, 3, 120))), Admit, ByWitness},
		{"no leader: an admitted voter that lost touch with the leaders before this one is no witness, but a majority with this server",
			base(voter("n1", 100), func() Answer { a := lagged(peer("n2", genS, 90, 3, 120)); a.Admitted = true; return a }()), Admit, ByAnswers},
		{"no leader: a voter that stopped with this one (its contact recorded a moment earlier) counts",
			base(voter("n1", 100), func() Answer { a := peer("n2", genS, 90, 3, 120); a.ContactMs = lastContact - 800; return a }()), Admit, ByWitness},
		{"no leader: a voter that lost touch more than the slack before this one is no witness, but a majority with this server",
			base(voter("n1", 100), func() Answer { a := peer("n2", genS, 90, 3, 120); a.ContactMs = lastContact - 1_200; return a }()), Admit, ByAnswers},
		{"no leader: without a contact record of its own (a build before them), a majority with this server admits",
			base(func() Self { v := voter("n1", 100); v.ContactMs = 0; return v }(), up(peer("n2", genS, 90, 3, 120))), Admit, ByAnswers},
		{"no leader: every other voter answered, none in touch after this one (a full-cluster restart after they lagged)",
			base(voter("n1", 100), peer("n2", genS, 90, 3, 120), peer("n3", genS, 80, 3, 100)), Admit, ByAnswers},
		{"no leader: three of four other voters of 5 answered after a full restart", with(base(voter("n1", 100), peer("n2", genS, 90, 3, 120), peer("n3", genS, 80, 3, 100), peer("n4", genS, 80, 3, 100)),
			func(f *Facts) { f.Self.Voters = []string{"n1", "n2", "n3", "n4", "n5"} }), Admit, ByAnswers},
		{"no leader: two of four other voters of 5, neither a witness: a majority with this server", with(base(voter("n1", 100), lagged(peer("n2", genS, 90, 3, 120)), lagged(peer("n3", genS, 80, 3, 100))),
			func(f *Facts) { f.Self.Voters = []string{"n1", "n2", "n3", "n4", "n5"} }), Admit, ByAnswers},
		{"no leader: voters named gone count as answered", with(base(voter("n1", 100), lagged(peer("n3", genS, 90, 3, 120))),
			func(f *Facts) {
				f.Self.Voters, f.Self.AssumeGone = []string{"n1", "n2", "n3", "n4", "n5"}, []string{"n2"}
			}), Admit, ByAnswers},
		{"no leader: servers stopped or crashed one by one, the last one away: the voter that stopped earlier answers (review: the crash variant waited for the last server)",
			base(voter("n2", 100), lagged(peer("n3", genS, 90, 3, 120))), Admit, ByAnswers},
		{"no leader: the voter that stopped earlier recorded its log beyond what it holds (an older copy)",
			base(voter("n2", 100), lagged(peer("n3", genS, 500, 7, 900))), Refuse, Stale},
		{"no leader: the one voter that answers had lagged before it stopped, and a third is down: a majority with this server, which holds no record of a later copy (the residual of DESIGN §6; review: a lagging peer vouched for an older copy after a power loss)",
			base(voter("n1", 100), lagged(peer("n2", genS, 90, 3, 120))), Admit, ByAnswers},
		{"the only voter, alone for SoloWait", base(Self{ID: "n1", Generation: genS, HasState: true, LastIndex: 5, Voters: []string{"n1"}, ConfigKnown: true}), Admit, BySolo},
		{"no state: the serving leader lets it join", base(Self{ID: "n4"}, leader(peer("n1", genS, 0, 0, 120))), Admit, ByJoin},
		{"no state: joining a just-bootstrapped cluster whose voters are all seen fresh",
			with(base(Self{ID: "n3"}, peer("n1", genS, 0, 0, 1)), func(f *Facts) {
				f.Members = []Member{{ID: "n2", Alive: true}}
			}), Admit, ByFresh},
		{"no way to ask", with(base(voter("n1", 3)), func(f *Facts) { f.CanAsk = false }), Admit, Unchecked},
		{"a restore's first server next to the fenced source it supersedes",
			with(base(Self{ID: "r1", Generation: genX, HasState: true, LastIndex: 2, Voters: []string{"r1"}, ConfigKnown: true}),
				func(f *Facts) {
					// The source lists n1, n2, n3; r1 took n1's ID: its listing does not count.
					f.Answers = []Answer{{By: "n2", Generation: genS, InConfiguration: true, LastIndex: 900}}
				}), Admit, BySolo},

		// Waits.
		{"not joined gossip, no state", with(base(Self{ID: "n4"}), func(f *Facts) { f.Joined = false }), Wait, NotJoined},
		{"no leader and no other voter answers", base(voter("n1", 100)), Wait, QuorumWait},
		{"no leader: one of four other voters of 5 answers, no witness", with(base(voter("n1", 100), lagged(peer("n2", genS, 90, 3, 120))),
			func(f *Facts) { f.Self.Voters = []string{"n1", "n2", "n3", "n4", "n5"} }), Wait, QuorumWait},
		{"no leader: a wiped group answers from an empty log, which does not count (review: an older copy was let in)",
			base(voter("n1", 100), peer("n2", genS, 0, 0, 0)), Wait, QuorumWait},
		{"no leader: a non-voter's answer does not count", with(base(voter("n1", 100), peer("n4", genS, 90, 3, 120)),
			func(f *Facts) {}), Wait, QuorumWait},
		{"configuration unknown", with(base(voter("n1", 100), peer("n2", genS, 90, 3, 120)), func(f *Facts) { f.Self.ConfigKnown = false }), Wait, QuorumWait},
		{"the only voter sees a server of its cluster holding state (an older copy of a lone node): wait for its answer",
			with(base(Self{ID: "n1", Generation: genS, HasState: true, LastIndex: 5, Voters: []string{"n1"}, ConfigKnown: true}),
				func(f *Facts) { f.Members = []Member{{ID: "n2", Alive: true, HasState: true, Generation: genS}} }), Wait, NoAnswer},
		{"the only voter, before SoloWait", with(base(Self{ID: "n1", Generation: genS, HasState: true, LastIndex: 5, Voters: []string{"n1"}, ConfigKnown: true}),
			func(f *Facts) { f.SinceGossip = time.Second }), Wait, SoloWaiting},
		{"no state, no answer", base(Self{ID: "n4"}), Wait, LeaderWait},
		{"no state, no leader, a cluster past its bootstrap", base(Self{ID: "n4"}, peer("n1", genS, 0, 0, 40)), Wait, LeaderWait},
		{"no state: a just-bootstrapped cluster whose voter n2 is not seen", base(Self{ID: "n3"}, peer("n1", genS, 0, 0, 1)), Wait, BootstrapWait},

		// Refusals.
		{"stale: a record beyond its log (an older copy of its directory)", base(voter("n1", 100), stale), Refuse, Stale},
		{"stale: the serving leader's record beyond its log", base(voter("n1", 100), leader(stale)), Refuse, Stale},
		{"stale: another term at the recorded index (an older copy that appended entries of its own since)",
			base(voter("n1", 600), func() Answer { a := up(peer("n2", genS, 500, 7, 900)); a.TermHere = 6; return a }()), Refuse, Stale},
		{"stale: the most damning answer counts", base(voter("n1", 100), up(peer("n3", genS, 90, 3, 120)), stale), Refuse, Stale},
		{"stale: after a full restart, found by one of the voters that all answered", base(voter("n1", 100), peer("n3", genS, 90, 3, 120), peer("n2", genS, 500, 7, 900)), Refuse, Stale},
		{"removed: the serving leader does not list it",
			base(voter("n1", 100), func() Answer { a := leader(peer("n2", genS, 90, 3, 120)); a.InConfiguration = false; return a }()), Refuse, Removed},
		{"wiped: a voter recorded holding state comes back empty", base(Self{ID: "n1"}, leader(peer("n2", genS, 90, 3, 120))), Refuse, Wiped},
		{"foreign: another cluster lists this server (a restore into a member's directory, a copy)",
			base(voter("n1", 100), Answer{By: "m1", Generation: genO, InConfiguration: true, LastIndex: 50}), Refuse, Foreign},
		{"foreign: a newer generation of its own lineage lists it (it is superseded, and Fence stops it)",
			base(voter("n1", 100), Answer{By: "r2", Generation: genX, InConfiguration: true, LastIndex: 50}), Refuse, Foreign},
		{"clusters: no state, servers of two clusters answer", base(Self{ID: "n4"}, peer("n1", genS, 0, 0, 40), peer("m1", genO, 0, 0, 40)), Refuse, Clusters},
		{"sibling: a lone restored voter sees another restore of the same backup",
			with(base(Self{ID: "r1", Generation: genX, HasState: true, LastIndex: 2, Voters: []string{"r1"}, ConfigKnown: true}),
				func(f *Facts) { f.Members = []Member{{ID: "q1", Alive: true, HasState: true, Generation: genY}} }), Refuse, Sibling},
		{"sibling: started together, each answers the other",
			base(Self{ID: "r1", Generation: genX, HasState: true, LastIndex: 2, Voters: []string{"r1"}, ConfigKnown: true},
				Answer{By: "q1", Generation: genY, LastIndex: 2}), Refuse, Sibling},
		{"source running: a restore next to an admitted server of the cluster it replaces (review: a restore into a member's directory)",
			with(base(Self{ID: "n2", Generation: genX, HasState: true, LastIndex: 2, Voters: []string{"n2"}, ConfigKnown: true}),
				func(f *Facts) { f.Answers = []Answer{up(peer("n1", genS, 0, 0, 900))} }), Refuse, SourceRunning},
		{"source running: seen in gossip, admitted", with(base(Self{ID: "r1", Generation: genX, HasState: true, LastIndex: 2, Voters: []string{"r1"}, ConfigKnown: true}),
			func(f *Facts) {
				f.Members = []Member{{ID: "n3", Alive: true, HasState: true, Admitted: true, Generation: genS}}
			}), Refuse, SourceRunning},
		{"source running: seen a moment ago, out of sight now (paused, cut off)", with(base(Self{ID: "r1", Generation: genX, HasState: true, LastIndex: 2, Voters: []string{"r1"}, ConfigKnown: true}),
			func(f *Facts) { f.SourceSeen, f.SinceSource = true, 3*time.Second }), Refuse, SourceRunning},
		{"source out of sight for longer than SourceQuiet: the solo rule applies", with(base(Self{ID: "r1", Generation: genX, HasState: true, LastIndex: 2, Voters: []string{"r1"}, ConfigKnown: true}),
			func(f *Facts) { f.SourceSeen, f.SinceSource = true, SourceQuiet }), Admit, BySolo},
		{"newer generation: a restore of its cluster is around and its own cluster does not run (a site coming back while the restore starts)",
			with(base(voter("n1", 100)), func(f *Facts) { f.NewerSeen, f.SinceNewer = true, time.Second }), Refuse, NewerGeneration},
		{"newer generation, but its own cluster runs (a restore made by mistake next to it): it rejoins",
			with(base(voter("n1", 100), up(peer("n2", genS, 90, 3, 120))), func(f *Facts) { f.NewerSeen, f.SinceNewer = true, time.Second }), Admit, ByWitness},
		{"superseded: fenced for good", with(base(voter("n1", 100), leader(peer("n2", genS, 90, 3, 120))), func(f *Facts) { f.Self.Fenced = true }), Refuse, Superseded},
	}
	seen := map[Kind]bool{}
	for _, c := range cases {
		v := Decide(c.f)
		if v.Outcome != c.want || v.Kind != c.kind {
			t.Errorf("%s: got %v, want %v %v", c.name, v, c.want, c.kind)
		}
		if msg := v.Message(c.f.Self.ID); msg == "" || strings.Contains(msg, "%!") {
			t.Errorf("%s: message %q", c.name, msg)
		}
		seen[v.Kind] = true
	}
	for _, k := range []Kind{ByLeader, ByWitness, ByAnswers, BySolo, ByJoin, ByFresh, Unchecked, NotJoined, NoAnswer, QuorumWait, LeaderWait, BootstrapWait,
		SoloWaiting, Foreign, Clusters, Removed, Stale, Wiped, Sibling, SourceRunning, NewerGeneration, Superseded} {
		if !seen[k] {
			t.Errorf("no row reaches %q", k)
		}
	}
}

// A group's verdict names the group; the quorum wait names the voters
// still to answer.
func TestDecideDetails(t *testing.T) {
	f := Facts{Group: 3, Self: voter("n1", 100), Joined: true, CanAsk: true}
	v := Decide(f)
	if v.Group != 3 || !slices.Equal(v.Missing, []string{"n2", "n3"}) || !strings.HasPrefix(v.Message("n1"), "group 3: ") {
		t.Fatalf("got %+v, %q", v, v.Message("n1"))
	}
}

func TestFence(t *testing.T) {
	cases := []struct {
		name   string
		mine   seqd.Generation
		served bool
		l      Learned
		fenced bool
	}{
		{"the source learns of its restore, which served", genS, true, Learned{Generation: genX, Served: true}, true},
		{"the source learns of its restore before serving itself", genS, false, Learned{Generation: genX, Served: true}, true},
		{"the source learns of a restore that never served (made by mistake next to it): it goes on", genS, true, Learned{Generation: genX}, false},
		{"a restore learns of a restore of its own backup", genX, true, Learned{Generation: genZ, Served: true}, true},
		{"an older restore of the lineage meets the newest (a chain)", genY, true, Learned{Generation: genZ, Served: true}, true},
		{"a restore learns of its source: nothing to do", genX, true, Learned{Generation: genS, Served: true}, false},
		{"siblings that both served stop", genX, true, Learned{Generation: genY, Served: true}, true},
		{"a sibling that has not served leaves a serving one alone", genX, true, Learned{Generation: genY}, false},
		{"a sibling met before this one served: Decide keeps it out instead", genX, false, Learned{Generation: genY, Served: true}, false},
		{"another lineage", genS, true, Learned{Generation: genO, Served: true}, false},
		{"its own generation", genX, true, Learned{Generation: genX, Served: true}, false},
		{"an unknown generation", genX, true, Learned{Served: true}, false},
	}
	for _, c := range cases {
		v := Fence(c.mine, c.served, c.l)
		if got := v.Outcome == Refuse; got != c.fenced || (got && v.Kind != Superseded) {
			t.Errorf("%s: got %v, want fenced %v", c.name, v, c.fenced)
		}
	}
}

func TestBootstrap(t *testing.T) {
	m := func(id string, ready bool) Member {
		return Member{ID: id, Alive: true, Ready: ready, Proto: 5, Groups: 3, RaftAddr: id + ":7000"}
	}
	three := []Member{m("n1", true), m("n2", true), m("n3", true)}
	cases := []struct {
		name    string
		f       BootstrapFacts
		kind    Kind
		servers int
	}{
		{"three ready servers bootstrap", BootstrapFacts{Self: "n1", Expect: 3, Groups: 3, Ready: true, Members: three}, ByBootstrap, 3},
		{"a server with state: never", BootstrapFacts{Self: "n1", Expect: 3, Groups: 3, Ready: true, HasState: true, Members: three}, "", 0},
		{"no --bootstrap-expect: never", BootstrapFacts{Self: "n1", Groups: 3, Ready: true, Members: three}, "", 0},
		{"not every --join server seen", BootstrapFacts{Self: "n1", Expect: 3, Groups: 3, Members: three}, JoinsWait, 0},
		{"a server holding state is seen (wiped disks must not found a new cluster)",
			BootstrapFacts{Self: "n1", Expect: 3, Groups: 3, Ready: true, Members: append([]Member{{ID: "n9", Alive: true, HasState: true}}, three...)}, ClusterExists, 0},
		{"a server with another group count", BootstrapFacts{Self: "n1", Expect: 3, Groups: 1, Ready: true, Members: three}, GroupsDiffer, 0},
		{"a server that is not ready does not count", BootstrapFacts{Self: "n1", Expect: 3, Groups: 3, Ready: true, Members: []Member{m("n1", true), m("n2", true), m("n3", false)}}, ExpectWait, 0},
		{"a first-release server without state counts", BootstrapFacts{Self: "n1", Expect: 3, Groups: 1, Ready: true,
			Members: []Member{{ID: "n1", Alive: true, Ready: true, Proto: 5}, {ID: "n2", Alive: true}, {ID: "n3", Alive: true}}}, ByBootstrap, 3},
	}
	for _, c := range cases {
		servers, v := Bootstrap(c.f)
		if v.Kind != c.kind || len(servers) != c.servers || (v.Outcome == Admit) != (c.kind == ByBootstrap) {
			t.Errorf("%s: got %v with %d servers, want %q with %d", c.name, v, len(servers), c.kind, c.servers)
		}
	}
}

func TestAdoptCount(t *testing.T) {
	held := func(id string, groups int, g seqd.Generation) Member {
		return Member{ID: id, Alive: true, HasState: true, Groups: groups, Generation: g}
	}
	cases := []struct {
		name    string
		f       CountFacts
		outcome Outcome
		kind    Kind
	}{
		{"a new server adopts its cluster's count", CountFacts{Running: 3, Members: []Member{held("n1", 0, genS), held("n2", 0, genS)}}, Admit, Adopt},
		{"the same count: nothing to do", CountFacts{Running: 3, Members: []Member{held("n1", 3, genS)}}, Wait, ""},
		{"given --groups: refuse and say so", CountFacts{Running: 3, Given: 3, Members: []Member{held("n1", 0, genS)}}, Refuse, GroupsGiven},
		{"servers disagree on the count", CountFacts{Running: 3, Members: []Member{held("n1", 2, genS), held("n2", 4, genS)}}, Wait, ""},
		{"servers of two clusters", CountFacts{Running: 3, Members: []Member{held("n1", 2, genS), held("m1", 2, genO)}}, Wait, ""},
		{"nobody holds state yet", CountFacts{Running: 3, Members: []Member{{ID: "n1", Alive: true}}}, Wait, ""},
		{"this server holds state: its count is fixed", CountFacts{Running: 3, HasState: true, Members: []Member{held("n1", 0, genS)}}, Wait, ""},
	}
	for _, c := range cases {
		v := AdoptCount(c.f)
		if v.Outcome != c.outcome || v.Kind != c.kind {
			t.Errorf("%s: got %v, want %v %q", c.name, v, c.outcome, c.kind)
		}
	}
}
