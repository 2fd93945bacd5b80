// Package api serves seqd's Connect API (package seq.v1): the Connect, gRPC
// and gRPC-Web protocols on one port, over HTTP/1.1 and h2c.
//
// Any node answers any call: a node that is not the leader forwards the call
// to the leader it knows (once: a forwarded call that reaches a non-leader
// fails with unavailable). Unavailable errors carry the leader's ID and API
// address in the Seqd-Leader-Id and Seqd-Leader metadata when known.
//
// What api owns, one concept a file:
//
//   - server.go: the Server, its options, and the registration of every
//     service (sequence, admin, health, reflection, peer) on one handler.
//   - sequence.go, health.go: the Connect handlers of SequenceService and
//     grpc.health.v1.Health.
//   - AdminService's handlers, by concept: admin.go (create, list spaces,
//     locate keys), space_changes.go (update, delete, floors, namespaces),
//     cluster_status.go (ClusterStatus and the routing table),
//     node_changes.go (RemoveNode, DrainNode), backup.go (Backup).
//   - keys.go: the one path of every per-key call (Next, Current, Reserve,
//     from any front end): split by raft group, each group's share served
//     here by its leader or forwarded once (forwardOnce).
//   - stream.go: SequenceService.NextStream, each message served as a
//     unary Next would be (keys.go) and answered in order
//     (docs/streaming.md); frames.go: its framed transport (an upgraded
//     HTTP/1.1 connection).
//   - forward.go: forwardOnce, the one way a call reaches a group's leader
//     from another server, and route, the calls of group 0's leader;
//     fwdstream.go: the forward stream that carries the front ends' Next
//     shares to a leader as messages of one framed NextStream connection
//     (api/frame) instead of unary calls.
//   - guard.go, generation.go: admit, what every call passes first (the
//     token, the generation); the generation on answers.
//   - peers.go: the internal peer client (forwarding, ClusterStatus fan-out,
//     the vouching and progress callbacks cluster/ is given) and the
//     internal PeerService.
//   - errors.go: the one map from the errors of the layers below to Connect
//     codes; it hides internal text and adds the leader hint.
//   - headers.go: the headers a leader puts on its answers (Seqd-Served-By, and
//     Seqd-Routing-Version, the node's one routing version, as ClusterStatus
//     reports it).
//   - cors.go: the CORS layer for browsers on other origins (Connect and
//     gRPC-Web), exposing every seqd.ExposedHeaders entry.
//   - auth.go: the bearer-token check on guarded services.
//   - frontends.go: Sequences, the in-process Next, Current and Reserve of
//     the front ends that speak other protocols (resp/, leaf.go), coalesced
//     per space and group on the serving path of a Connect call.
//   - leaf.go: Leaf's HTTP API (GET /api/segment/get/{tag},
//     /api/snowflake/get/{key}), plain text.
//   - id.go, id_admin.go, id_granter.go: IdService and the flake part of
//     AdminService: service mode (one flake/holder Holder per namespace),
//     decode, namespaces and workers; applyGrant, the one place group 0's
//     leader decides a grant, and the granter of this server's own holders,
//     which applies through group 0 on its leader (never through a handler
//     of its own) and asks the leader over IdService elsewhere. The
//     conversions to and from the messages are idmsg/'s, shared with
//     client/.
//
// What api never does: touch raft, the state machine (fsm/) or the
// allocator (sections/) directly. It reaches replicated state only through
// cluster.Node's methods and the root package's types and errors.
package api
