// Package admit decides who may take part in a raft group: whether a
// server's raft gate for a group opens (Decide), whether a server must stop
// for good because its cluster was replaced by a restore (Fence), whether
// a server without state bootstraps a new cluster (Bootstrap), and whether
// it adopts the group count of the cluster it joins (AdoptCount).
//
// Every decision is a pure, total function of facts the host gathered (its
// own log and configuration, gossip, the answers other servers gave) and
// returns a typed verdict: an Outcome (admit, wait, refuse) and a Kind that
// says why, with a Message for people. It reads no clock, does no I/O and
// logs nothing: cluster/ gathers the facts, asks the peers, and applies the
// verdict in one place (opens or closes a gate, writes files, logs the
// refusal with refusal=<kind>, reports the kind in ClusterStatus). So a
// table test covers every path (admit_test.go has a row for every verdict
// kind and every finding of past reviews), and the model checker
// (internal/leasemodel) calls the same functions the servers do.
//
// It imports only the root package and the standard library.
//
// The rules, in one place (DESIGN.md §6 has the table and the arguments):
//
//   - A server is let into a group only on the strength of the group's
//     serving leader (it applied every committed entry), or, while no
//     leader answers, of a voter that heard from a leader no earlier than
//     it did (a witness, holding every record of its log), or of voters
//     that make a majority with it, none of which recorded its log beyond
//     what it holds; or, as the only voter of its configuration, after
//     seeing no other server of its cluster for SoloWait. So whenever a
//     majority of voters runs on its own data the group serves, as raft
//     alone would.
//   - A server without state joins only through a serving leader, or a
//     cluster that has just bootstrapped.
//   - A server is refused when a server of another cluster lists it, when
//     its log is older than a record of it (stale), when the leader does
//     not list it (removed), when it lost state it had (wiped), when a
//     sibling restore is seen while it is a lone voter, and for good once
//     fenced.
//   - Fence: a newer generation of a server's lineage supersedes it; two
//     sibling restores of one backup that have both served stop.
package admit
