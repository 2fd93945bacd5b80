package admit

import "github.com/seqd/seqd"

// Learned is a generation a server learned of, and how.
type Learned struct {
	Generation seqd.Generation
	// Served is whether that generation is known to have served: its
	// server was admitted (gossip, a vouch answer), or a client carried it
	// (a client had an answer from it).
	Served bool
	// From names the source: a server ID, or "a client".
	From string
}

// Fence decides whether a server holding generation mine must stop for
// good on learning of l; served is whether this server is admitted now
// (it may serve). The verdict is Refuse with Kind Superseded, or Admit
// (nothing to do).
//
//   - A newer generation of its lineage that has served supersedes it: a
//     restore replaced its cluster (the restore's floor lies above every
//     value this cluster handed out before it, DESIGN.md §5), and whatever
//     it hands out from now on could repeat the restored cluster's values.
//     A newer generation that has not served leaves it alone: a restore
//     that sees its source running refuses to start (Decide:
//     SourceRunning), so a restore made by mistake next to a running
//     cluster stops nothing but itself.
//   - A sibling (another restore of the same backup) that served, met
//     after this server served too: both hand out the same values, so
//     both stop (each on learning of the other). A sibling that has not
//     served yet is kept out by Decide (Sibling), and leaves this one
//     alone.
//
// The servers of a cluster learn from each other too: a fenced server
// publishes what fenced it, and the others apply Fence to that (as served:
// it fenced a server).
func Fence(mine seqd.Generation, served bool, l Learned) Verdict {
	switch {
	case l.Served && l.Generation.Supersedes(mine):
	case served && l.Served && mine.Sibling(l.Generation):
	default:
		return Verdict{Outcome: Admit}
	}
	return Verdict{Outcome: Refuse, Kind: Superseded, By: l.From, Cluster: l.Generation.String()}
}
