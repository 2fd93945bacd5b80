// Package seqd is the vocabulary every other package of seqd shares: a
// space and its settings, a high-water mark, the default space, the limits
// of one call, the header names of the wire protocol, and the sentinel
// errors that clients see (each mapped to one Connect code in api/).
//
// It imports only the standard library, so that the allocator (sections/),
// the state machine (fsm/), the server and the Go client can all use it
// without depending on each other. It defines words, never behaviour beyond
// validating them.
//
// # Layout of the module
//
// This is the one description of the code's layout (README.md and
// DESIGN.md point here; each package's own doc.go says more). In the order
// a Next call flows through them:
//
//   - client/ (and client/web/, the TypeScript client and the status page's
//     sources): the Go client. It keeps a routing table (the members,
//     refreshed when an answer's Seqd-Routing-Version grows, and per raft
//     group the leader), goes straight to the leader of each key's group,
//     coalesces concurrent calls into one, sends the coalesced Next requests
//     as messages of one NextStream per server (stream.go, frames.go; see
//     docs/streaming.md), and retries unavailable errors. Its embedded
//     flake Generator is a holder.Holder (flake/holder) over IdService; its
//     Segment hands out one key's values from reserved ranges (Leaf's
//     segment mode).
//   - api/: the Connect handlers (Connect, gRPC and gRPC-Web on one port):
//     sequence.go, stream.go (NextStream: each message served as a unary
//     Next) and frames.go (its framed transport on an upgraded HTTP/1.1
//     connection), keys.go (every per-key call: split by raft group, each
//     share served by its leader), forward.go (a server forwards a call to
//     a group's leader once), guard.go (what every call passes first),
//     admin.go, cluster_status.go, node_changes.go and backup.go
//     (AdminService, by concept), errors.go (the one map from errors to
//     Connect codes; internal text is logged, never sent), front.go and
//     codec.go (what a request meets before a handler: the body limit,
//     one-line 404 and 415 bodies, strict JSON), headers.go,
//     auth.go, cors.go, health.go, peers.go (the internal PeerService), and
//     id.go, id_admin.go (flake ids), space_changes.go (floors, changing
//     and deleting spaces and namespaces); frontends.go (Sequences: the
//     in-process Next, Current and Reserve of the other front ends) and
//     leaf.go (Leaf's HTTP API). api/proto/ holds the protos and
//     api/gen/ the generated code (scripts/gen.sh).
//   - api/idmsg/: the one conversion between the flake ids' messages
//     (layouts, namespaces, grants, runs of ids) and flake's types, and the
//     Connect codes a holder acts on, shared by api/ and client/.
//   - api/frame/: NextStream's framed transport on the wire (the upgrade,
//     length-prefixed messages), shared by api/ and client/.
//   - resp/: the Redis protocol front end (on redcon) over a Backend it is
//     given (api's Sequences); client/python/: the Python client.
//   - cluster/: the host, one per process: the raft listener behind the gate
//     that keeps a server out of raft until it is admitted, gossip
//     (memberlist) for discovery and bootstrap, membership, admission
//     (admission.go applies the verdicts of cluster/admit) and fencing by
//     generations (fence.go), the disk-full rule, the routing version,
//     offline restore, and its raft groups (groups.go, mux.go, placement.go);
//     group 0, the authority, is read through authority.go, the periodic
//     tasks run on the host loop (loop.go), and other servers are asked
//     through one Peers interface (peers.go).
//   - cluster/admit/: who may take part in a raft group, as pure decisions
//     with typed verdicts (Decide, Fence, Bootstrap, AdoptCount).
//   - cluster/traffic/: where a group's leader should be for the calls of
//     clients that do not route (a Meter of values by origin, Leader), pure.
//   - group/: one raft group: raft with its log and snapshot stores, the
//     state machine, the allocator, the lease loop, and the space resolver
//     (store.go: own record, this server's group 0, group 0's leader).
//   - lease/: the lease rules, pure: when a new leader may serve
//     (Deadline), what a release certifies (Handoff), the listen rule.
//   - sections/: the allocator, pure: per section max, floor and cur[key],
//     raises ahead of need, and the lease check under the same lock as the
//     increment.
//   - flake/: flake ids, pure, what a user of ids needs: layouts and their
//     presets, composing and decoding ids, a namespace's settings and their
//     validation, obfuscation, the Grant of a worker's time range and the
//     range-bounded Generator. flake/holder: the Holder that holds granted
//     workers and issues their ids (its Granter, its Reference clock);
//     flake/ff1: the FF1 cipher.
//   - bootclock/: the clock that counts suspension, timing both leases.
//   - fsm/: a group's replicated state in bbolt: the command registry and
//     codec, apply, snapshot, the file format, backup and the restore margin;
//     flake namespaces and workers.
//   - this package (the module root): the shared vocabulary, and slots.go,
//     which raft group owns a section.
//   - server/: the one assembly of a node (cluster + API + metrics + status
//     page, TLS, token, CORS): seqd serve and the test clusters both use it.
//   - metrics/, ui/: Prometheus metrics; the embedded status page.
//   - cmd/seqd/: the binary (serve, the client commands, backup, restore);
//     cmd/seqbench/ and internal/bench: the load tool and the baseline server.
//   - internal/: cli (a FlagSet per subcommand, SEQD_<NAME>, exit statuses),
//     floorfile (the floor file of seqd floor import),
//     logbridge (raft's and memberlist's logs into slog), testcluster and
//     proctest (in-process clusters; real seqd processes), history (records
//     calls and checks them), loadgen (the load generator), leasemodel (the
//     model checker of the lease protocol and admission: DESIGN.md §8).
//     cluster/groupstest/ holds the end-to-end tests of several groups.
//   - jepsen/: the chaos harness and its RESULTS.md; its own module, like
//     bench/ (its dependencies, porcupine among them, stay out of go.mod).
//   - deploy/: the container image's second build file (container/, kept
//     equal to the Dockerfile's runtime layout by layout_test.go) and the
//     Kubernetes manifests (kubernetes/, with a test module of its own).
//   - bench/, interop/: their own modules, for the comparison benchmarks
//     (scripts/compare.sh) and a stock grpc-go client (scripts/interop.sh).
//   - scripts/: cluster.sh (3 nodes locally), gen.sh, build.sh, interop.sh,
//     import-rules.sh, file-sizes.sh, compare.sh, compose.yml,
//     npm-pack-test.sh, container-test.sh.
//
// Rules, checked in CI by scripts/import-rules.sh: this package imports
// only the standard library; sections/ and fsm/ never import group/,
// cluster/, api/ or server/, and sections/ never imports raft; group/ never
// imports cluster/ (the host owns its groups, not the other way round);
// cluster/ never imports api/ or server/ (it asks peers through the Peers
// interface server/ hands it); api/ never imports fsm/ or sections/; flake/ and
// bootclock/ import only the standard library, this package and each
// other; client/ imports only this package, flake/, bootclock/, api/idmsg,
// api/frame and generated code, api/idmsg only this package, flake/ and
// generated code, and api/frame only this package and generated code; lease/ and cluster/traffic/ import only the standard library, cluster/admit/
// only this package, internal/leasemodel only this package, lease/ and
// cluster/admit/; resp/ imports only this package of seqd's own.
//
// Sizes, checked in CI by scripts/file-sizes.sh: no non-test Go file over
// 500 lines (generated code aside); a longer one is split by concept.
package seqd
