// Package fsm is the replicated state machine of one seqd raft group: the
// state every replica of the group reaches by applying the same log.
//
// For every space (a named family of sequences) it persists, per section
// (section = key / SectionSize), a high-water mark max: no value above max has
// ever been handed out for a key of that section. The leader hands values out
// of memory and raises max through raft entries before crossing it.
//
// All state lives in a bbolt file and is mirrored in memory, so that reads
// (Space, Spaces, Max, AppliedIndex) never touch disk. Applying a sequence
// entry is idempotent: a create of an existing identical space is a no-op, and
// raises carry absolute values applied as max = maximum(old, new), so
// replaying any entries, in any order and any number of times, yields the same
// state. Flake entries are not (an acquire takes the next free worker): one
// at or below the applied index the file was opened or restored at, which
// raft applies again when a server restarts, is not applied twice.
//
// # What it owns
//
//   - The state of the group (fsm.go): spaces and their marks, the
//     cluster-wide floor and per-space bases a restore sets, the servers seen
//     holding raft state, the cluster's ID and protocol, the last lease
//     record, and the applied index. A space's step may change and a space
//     may be deleted, keeping its marks (space_change.go); from protocol 6
//     group 0 counts a version in every space record, and a group other
//     than group 0 sets its record from group 0's only with a higher
//     version, so that it never goes back (space_version.go); a flake
//     namespace may be deleted, keeping its floor and workers
//     (namespace_delete.go).
//     A floor is a raise: a mark, never state of its own.
//   - The replicated commands: a Kind byte and then strictly encoded fields
//     (codec.go: a decoded command of a known kind re-encodes to exactly its
//     bytes), and the registry of kinds (command.go) that gives each kind's
//     name, the protocol that introduced it, and how Apply applies it
//     (apply.go).
//   - The upgrade rule. A kind is never renumbered, reused or removed. A
//     kind of a new protocol is written only once the cluster runs that
//     protocol (see ProtocolVersion), since a build that meets an unknown
//     kind stops rather than let its replica diverge. A kind with the
//     KindIgnorable bit is the exception: a build that does not know it logs
//     it and skips it, so a later build may add such kinds, for state only it
//     reads, at any time.
//   - The data format (bolt.go): the buckets and keys of the bbolt file and
//     its version. A file stays format 1 (readable by the first release) until
//     it holds format 2 state; a file of a newer format, or one whose contents
//     do not validate, is refused, never misread. A flake layout with fields
//     that earlier builds cannot express, and a deleted namespace, ride in
//     the key check of an ff1 namespace of the same widths, which earlier
//     builds apply alike and refuse to serve (flake_wire.go).
//   - The flake id family's replicated state: namespaces (a
//     flake.Namespace each; their settings and validation are the package
//     flake's) and workers, and their reads (flake.go); applying a
//     KindFlake command, whose acquire and renewal answer the very
//     flake.Grant a holder uses (flake_apply.go); its codec
//     (flake_codec.go), its bbolt records (flake_bolt.go) and the key
//     check that carries what older builds cannot express (flake_wire.go).
//   - Snapshots, restore (snapshot.go) and backups (backup.go): each is the
//     bbolt file itself, validated in full before it replaces any state. A
//     backup of several raft groups is merged from each group's into one
//     file, and a restore splits it again by group (backup_groups.go).
//
// # What it never does
//
//   - It never reads a clock: state changes only through entries, so that
//     replicas that apply the same entries hold the same state (a lease
//     record or a backup's time comes in the entry or from the caller). It
//     only waits on a timer while the file system is full.
//   - It never imports the packages that run raft groups, the cluster or the
//     API (group/, cluster/, api/). It knows raft only as the raft.FSM
//     interface and its log entries, and never calls into raft.
//   - It never skips an entry it cannot apply, except an ignorable kind it
//     does not know: Apply stops the node instead (see FSM.Apply).
package fsm
