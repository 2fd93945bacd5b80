package fsm

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/lease"
)

var errClosed = errors.New("fsm: closed")

// FSM is the seqd raft.FSM backed by a bbolt file. Apply, Snapshot and Restore
// must be called from a single goroutine (raft's FSM goroutine); the read
// methods may be called from any goroutine at any time.
type FSM struct {
	path   string
	logger *slog.Logger

	dbMu   sync.Mutex // guards db and broken
	db     *bolt.DB
	broken error // why db is nil

	applied atomic.Uint64
	// loaded is the applied index of the file when it was opened or
	// restored: it holds the effects of every entry up to it (see
	// applyFlake).
	loaded  atomic.Uint64
	skipped [256]bool // ignorable kinds Apply skipped and logged (Apply's goroutine only)
	// unstampedTerm is the term of the last unstamped raise on protocol 5
	// logged (budgetUnstamped; Apply's goroutine only).
	unstampedTerm uint64

	mu sync.RWMutex // guards the in-memory mirror below
	// spaces holds every space, deleted ones too: a deleted space keeps
	// its section size and marks, with Step 0 (see applyDeleteSpace).
	spaces map[string]seqd.Space
	// versions holds each record's version, none for version 0 (see
	// space_version.go).
	versions map[string]uint64
	marks    map[string]map[uint64]uint64
	bases    map[string]uint64
	seen     map[string]uint64
	ext      extState
	flake    flakeState
	// handoff follows the lease entries applied (see LeaseReleased;
	// memory only).
	handoff lease.Handoff

	// trustClock is SetUnsafeFlakeTrustClock's setting.
	trustClock atomic.Bool

	diskMu    sync.Mutex
	onDisk    func(full bool, err error)
	onRestore atomic.Pointer[func()]
	// promised is the protocol PromiseProtocol marked the file for, so
	// that it marks it once per process and protocol; the mark itself is
	// the file's format, which a snapshot installed later keeps (Restore).
	promised atomic.Uint64
	// counts is set by CountVersions (group 0).
	counts   atomic.Bool
	onSpace  atomic.Pointer[func(name string)]
	diskFull bool
	stopping chan struct{}
	stopOnce sync.Once
}

// extState is the format 2 part of the state.
type extState struct {
	clusterID string
	protocol  uint64
	floor     uint64
	lease     LeaseRecord
	groups    int // recorded raft group count (0: none recorded, one group)
	// lineage and generation: a restored cluster's (see Generation);
	// empty and 0 for a cluster that bootstrapped.
	lineage    string
	generation uint64
	// raiseClock is the newest raise stamp applied, µs (budget.go).
	raiseClock int64
}

// LeaseRecord is the lease length and margin carried by the last lease
// renewal applied (zero if none was).
type LeaseRecord = lease.Record

// Open opens the bbolt file at path, creating and initializing it if it does
// not exist or is empty, and loads its contents into memory. A file that is
// not a bbolt database, is corrupt, holds unexpected contents, or is locked by
// another process (for more than one second) yields an error; Open never
// panics. logger may be nil, in which case slog.Default() is used.
func Open(path string, logger *slog.Logger) (*FSM, error) {
	if logger == nil {
		logger = slog.Default()
	}
	// A leftover from a Restore interrupted by a crash is never needed.
	if err := os.Remove(restorePath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("fsm: remove stale restore file: %w", err)
	}
	db, st, err := openStore(path, true, false)
	if err != nil {
		return nil, err
	}
	f := &FSM{path: path, logger: logger, db: db, stopping: make(chan struct{})}
	f.install(st)
	return f, nil
}

// Close closes the database. Reads keep answering from the in-memory mirror;
// Apply after Close panics. Close waits for any snapshot returned by Snapshot
// to be released. Closing twice is a no-op.
func (f *FSM) Close() error {
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db, f.broken = nil, errClosed
	if err != nil {
		return fmt.Errorf("fsm: close %s: %w", f.path, err)
	}
	return nil
}

// install replaces the in-memory mirror with st.
func (f *FSM) install(st *state) {
	f.mu.Lock()
	f.spaces, f.marks, f.bases, f.seen, f.ext, f.flake = st.spaces, st.marks, st.bases, st.seen, st.ext, st.flake
	f.versions = st.versions
	f.handoff = lease.Handoff{}
	f.applied.Store(st.applied)
	f.loaded.Store(st.applied)
	f.mu.Unlock()
}

