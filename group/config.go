package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/logbridge"
)

// ErrInvalidConfig wraps every configuration error Open returns.
var ErrInvalidConfig = errors.New("invalid configuration")

// ErrShutdownStuck means raft did not stop within raftShutdownWait; the
// group's stores are then left open under raft's running goroutines.
var ErrShutdownStuck = errors.New("raft did not shut down in time")

// ErrStopped answers a wait on raft that the group's stop cut short.
var ErrStopped = errors.New("group stopped")

// applyTimeout bounds how long a raft Apply may wait to be enqueued.
const applyTimeout = 5 * time.Second

// raftShutdownWait bounds how long Close waits for raft to stop.
const raftShutdownWait = 15 * time.Second

// Config opens a group. Every field the host does not set explicitly has
// been filled by the host's defaults (cluster.Config); Open only checks.
type Config struct {
	// ID is this server's ID in the group's raft configuration.
	ID string
	// Dir holds the group's files: fsm.db, raft.db and snapshots/.
	Dir string
	// Transport carries the group's raft traffic; the host built it (and
	// closes it after Close).
	Transport raft.Transport
	// Host is the server running the group (see Host).
	Host Host

	// Index is the group's number in its cluster (0 to groups-1). Group 0
	// is the authority: spaces, flake namespaces and the cluster ID are
	// decided in it first. Every other group takes them from Authority.
	Index int
	// Authority reads group 0's committed state on this server; it is
	// required when Index > 0, and nil for group 0.
	Authority Authority
	// Follows returns group 0's latest raft configuration on this server,
	// which the configuration of a group other than group 0 follows (see
	// members.go); nil for group 0 (or a group that follows none).
	Follows func() (raft.Configuration, error)
	// AskSpace asks group 0's serving leader for its record of a space,
	// with the record's version (rec.Live() false: no such space, the zero
	// record, or a deleted one, which keeps its section size): the last
	// step of ResolveSpace, when neither the group's record nor this
	// server's copy of group 0 (which may lag) holds the space, and how a
	// group other than group 0 settles a record that differs from the copy
	// (see copySpaces). nil: nothing is asked (a cluster of one group).
	AskSpace func(ctx context.Context, name string) (rec fsm.SpaceRecord, err error)
	// Groups is how many groups the cluster runs (0: one). The group serves
	// only while group 0's record of the count agrees (see lead).
	Groups int
	// Owns reports whether the group owns a section (see seqd.SlotOf;
	// nil: every section, a cluster of one group).
	Owns func(space string, section uint64) bool

	// Options are the tunables the host passes on as they are.
	Options
	// WallClock reads the wall clock, in Unix ms, for the time a leader
	// puts in flake grants (nil: time.Now).
	WallClock func() int64

	// Logger receives the group's logs, raft's at RaftLogLevel and above.
	Logger *slog.Logger
}

func (c *Config) check() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("%w: a group needs this server's ID", ErrInvalidConfig)
	case c.Dir == "":
		return fmt.Errorf("%w: a group needs a data directory", ErrInvalidConfig)
	case c.Transport == nil || c.Host == nil:
		return fmt.Errorf("%w: a group needs a transport and a host", ErrInvalidConfig)
	case c.Index < 0 || (c.Index > 0) != (c.Authority != nil):
		return fmt.Errorf("%w: group %d needs an authority exactly when it is not group 0", ErrInvalidConfig, c.Index)
	case c.Lease <= 0 || c.LeaseMargin < 0:
		return fmt.Errorf("%w: lease %v and margin %v", ErrInvalidConfig, c.Lease, c.LeaseMargin)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func (c *Config) raftConfig(notify chan<- bool, out io.Writer) (*raft.Config, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.ID)
	rc.NotifyCh = notify
	rc.LogOutput = out
	rc.LogLevel = logbridge.HCLevel(c.RaftLogLevel)
	if c.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = c.HeartbeatTimeout
	}
	if c.ElectionTimeout > 0 {
		rc.ElectionTimeout = c.ElectionTimeout
	}
	if c.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	}
	if c.CommitTimeout > 0 {
		rc.CommitTimeout = c.CommitTimeout
	}
	if c.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = c.SnapshotThreshold
	}
	if c.SnapshotInterval > 0 {
		rc.SnapshotInterval = c.SnapshotInterval
	}
	if c.TrailingLogs > 0 {
		rc.TrailingLogs = c.TrailingLogs
	}
	// Raft's own limit: the leader lease timeout may not exceed the heartbeat timeout.
	if rc.LeaderLeaseTimeout > rc.HeartbeatTimeout {
		rc.LeaderLeaseTimeout = rc.HeartbeatTimeout
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return rc, nil
}
