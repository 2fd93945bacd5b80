// Package lease holds the leader-lease rules of one raft group as pure
// functions of what a group's log and clocks say: when a newly elected
// leader may serve (Deadline), and what a lease release certifies
// (Handoff). It reads no clock, does no I/O and knows nothing of raft's
// types: group/ applies the rules to a running group, fsm/ follows the
// lease entries of the log with a Handoff, and the model checker
// (internal/leasemodel) calls the same functions, so that what it searches
// is what runs. Standard library only.
//
// The invariant these rules keep (DESIGN.md §4, "Who may serve"): at any
// instant at most one server of a group holds a lease. A leader holds a
// lease only from a renewal entry that committed, timed from a clock
// reading taken before it submitted that entry; a new leader serves only
// once every earlier lease has ended, which it knows either by waiting
// (Deadline) or from a release that certifies it (Handoff).
package lease
