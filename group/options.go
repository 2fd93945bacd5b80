package group

import (
	"log/slog"
	"time"

	"github.com/seqd/seqd/sections"
)

// Options are a group's tunables: the host's configuration embeds them
// (cluster.Config) and gives them to every group as they are, after
// filling its defaults.
type Options struct {
	// Lease is how long a renewal lets the allocator serve (the leader
	// lease L), and LeaseMargin what a new leader adds to the longest
	// earlier lease for clock-rate drift.
	Lease, LeaseMargin time.Duration
	// LeaseHandoff makes a planned leadership move (balancing, graceful
	// shutdown, transfers) hand the lease over: the leader stops serving,
	// commits a lease release, then transfers, and a new leader that finds
	// the release as the last lease entry serves without waiting out a
	// lease (see Group.TransferLeadership and lead).
	LeaseHandoff bool
	// UnsafeDisableLease is for testing the test harness only: a new
	// leader serves at once, without waiting out the previous leader's
	// lease, and keeps serving until raft reports the loss of leadership.
	// It breaks the order guarantees (C2, C3) when an old leader is paused
	// or cut off.
	UnsafeDisableLease bool
	// UnsafeFlakeTrustClock is for testing the chaos test only: flake
	// grants are a naive Snowflake's (see fsm.FSM.SetUnsafeFlakeTrustClock),
	// starting at the leader's time and ignoring each worker's high-water
	// mark and the namespace's floor, and a leader whose clock is far from
	// its peers' still grants. Ids repeat when clocks step back and workers
	// are reused. Every server must have the same setting.
	UnsafeFlakeTrustClock bool
	// LeaseClock times the lease (nil: sections' boot-time clock, which
	// counts time the host spends suspended).
	LeaseClock sections.Clock
	// MaxKeysPerSection bounds the allocator's memory (0: unbounded).
	MaxKeysPerSection int
	// OnRaise, when set, observes every high-water-mark raise (metrics).
	OnRaise func(marks int, took time.Duration, err error)

	// Raft timing (0: hashicorp/raft's defaults, 1s, 1s, 500ms, 50ms).
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, CommitTimeout time.Duration
	// SnapshotThreshold and SnapshotInterval control raft snapshots (0:
	// 8192 entries, 120s); TrailingLogs is how many entries stay in the
	// log after a snapshot (0: 10240): a follower further behind gets the
	// snapshot.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64

	// RaftLogLevel is the level from which raft's own logs are kept.
	RaftLogLevel slog.Level
}
