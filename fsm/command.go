package fsm

import (
	"time"

	"github.com/hashicorp/raft"

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
	// KindFlake is protocol 3: the flake id family's operations (see
	// EncodeFlake). It carries KindIgnorable, as every kind added after
	// protocol 2 does, although a leader writes it only on protocol 3
	// (every server knows it): skipping flake state is never safe once a
	// server might serve flake ids from it.
	KindFlake Kind = KindIgnorable | 1
	// KindRelease is a leader's release of its lease before it hands its
	// leadership over (see FSM.LeaseReleased). It carries KindIgnorable
	// and needs no new protocol: a build that skips it never learns of the
	// release, and as a new leader waits out the lease in full, as before.
	KindRelease Kind = KindIgnorable | 2
	// KindRaiseAt is protocol 5: a raise stamped with its leader's wall
	// time, held to the raise budget (see budget.go). From protocol 5 it is
	// the only raise a replica applies.
	KindRaiseAt Kind = 7
	// KindUpdateSpace, KindDeleteSpace and KindDeleteNamespace change a
	// space's step, delete a space, and delete a flake namespace (see
	// space_change.go and namespace_delete.go). They carry KindIgnorable:
	// a build that skips them keeps every mark and worker as it was, so
	// values and ids stay unique whichever build leads, and a leader
	// writes them only once every server of the configuration applies
	// them (see KindsApplied), so that no replica keeps what the others
	// changed. KindIgnorable|3 stays unused: a floor (SetFloor) is a
	// raise (KindRaise, KindRaiseAt), which every build applies. Kinds
	// KindIgnorable|8 and up belong to other work.
	KindUpdateSpace     Kind = KindIgnorable | 4
	KindDeleteSpace     Kind = KindIgnorable | 5
	KindDeleteNamespace Kind = KindIgnorable | 6
	// KindFollowSpace is protocol 6: a group other than group 0 sets its
	// record of a space to group 0's, with the version it copies, applied
	// only if that version supersedes the record's (see space_version.go).
	// It carries no KindIgnorable: a replica that skipped it would keep
	// another record than the others, and versions must be the same on
	// every replica.
	KindFollowSpace Kind = 8
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
// KindLease; protocol 3 adds KindFlake; protocol 4 records the cluster's
// raft group count in KindCluster (see EncodeClusterGroups), so that a
// server running another count, or a build without groups, never serves
// from the cluster's state (a build of protocol 3 refuses a state machine
// of protocol 4, and stops on the entry). A cluster moves to a newer protocol
// through a KindCluster entry, which its leader writes only once every
// server in the raft configuration advertises that protocol (through
// gossip). Protocol 5 stamps every raise with its leader's time and holds
// it to the raise budget (KindRaiseAt, budget.go). Protocol 6 brings space
// record versions: group 0 counts a version in every space record, and
// the other groups follow it with KindFollowSpace (space_version.go).
const ProtocolVersion = 6

// ClusterProtocol is the first protocol with KindCluster: the lowest a
// cluster moves to (every cluster starts on 1).
const ClusterProtocol = 2

// budgetProtocol is the protocol from which every raise is stamped
// (KindRaiseAt) and held to the raise budget.
const budgetProtocol = 5

// groupsProtocol is the protocol whose KindCluster entries carry the group
// count.
const groupsProtocol = 4

// Command is the decoded form of a raft log entry. Space is set for
// KindCreateSpace and KindUpdateSpace (name and step), and KindFollowSpace
// (the record, with Version), Space.Name for
// KindDeleteSpace, Marks for KindRaise and Server for KindServerSeen; the
// other fields are zero.
type Command struct {
	Kind   Kind
	Space  seqd.Space
	Marks  []seqd.Mark
	Server string
	Index  uint64 // KindServerSeen: the server's raft index

	// KindCluster: the cluster's identity and the protocol it moves to,
	// and from protocol 4 its raft group count.
	ClusterID string
	Protocol  uint64
	Groups    int
	// KindLease: the granting leader's lease and lease margin.
	Lease, LeaseMargin time.Duration
	// KindFlake and KindRaiseAt: the leader's time (Unix ms); KindFlake's
	// operations.
	NowMs int64
	Flake []FlakeOp
	// KindFollowSpace: the version of group 0's record it copies (Space
	// is the record: Step 0 for a deletion).
	Version uint64
	// KindDeleteNamespace: the namespace.
	Namespace string
}

// command is the registry entry of one command kind.
type command struct {
	// name names the kind for people: in logs and in tests.
	name string
	// protocol is the replicated-command protocol that introduced the kind.
	// A leader writes a kind of protocol p only once the cluster runs
	// protocol p (every server in the configuration advertises it), since a
	// build that meets an unknown kind without KindIgnorable stops.
	protocol uint64
	// apply applies a decoded command of the kind to f at entry l, and
	// answers as FSM.Apply documents.
	apply func(f *FSM, l *raft.Log, c Command) any
}

// commands registers every command kind this build knows, one entry per
// Kind (as Consul's FSM registers its message types): Apply dispatches
// through it. To add a kind: a Kind constant (with KindIgnorable if a build
// that does not know it may skip it), its Encode function and its case in
// Decode, and its entry here; a kind without KindIgnorable needs a new
// ProtocolVersion as well. A kind is never removed or renumbered: entries
// written by an earlier build are replayed from the log and from snapshots
// for as long as they exist.
var commands = map[Kind]command{
	KindCreateSpace: {"create space", 1, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyCreate(l, c.Space)
	}},
	KindRaise: {"raise", 1, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyRaise(l, c.Marks, -1)
	}},
	KindRaiseAt: {"raise at", budgetProtocol, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyRaise(l, c.Marks, c.NowMs)
	}},
	KindNoop: {"noop", 1, func(f *FSM, l *raft.Log, _ Command) any {
		// A no-op is a renewal (protocol 1's, and the first release's).
		f.mu.Lock()
		f.handoff.Renewal(l.Term)
		f.mu.Unlock()
		return nil
	}},
	KindServerSeen: {"server seen", 1, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyServerSeen(l, c.Server, c.Index)
	}},
	KindCluster: {"cluster", 2, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyCluster(l, c.ClusterID, c.Protocol, c.Groups)
	}},
	KindLease: {"lease", 2, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyLease(l, LeaseRecord{Lease: c.Lease, Margin: c.LeaseMargin})
	}},
	KindFlake: {"flake", 3, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyFlake(l, c.NowMs, c.Flake)
	}},
	KindRelease: {"release", 3, func(f *FSM, l *raft.Log, c Command) any {
		f.mu.Lock()
		f.handoff.Release(l.Term)
		f.mu.Unlock()
		return nil
	}},
	// The space changes and the namespace deletion are written on any
	// protocol: what guards them is that every server applies them (see
	// KindsApplied).
	KindUpdateSpace: {"update space", 1, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyUpdateSpace(l, c.Space.Name, c.Space.Step)
	}},
	KindDeleteSpace: {"delete space", 1, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyDeleteSpace(l, c.Space.Name)
	}},
	KindDeleteNamespace: {"delete namespace", 1, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyDeleteNamespace(l, c.Namespace)
	}},
	KindFollowSpace: {"follow space", versionProtocol, func(f *FSM, l *raft.Log, c Command) any {
		return f.applyFollowSpace(l, SpaceRecord{Space: c.Space, Version: c.Version})
	}},
}