// Space returns the settings of the named space; a deleted space is not
// found (see Deleted).
func (f *FSM) Space(name string) (seqd.Space, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.spaces[name]
	if s.Step == 0 {
		return seqd.Space{}, false
	}
	return s, ok
}

// Deleted reports whether the named space was deleted (and not created
// again since), with the section size it keeps: its marks stay, so a space
// created again under its name continues above every value handed out.
func (f *FSM) Deleted(name string) (sectionSize uint64, deleted bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.spaces[name]
	return s.SectionSize, ok && s.Step == 0
}

// Spaces returns all spaces sorted by name, deleted ones left out.
func (f *FSM) Spaces() []seqd.Space {
	f.mu.RLock()
	out := make([]seqd.Space, 0, len(f.spaces))
	for _, s := range f.spaces {
		if s.Step != 0 {
			out = append(out, s)
		}
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b seqd.Space) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Max returns the high-water mark of the given section: the largest value
// raised for it, or its space's base or the cluster-wide floor if larger (a
// restored backup sets both), or 0 if none exists. The floor covers spaces
// created after a restore too. The value returned is always durable: the
// mirror is updated only after the bbolt transaction has committed.
func (f *FSM) Max(space string, section uint64) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return max(f.marks[space][section], f.bases[space], f.ext.floor)
}

// Generation returns the cluster's generation: its lineage and number as a
// restore recorded them (the lineage of a cluster that bootstrapped is its
// own cluster ID, its number 0), and its cluster ID. It is unknown (zero)
// until the cluster has an ID.
func (f *FSM) Generation() seqd.Generation {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ext.generationOf()
}

// generationOf derives the generation from the cluster ID and the restore's
// record (see Generation).
func (e extState) generationOf() seqd.Generation {
	if e.clusterID == "" {
		return seqd.Generation{}
	}
	if e.lineage == "" {
		return seqd.Generation{Lineage: e.clusterID, Cluster: e.clusterID}
	}
	return seqd.Generation{Lineage: e.lineage, Number: e.generation, Cluster: e.clusterID}
}

// ClusterID returns the cluster's ID, or "" while it has none (a cluster
// created by the first release, before its upgrade to protocol 2).
func (f *FSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ext.clusterID
}

// Protocol returns the cluster's replicated-command protocol: 1 until a
// KindCluster entry raised it.
func (f *FSM) Protocol() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return max(f.ext.protocol, 1)
}

// Floor returns the cluster-wide floor under every section's high-water
// mark (0 unless the cluster was restored from a backup).
func (f *FSM) Floor() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ext.floor
}

// Groups returns the cluster's raft group count as recorded (protocol 4),
// and false when none is recorded (a cluster of one group, or one not yet
// on protocol 4).
func (f *FSM) Groups() (int, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return max(f.ext.groups, 1), f.ext.groups != 0
}

// LeaseReleased reports whether the last lease entry applied (a renewal or
// a release) is a release that certifies that no lease is running: one
// written in a term that renewed before it (lease.Handoff says why that
// matters: a leader elected while an earlier one still holds its lease
// never renewed in its term, and its release certifies nothing). A new
// leader that finds one may serve without waiting a lease out. It is kept
// in memory only: after a restart or a snapshot install it reads false
// until a renewal and a release of one term are applied again, and a new
// leader then waits, as it always may.
func (f *FSM) LeaseReleased() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.handoff.Released()
}

// RenewedIn reports whether the last renewal applied is of raft term
// term: its leader waited out every earlier lease before writing it, so a
// release it writes in that term (after it stopped serving) certifies.
func (f *FSM) RenewedIn(term uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.handoff.RenewedIn(term)
}

// LeaseRecord returns the lease length and margin of the last lease
// renewal applied, and false if no renewal carried one.
func (f *FSM) LeaseRecord() (LeaseRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ext.lease, f.ext.lease.Lease > 0
}

// AppliedIndex returns the index of the last raft log entry applied, or 0 if
// none was. After Open or Restore it is the index of the last entry that
// changed state, since entries that change nothing (such as noops) are not
// written to disk.
func (f *FSM) AppliedIndex() uint64 {
	return f.applied.Load()
}

// ServerSeen reports whether server id was recorded holding raft state, and
// the highest raft index recorded for it.
func (f *FSM) ServerSeen(id string) (seen bool, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	index, seen = f.seen[id]
	return seen, index
}
