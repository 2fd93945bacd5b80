package fsm

import (
	"time"

	"github.com/seqd/seqd"
)

// maxClusterIDLen bounds a cluster ID's length.
const maxClusterIDLen = 64

// Kind identifies the type of a replicated command. It is the first byte of
// every encoded command.
type Kind uint8

// The command kinds. The values are part of the replicated log format and must
// never be renumbered.
const (
	KindCreateSpace Kind = 1
	KindRaise       Kind = 2
	KindNoop        Kind = 3
	KindServerSeen  Kind = 4
	// KindCluster and KindLease are protocol 2 (see ProtocolVersion): a
	// leader writes them only once every server in the configuration runs a
	// build that knows them, since builds before them stop on an unknown
	// kind.
	KindCluster Kind = 5
	KindLease   Kind = 6
)

// KindIgnorable is the bit that marks a command kind as safe to skip. A
// build that meets an unknown kind with this bit set applies it as a no-op
// instead of stopping, so a later build may add such kinds (for state that
// only it reads) without breaking a rolling upgrade. An unknown kind without
// the bit stops the node: skipping it could make this replica diverge.
const KindIgnorable Kind = 0x80

// ProtocolVersion is the highest replicated-command protocol this build
// writes and reads. Protocol 1 is the commands of the first release
// (create space, raise, no-op, server seen); protocol 2 adds KindCluster and
// KindLease. A cluster moves to protocol 2 through a KindCluster entry,
// which its leader writes only once every server in the raft configuration
// advertises protocol 2 (through gossip).
const ProtocolVersion = 2

// Command is the decoded form of a raft log entry. Space is set for
// KindCreateSpace, Marks for KindRaise and Server for KindServerSeen; the
// other fields are zero.
type Command struct {
	Kind   Kind
	Space  seqd.Space
	Marks  []seqd.Mark
	Server string
	Index  uint64 // KindServerSeen: the server's raft index

	// KindCluster: the cluster's identity and the protocol it moves to.
	ClusterID string
	Protocol  uint64
	// KindLease: the granting leader's lease and lease margin.
	Lease, LeaseMargin time.Duration
}
