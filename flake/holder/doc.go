// Package holder is the machinery that issues flake ids from workers the
// cluster grants: the Holder, the Granter it asks for grants (the cluster
// as a holder sees it), and the Reference clock it measures time with.
// A seqd server runs one Holder per namespace it serves ids of (service
// mode, api/), and the Go client's embedded Generator runs one in the
// caller's process (client/); each gives it a Granter of its own.
//
// # What it owns
//
//   - Holder (holder.go): acquires a worker on first use, and more under
//     demand up to Config.Workers; issues ids from each worker's granted
//     range with a flake.Generator; refuses a grant of another layout than
//     the namespace's (ErrLayoutMismatch).
//   - The lease (lease.go): a renewal every third of the lease that also
//     extends the range ahead of need, issuing only before the first of
//     the lease's end (counted from when the last renewal was sent) and the
//     range's end, acquiring anew when fenced, releasing on Close.
//   - Reference (reference.go): the leader's time carried in the last
//     grant, advanced by a clock that never steps.
//
// Why this is safe (a range is used by one Holder only, and ids never
// repeat whatever the clocks do) is written in the package flake's
// documentation.
//
// # What it never does
//
// It never decides a grant (the leader of group 0 does, through the raft
// log), never persists a grant or a range, never reads the wall clock, and
// imports only the standard library, the root package, flake/ and
// bootclock/. It logs only through the logger it is given.
package holder
