// Package sections is seqd's allocator: it hands out per-key sequence values
// from memory and keeps every value it returns covered by a committed
// high-water mark.
//
// Keys of a space are grouped into sections (section = key / section_size).
// Per section the allocator keeps, as described in DESIGN.md §3:
//
//   - max: the committed high-water mark, as last reported by the Store or
//     raised through it;
//   - floor: the value from which a key that is not in memory continues; it
//     starts at max when the section is loaded and only ever rises (when a key
//     is evicted, floor takes that key's value if larger);
//   - cur[key]: the last value returned for each key touched since loading.
//
// A value v is returned only when v <= max, so after a failover a new leader
// that starts every section at the committed max never repeats a value. max is
// raised one step ahead of need, asynchronously, once the highest value issued
// in a section passes max - step/2, so steady-state calls do not wait for
// consensus; raises of several sections are batched into one Store.Raise. A
// Next over keys in several sections that max does not cover (cold sections,
// or sections at their max) starts all their raises together, so the call
// waits for one Store.Raise rather than one per section in turn.
//
// The allocator serves only while it holds a lease (see Grant and Revoke): the
// lease is checked under the same lock as the increment, and revoking it drops
// every section, so nothing issued in an earlier leadership term is reused.
//
// The lease is timed by a Clock that counts the time the host spends
// suspended: by default BootClock, which reads CLOCK_BOOTTIME on Linux. Go's
// own monotonic clock (CLOCK_MONOTONIC on Linux) stands still while a host is
// suspended, so a leader whose virtual machine was suspended past its lease
// would resume believing the lease still ran, while a new leader may already
// be serving. On other systems BootClock falls back to the monotonic clock,
// and the lease there does not account for suspension. The lease still
// assumes bounded clock-rate drift: over one lease period, this clock and the
// clock on which a newly elected leader waits out the lease may disagree by
// no more than the margin the cluster adds to that wait. Reading
// CLOCK_BOOTTIME is a system call, so each call (Next, Reserve, Current) reads
// the clock once after it begins and uses that reading for all its lease
// checks, reading it again only after waiting for a raise; the doc comment of
// callNow explains why that is as safe as a reading per value.
//
// # What it owns, and what it never does
//
// It owns the values handed out and what keeps them safe: the sections held
// in memory (max, floor and the keys' current values, with the bound on keys
// held), the lease (epochs, Grant, Withhold, Revoke) and the clock that times
// it, and the batching of raises into Store.Raise.
//
// A Store whose spaces may lag the state that decides them also implements
// SpaceFinder: a call for a space not loaded yet asks it to find the space
// first (outside the allocator's locks), so the allocator never answers
// "unknown space" for a space that exists.
//
// It never imports raft, nor fsm/, group/, cluster/ or api/: it imports only
// the root package, and the consensus layer is behind Store. It never writes
// anything durable itself (a mark is durable once Store.Raise returns nil),
// and it never decides leadership: its caller grants, withholds and revokes
// the lease.
package sections
