package cluster

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/seqd/seqd/group"
)

// Defaults for the Config fields left at zero.
const (
	// DefaultLease is the leader lease L. With the default raft timing
	// (server.DefaultConfig) a kill -9 of the leader costs about 1.3 s: the
	// new leader counts the lease from the last renewal it stored, so the
	// wait (L + margin after the old leader's last renewal) mostly overlaps
	// detection and election (see group.Group.lead).
	DefaultLease = time.Second
	// DefaultMaxVoters is how many voters the leader promotes joining
	// servers to; DefaultMinVoters is the floor dead-server cleanup keeps.
	DefaultMaxVoters = 5
	DefaultMinVoters = 3
)

// Config configures a Node. Zero durations take the defaults noted.
type Config struct {
	// ID is this server's raft ID and gossip name; it must be unique and stable.
	ID string
	// DataDir holds raft.db (log and stable store), fsm.db and snapshots/.
	DataDir string

	// RaftAddr is the raft TCP bind address; RaftAdvertise (default RaftAddr)
	// is what other servers dial.
	RaftAddr      string
	RaftAdvertise string
	// GossipAddr is the memberlist bind address (TCP and UDP); GossipAdvertise
	// (default GossipAddr) is what other servers contact.
	GossipAddr      string
	GossipAdvertise string
	// APIAddr is the advertised address of this server's API, published in
	// gossip so that followers can forward to the leader.
	APIAddr string

	// Join lists gossip addresses of other servers (it may include this
	// server's own). Joining is retried in the background until one answers.
	Join []string
	// BootstrapExpect is how many servers form a new cluster: a server with no
	// raft state bootstraps once it sees that many servers through gossip,
	// none of which has raft state. A server with state never bootstraps.
	// 0 disables bootstrapping (the server waits to be added by a leader).
	BootstrapExpect int

	// Groups is how many raft groups a new cluster runs. 0 means the
	// default: one group per bootstrap server (BootstrapExpect, at least
	// 1), and a server without raft state that finds its cluster running
	// another count adopts the cluster's (see RestartNeeded). It is fixed
	// once the data directory holds raft state: a server started with
	// another count refuses to start (see groups.go).
	Groups int

	// MaxVoters caps the voters the leader promotes joiners to (default 5);
	// servers beyond it stay non-voters. MinVoters (default 3) is the floor
	// below which dead-server cleanup never removes a voter.
	MaxVoters int
	MinVoters int
	// DeadServerGrace is how long gossip must see a server down before the
	// leader removes it from the configuration (default 0: never; operators
	// remove servers with RemoveServer).
	DeadServerGrace time.Duration
	// SpreadLeaders keeps every group's leader at its spread position,
	// whatever its traffic (seqd serve --leaders-follow-traffic=false; the
	// default follows it: follow.go).
	SpreadLeaders bool
	// Peers asks the other servers over their API (see Peers; nil: this
	// server asks nobody).
	Peers Peers
	// AssumeGone names voters that are gone for good (dead, their disks
	// lost): when no leader can vouch for this server (a full-cluster
	// restart), they count as having answered. It is how a cluster that lost
	// servers for good restarts; it is safe only if no server runs on an
	// older copy of its data directory (see vouch.go).
	AssumeGone []string
	// WallClock reads the wall clock in Unix ms (default time.Now); a
	// leader puts its reading in flake grants.
	WallClock func() int64
	// MaxClockSkew (default DefaultMaxClockSkew) is how far the leader's
	// wall clock may be from a majority of the voters' (Peers.Clock)
	// before it refuses flake grants.
	MaxClockSkew time.Duration

	// Options are every group's tunables (lease, raft timing, snapshots,
	// the allocator's bound, raft's log level), given to each group as
	// they are. Here, Lease defaults to DefaultLease, LeaseMargin to L/10
	// (at least 50ms) and RaftLogLevel to Warn, which also applies to
	// memberlist's own logs.
	group.Options

	// Logger receives the node's logs (default slog.Default()).
	Logger *slog.Logger

	// RaftTLS, when set, runs raft over mutual TLS.
	RaftTLS RaftTLS
	// GossipKey, when set (16, 24 or 32 bytes), encrypts and authenticates
	// gossip: servers without the same key cannot join.
	GossipKey []byte

	// StreamLayer, when set, carries raft traffic instead of a TCP transport
	// bound to RaftAddr (tests use it to cut a node off the network).
	StreamLayer raft.StreamLayer
}

// Errors returned by Node.
var (
	// ErrInvalidConfig wraps configuration errors found by Start.
	ErrInvalidConfig = group.ErrInvalidConfig
)

func (c *Config) setDefaults() error {
	if c.ID == "" {
		return fmt.Errorf("%w: an ID is required", ErrInvalidConfig)
	}
	if c.DataDir == "" {
		return fmt.Errorf("%w: a data directory is required", ErrInvalidConfig)
	}
	if c.MaxClockSkew <= 0 {
		c.MaxClockSkew = DefaultMaxClockSkew
	}
	if c.StreamLayer == nil {
		if err := checkHostPort("raft address", c.RaftAddr); err != nil {
			return err
		}
	}
	if err := checkHostPort("gossip address", c.GossipAddr); err != nil {
		return err
	}
	for _, j := range c.Join {
		if err := checkHostPort("join address", j); err != nil {
			return err
		}
	}
	if c.RaftAdvertise == "" {
		c.RaftAdvertise = c.RaftAddr
	}
	if c.GossipAdvertise == "" {
		c.GossipAdvertise = c.GossipAddr
	}
	if c.BootstrapExpect < 0 {
		return fmt.Errorf("%w: bootstrap-expect must be 0 or more, got %d", ErrInvalidConfig, c.BootstrapExpect)
	}
	switch len(c.GossipKey) {
	case 0, 16, 24, 32:
	default:
		return fmt.Errorf("%w: the gossip key must be 16, 24 or 32 bytes, got %d", ErrInvalidConfig, len(c.GossipKey))
	}
	if c.MaxVoters == 0 {
		c.MaxVoters = DefaultMaxVoters
	}
	if c.MinVoters == 0 {
		c.MinVoters = DefaultMinVoters
	}
	if c.MaxVoters < 1 || c.MinVoters < 1 {
		return fmt.Errorf("%w: max-voters and min-voters must be at least 1", ErrInvalidConfig)
	}
	if c.DeadServerGrace < 0 {
		return fmt.Errorf("%w: dead-server grace must not be negative", ErrInvalidConfig)
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Lease < 10*time.Millisecond {
		return fmt.Errorf("%w: lease %v is too short (at least 10ms)", ErrInvalidConfig, c.Lease)
	}
	if c.LeaseMargin == 0 {
		c.LeaseMargin = max(c.Lease/10, 50*time.Millisecond)
	}
	if c.LeaseMargin < 0 {
		return fmt.Errorf("%w: lease margin must not be negative", ErrInvalidConfig)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RaftLogLevel == 0 {
		c.RaftLogLevel = slog.LevelWarn
	}
	return nil
}

func checkHostPort(what, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("%w: %s %q is not host:port", ErrInvalidConfig, what, addr)
	}
	_ = host
	return nil
}
