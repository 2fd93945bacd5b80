// Package checker analyses a chaos test's history. A sequence run's:
//
//   - order: C1 (no value twice per key), C2 (per-key real-time order) and C3
//     (Current bounds), via internal/history, over the successful operations;
//   - linear: every key's successful operations are linearizable under
//     CounterModel, checked by porcupine (linear.go), bounded in time: a
//     check that does not finish is unknown, never valid;
//   - shape: every successful call returned what it asked for: one value per
//     key, values from 1, Reserve's count, and increasing values for a key
//     listed twice in one Next;
//   - restart: after every full-cluster restart (kill-all, wipe-restart), every
//     value is above every value acknowledged before the cluster went down;
//   - final-reads: after every fault was healed, Current of every key
//     succeeded (a cluster that never recovers is reported as unknown);
//   - availability: ok rate, the longest time without a successful call,
//     and per fault the outage it caused and the time from its healing to the
//     first successful call (informational: never invalid; availability.go).
//
// A segment run (client.Segment values, next to sequence calls) adds
// segments: S1 (no value twice per key across segments and calls) and S2
// (each segment's values increase); see segment.go.
//
// Both kinds of run also report the faults' own findings (findings.go:
// what a fault saw break that no history shows, such as a group left
// without a serving leader too long).
//
// A flake run's (a history of ids calls) are G1-G3 and final-ids instead
// (see flake.go), and grants over the worker grants its holders logged
// (grants.go), with the same availability figures.
//
// Only successful operations constrain the safety checkers: a call that
// failed or timed out may or may not have taken values, which only leaves
// gaps.
package checker