// KindsApplied returns the ignorable kinds this build applies, as a bit
// set: bit i for the kind KindIgnorable|i. Servers publish it (through
// gossip), and a leader writes a kind that changes state only some
// replicas would keep (KindUpdateSpace, KindDeleteSpace,
// KindDeleteNamespace) only once every server of the configuration
// publishes its bit. Builds before it publish nothing: they apply
// KindFlake and KindRelease (KindsAppliedBefore).
func KindsApplied() uint64 {
	var bits uint64
	for k := range commands {
		if k&KindIgnorable != 0 && k&^KindIgnorable < 64 {
			bits |= 1 << (k &^ KindIgnorable)
		}
	}
	return bits
}

// KindsAppliedBefore is what a server that publishes no KindsApplied
// applies.
const KindsAppliedBefore = 1<<(KindFlake&^KindIgnorable) | 1<<(KindRelease&^KindIgnorable)

// KindBit is kind k's bit in KindsApplied (0 for a kind without
// KindIgnorable).
func KindBit(k Kind) uint64 {
	if k&KindIgnorable == 0 {
		return 0
	}
	return 1 << (k &^ KindIgnorable)
}

// KindProtocol is the replicated-command protocol that introduced kind k (0
// for a kind this build does not know). A leader writes a command of kind
// k only once the group's protocol (FSM.Protocol) is at least this.
func KindProtocol(k Kind) uint64 { return commands[k].protocol }
