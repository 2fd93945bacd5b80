package seqd

import "time"

// Limits on one call. A server refuses a larger call with ErrInvalidArgument;
// clients check them before sending.
const (
	// MaxKeys is the most keys one Next or Current call may name.
	MaxKeys = 10000
	// MaxReserveCount is the most values one Reserve call may take.
	MaxReserveCount = 1000000
	// MaxFloorRise is the most one SetFloor call may raise a section's
	// high-water mark by: the raise budget's RaiseWindow (10 s) at its rate
	// (fsm.RaiseRatePerUs), so that a floor never leaves its section
	// without budget for the raises its calls need next (DESIGN.md §5 and
	// §13). A larger jump is made in steps, 10 s apart.
	MaxFloorRise = 40_960_000_000
	// FloorRiseInterval is how long the raise budget takes to grant
	// another MaxFloorRise: the steps of a larger jump are this far apart.
	FloorRiseInterval = 10 * time.Second
)

// Header names of the wire protocol (HTTP headers, or Connect error
// metadata).
const (
	// HeaderLeader carries the leader's API address on an Unavailable error,
	// so that a client can go straight to it.
	HeaderLeader = "Seqd-Leader"
	// HeaderLeaderID carries the leader's server ID next to HeaderLeader.
	HeaderLeaderID = "Seqd-Leader-Id"
	// HeaderRoutingVersion is the response header with the answering
	// leader's routing-table version (ClusterStatusResponse.version); a
	// client refreshes its routing when it grows.
	HeaderRoutingVersion = "Seqd-Routing-Version"
	// HeaderServedBy names the server that computed the answer (set by the
	// leader; not copied when a follower forwards).
	HeaderServedBy = "Seqd-Served-By"
	// HeaderForwarded marks a request a follower forwarded to the leader, so
	// that it is never forwarded twice.
	HeaderForwarded = "Seqd-Forwarded"
	// HeaderEntry names the server at which a call of a front end that
	// cannot route (the Redis protocol, Leaf's API) entered the cluster;
	// such a call and its forward carry it, so that the group's leader
	// counts it as that server's traffic (cluster/traffic).
	HeaderEntry = "Seqd-Entry"
	// HeaderGroup carries, on an answer served by one raft group of a
	// cluster of several, the group and the term of its leader that served
	// it ("<group> <term>", decimal), so that a client keeps the newest
	// routing per group.
	HeaderGroup = "Seqd-Group"
	// HeaderGeneration carries a Generation ("lineage/number/cluster", see
	// Generation.String): on every answer, the answering server's; on a
	// request, the newest the caller has met of the server's lineage. A
	// server that learns of a newer generation of its own lineage stops
	// serving for good (ErrSuperseded), and a client refuses an answer of
	// an older one.
	HeaderGeneration = "Seqd-Generation"
	// HeaderLocalOnly asks a server to answer ClusterStatus from its own
	// state, without asking its peers.
	HeaderLocalOnly = "Seqd-Local-Only"
	// HeaderReadIndex, on a local-only ClusterStatus request, asks the
	// server for its read index of a group (the group, decimal); the
	// answer carries the index under the same name. Only a leader that
	// committed a barrier of its term after the question answers.
	HeaderReadIndex = "Seqd-Read-Index"
)

// StreamUpgrade is the HTTP/1.1 Upgrade token of NextStream's framed
// transport: a request for the NextStream procedure's path with
// "Connection: Upgrade" and "Upgrade: StreamUpgrade" is answered 101, and the
// connection then carries NextStreamRequest messages one way and
// NextStreamResponse messages the other, each as its length (an unsigned
// varint) and its protobuf encoding (docs/streaming.md).
const StreamUpgrade = "seqd-next-frames/1"

// ExposedHeaders lists the response headers a browser client may read; a
// CORS configuration exposes all of them.
var ExposedHeaders = []string{HeaderLeader, HeaderLeaderID, HeaderRoutingVersion, HeaderServedBy, HeaderGroup, HeaderGeneration}
