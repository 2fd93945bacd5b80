// Package leasemodel is an executable model of one raft group's lease
// protocol and of admission, explored by a checker (DESIGN.md §8, "The
// model checker").
//
// The model has servers with clocks of differing rates, raft (terms,
// persisted votes, logs, commit by majority, the up-to-date check,
// pre-vote, leader stickiness, step-down without quorum contact,
// leadership transfer), seqd's lease loop (admission, barrier, the wait of
// lease.Deadline, renewals and the leases they grant), the handoff
// (withhold, a release only from a leader that renewed in its term,
// transfer), graceful stops, crashes and restarts, pauses, cut links,
// admission of restarted servers (admit.Decide) and cluster generations
// (restores of a backup, fenced through admit.Fence). The decisions enter
// through Rules, whose default (Real) is the code's own functions, so
// that what the checker searches is what runs.
//
// Explore runs randomized runs from a seed and checks after every step
// that no two servers of the lineage hold a lease at one real instant,
// that a server that learned of a newer generation never holds one, and
// that a cluster whose majority can serve does within a bound. A
// violation comes with a shrunk, readable trace.
//
// It is pure: it imports lease/, cluster/admit and the root package, and
// never raft, cluster/, group/ or fsm/.
package leasemodel
