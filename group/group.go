package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/logbridge"
	"github.com/seqd/seqd/sections"
)

// Host is what a group needs from the server that runs it (cluster.Node).
// Its methods are called from the group's goroutines and must not block
// beyond what each says.
type Host interface {
	// WaitAdmitted blocks until this server has been admitted in the
	// group of index group (it may then write the group's raft entries) or
	// ctx ends; it reports whether it was. A new leader writes nothing, not
	// even a barrier, before it returns true.
	WaitAdmitted(ctx context.Context, group int) bool
	// WaitListening blocks until this server has listened to the cluster
	// (gossip) long enough to have heard of a restore that replaced its
	// cluster: since it started, and since since when that is later; or
	// until ctx ends. It reports whether it has.
	WaitListening(ctx context.Context, since time.Time) bool
	// StalledSince reports whether this server's process stalled (was
	// paused, or not scheduled, long enough to miss news of the cluster)
	// after t, or is stalled now: a lease renewal whose listening such a
	// stall interrupted grants nothing, and the leader listens again.
	StalledSince(t time.Time) bool
	// ProtocolTarget is the highest protocol every server in conf speaks
	// (at most fsm.ProtocolVersion; 0 while that is not known), the one the
	// leader may move the group to: a server of an older build stops on a
	// kind it does not know.
	ProtocolTarget(conf raft.Configuration) uint64
	// ProtocolConfirmed reports whether every other server in conf
	// answers, now, that its running build speaks protocol p. The leader
	// moves the group to p only then (EnsureProtocol): gossip, which
	// ProtocolTarget reads, still shows a server killed a moment ago alive,
	// speaking what its last process spoke, and it may come back on an
	// older build.
	ProtocolConfirmed(ctx context.Context, conf raft.Configuration, p uint64) bool
	// ProtocolMoved is called after the group moved to a new protocol or
	// took a cluster ID.
	ProtocolMoved()
	// KindsApplied reports whether every server in conf applies the
	// ignorable kinds of the bit set kinds (see fsm.KindsApplied): a
	// leader writes a space change only then, since a server that skips
	// it would keep what the others changed. It returns an error saying
	// which server does not.
	KindsApplied(conf raft.Configuration, kinds uint64) error
	// LeadershipChanged is called on every leadership gain or loss.
	LeadershipChanged(isLeader bool)
	// WallClockOK reports whether this server's wall clock agrees with
	// its peers' closely enough to stamp flake grants with it (an error
	// wrapping seqd.ErrNotServing if not).
	WallClockOK() error
	// LogWrite is called after every raft log or stable-store write with its
	// error (nil on success), so the host can notice a full disk.
	LogWrite(err error)
	// FSMDisk reports that a state machine write found the disk full
	// (full) or succeeded again.
	FSMDisk(full bool, err error)
}

// Authority is what a group other than group 0 reads of group 0's
// committed state on the same server. A server's copy of group 0 may lag:
// a space created a heartbeat ago may be missing, and a step changed or a
// space deleted may not show yet (see spaces.go).
type Authority interface {
	// Space returns a space committed in group 0 (not a deleted one).
	Space(name string) (seqd.Space, bool)
	// Spaces returns every space committed in group 0, deleted ones left
	// out.
	Spaces() []seqd.Space
	// Deleted reports whether group 0 deleted the space.
	Deleted(name string) (sectionSize uint64, deleted bool)
	// Record returns group 0's record of a space, a deleted one too, with
	// its version (fsm's space_version.go); ok is false for none.
	Record(name string) (rec fsm.SpaceRecord, ok bool)
	// ClusterID returns group 0's cluster ID ("" until it has one).
	ClusterID() string
	// Groups returns the cluster's group count as group 0 records it, and
	// whether it is recorded (see fsm.FSM.Groups).
	Groups() (int, bool)
	// Protocol returns group 0's replicated-command protocol.
	Protocol() uint64
}

// Group is one running Raft group.
type Group struct {
	cfg  Config
	log  *slog.Logger
	host Host

	raft     *raft.Raft
	fsm      *fsm.FSM
	logStore *raftboltdb.BoltStore
	snaps    *raft.FileSnapshotStore
	alloc    *sections.Allocator
	hadState bool

	notify chan bool
	stop   chan struct{}
	wg     sync.WaitGroup

	leadMu     sync.Mutex
	leadCancel context.CancelFunc

	// moveMu serializes the planned moves that withhold or revoke
	// (TransferLeadership with the handoff, Handover, and a host's
	// withhold-change-resume, see LockMoves): one move's ResumeLead must
	// never lift another's Withhold.
	moveMu sync.Mutex

	// confMu and readyTerm order protocol moves and added servers (see
	// members.go): readyTerm is the term whose barrier this server applied
	// as leader.
	confMu    sync.Mutex
	readyTerm atomic.Uint64

	stats stats

	// fenced is set by Fence: the group never serves again.
	fenced atomic.Bool
	// upkeep is set while a serving leader's upkeep runs beside the lease
	// loop (upkeepBeside).
	upkeep atomic.Bool

	// origin and leaseSeen: when this server last stored a lease renewal in
	// its log or installed a snapshot, in ns since origin plus one (0: never
	// since it started), on Go's monotonic clock (see lead).
	origin    time.Time
	leaseSeen atomic.Int64

	stopOnce   sync.Once
	flakeWatch flakeWatch // flake.go

	raftOnce  sync.Once
	raftErr   error // raft's shutdown error or ErrShutdownStuck
	closeOnce sync.Once
}

// stats are counters reported by Status.
type stats struct {
	leaderChanges  atomic.Int64
	renewals       atomic.Int64
	renewalErrors  atomic.Int64
	servingSince   atomic.Int64 // unix nanos when this group last started serving as leader
	lastFailoverNs atomic.Int64 // became leader → serving, last time
	lastLeaseWait  atomic.Int64 // the lease wait of the last leadership (see leaseWait)
	flakeEntries   atomic.Int64 // KindFlake entries this server committed as leader
	handoffs       atomic.Int64 // leaderships that served without a lease wait
}

// Open opens the group's stores in cfg.Dir, starts raft on cfg.Transport and
// the leadership loop, and returns the running group. It serves sequence
// calls only once it is the leader, vouched for, and holds the lease.
func Open(cfg Config) (*Group, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, log: cfg.Logger, host: cfg.Host, notify: make(chan bool, 16), stop: make(chan struct{}), origin: time.Now()}
	if err := g.open(); err != nil {
		if g.alloc != nil {
			g.alloc.Close()
		}
		g.closeStores()
		return nil, err
	}
	g.wg.Add(1)
	go g.leadership()
	return g, nil
}

func (g *Group) open() error {
	cfg := g.cfg
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	raftOut := logbridge.NewWriter(g.log, "raft", cfg.RaftLogLevel)

	f, err := fsm.Open(filepath.Join(cfg.Dir, "fsm.db"), g.log)
	if err != nil {
		return err
	}
	g.fsm = f
	if cfg.Index == 0 {
		f.CountVersions() // group 0 decides spaces (fsm's space_version.go)
	}
	f.SetDiskHook(g.host.FSMDisk)
	f.SetRestoreHook(g.noteLease)
	f.SetUnsafeFlakeTrustClock(cfg.UnsafeFlakeTrustClock)
	ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")})
	if err != nil {
		return fmt.Errorf("raft log store %s: %w", filepath.Join(cfg.Dir, "raft.db"), err)
	}
	g.logStore = ls
	snaps, err := raft.NewFileSnapshotStore(cfg.Dir, 2, raftOut)
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	g.snaps = snaps

	has, err := raft.HasExistingState(ls, ls, snaps)
	if err != nil {
		return fmt.Errorf("reading raft state: %w", err)
	}
	g.hadState = has

	// The allocator exists before raft applies anything: a space change
	// tells it (see sections.Allocator.SpaceChanged).
	g.alloc = sections.New(store{g}, sections.Options{
		Clock:             cfg.LeaseClock,
		MaxKeysPerSection: cfg.MaxKeysPerSection,
		Logger:            g.log,
		OnRaise:           cfg.OnRaise,
		Owns:              cfg.Owns,
	})
	f.SetSpaceHook(g.alloc.SpaceChanged)

	rc, err := cfg.raftConfig(g.notify, raftOut)
	if err != nil {
		return err
	}
	rc.Logger = logbridge.NewHCLogger(raftOut, "raft")
	ds := diskStore{BoltStore: ls, host: g.host, leaseStored: g.noteLease}
	cache, err := raft.NewLogCache(512, ds)
	if err != nil {
		return err
	}
	r, err := raft.NewRaft(rc, f, cache, ds, snaps, cfg.Transport)
	if err != nil {
		return fmt.Errorf("starting raft: %w", err)
	}
	g.raft = r
	return nil
}

// Raft returns the group's raft instance, for the host's membership and
// vouching. Writes that change the group's state go through Group's methods.
func (g *Group) Raft() *raft.Raft { return g.raft }

// FSM returns the group's state machine (read-only use by the host).
func (g *Group) FSM() *fsm.FSM { return g.fsm }

// LogStore returns the group's raft log, for the host's vouching, which
// reads entries not yet applied.
func (g *Group) LogStore() raft.LogStore { return g.logStore }

// HadState reports whether the group's data directory held raft state when
// it was opened.
func (g *Group) HadState() bool { return g.hadState }

// Allocator returns the group's allocator (it serves only on the leader).
func (g *Group) Allocator() *sections.Allocator { return g.alloc }

// IsLeader reports whether raft considers this server the group's leader.
// Serving also needs the lease: see Allocator().Serving().
func (g *Group) IsLeader() bool { return g.raft.State() == raft.Leader }

// Fence stops the group from serving for good (its host was fenced: a
// restore replaced its cluster). The lease is revoked at once, the lease
// loop stops, and a later leadership gain starts none.
func (g *Group) Fence() {
	g.fenced.Store(true)
	g.alloc.Revoke()
	g.stepDownLead()
}

// Snapshot makes raft take a snapshot of the group's state now (and compact
// its log behind it, keeping the trailing entries).
func (g *Group) Snapshot() error { return g.await(g.raft.Snapshot()) }

// await waits for a raft future, or until the group stops (ErrStopped).
func (g *Group) await(f raft.Future) error { return Await(f, g.stop, ErrStopped) }

// Await waits for a raft future, or until stop is closed, and then returns
// stopped. A future raft accepted just before it shut down may never be
// answered (a leadership transfer waits in a buffered channel that no loop
// reads once raft has stopped), and a goroutine waiting on it must not hold
// up its owner's close. The helper goroutine then stays blocked on the
// future.
func Await(f raft.Future, stop <-chan struct{}, stopped error) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		return err
	case <-stop:
		return stopped
	}
}

// CreateSpace creates a space through raft. It must run on the leader, and
// only once it serves (holds the lease): then no earlier leader of the
// group serves any more, so no server answers from an older state, after
// CreateSpace returned, that the space does not exist (a leader that
// answers not_found for a space, or a space lookup, only while it serves).
// It reports created = false when the space already exists with the same
// settings, and fails with seqd.ErrSpaceExists when the settings differ.
func (g *Group) CreateSpace(ctx context.Context, s seqd.Space) (created bool, err error) {
	if err := seqd.ValidateSpace(s); err != nil {
		return false, err
	}
	if !g.IsLeader() {
		return false, seqd.ErrNotLeader
	}
	if !g.alloc.Serving() {
		return false, seqd.ErrLeaseNotHeld
	}
	if old, ok := g.fsm.Space(s.Name); ok {
		if old == s {
			return false, nil
		}
		return false, seqd.SpaceConflict(old, s)
	}
	if err := g.apply(ctx, fsm.EncodeCreateSpace(s)); err != nil {
		return false, err
	}
	return true, nil
}

// Apply submits one encoded command and waits until it is committed and
// applied here. A non-nil FSM response is returned as the error; losing
// leadership meanwhile is seqd.ErrNotLeader.
func (g *Group) Apply(ctx context.Context, cmd []byte) error { return g.apply(ctx, cmd) }

func (g *Group) apply(ctx context.Context, data []byte) error {
	_, err := g.applyResponse(ctx, data)
	return err
}

// applyResponse is apply that also answers the FSM's response when it is
// not an error. An entry is proposed only while its caller still waits:
// a decision made in a term that has ended (the lease loop's and the
// upkeep's contexts end with the term) is never put in the log, where the
// same server, elected again, would commit it after newer ones.
func (g *Group) applyResponse(ctx context.Context, data []byte) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := g.raft.Apply(data, applyTimeout)
	done := make(chan struct{})
	var err error
	var resp any
	go func() {
		defer close(done)
		if err = f.Error(); err != nil {
			return
		}
		resp = f.Response()
		if rerr, ok := resp.(error); ok {
			err = rerr
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return nil, fmt.Errorf("%w: %v", seqd.ErrNotLeader, err)
	}
	return resp, err
}

// Stop makes the group stop serving at once: the lease is revoked, the lease
// loop ends, and a state machine apply waiting for disk space gives up (so
// that raft can stop). Close follows.
func (g *Group) Stop() {
	g.stopOnce.Do(func() {
		close(g.stop)
		if g.alloc != nil {
			g.alloc.Revoke()
		}
		if g.fsm != nil {
			g.fsm.Stop()
		}
		g.stepDownLead()
	})
}

// ShutdownRaft stops the group (Stop) and then raft, and waits at most
// raftShutdownWait for raft to stop; it leaves the stores open. If raft does
// not stop in time it returns ErrShutdownStuck, and the stores must stay open
// under raft's goroutines. A host calls it before it waits for its own
// goroutines that may still read the group, and Close after that.
func (g *Group) ShutdownRaft() error {
	g.Stop()
	g.raftOnce.Do(func() {
		if g.raft == nil {
			return
		}
		errc := make(chan error, 1)
		go func() { errc <- g.raft.Shutdown().Error() }()
		select {
		case g.raftErr = <-errc:
		case <-time.After(raftShutdownWait):
			g.raftErr = ErrShutdownStuck
			g.log.Error("raft did not shut down in time; leaving its stores open", "waited", raftShutdownWait)
		}
	})
	return g.raftErr
}

// Close stops the group (ShutdownRaft), waits for its goroutines and closes
// its stores. If raft does not stop within raftShutdownWait, Close returns
// ErrShutdownStuck and leaves the stores open under raft's goroutines.
func (g *Group) Close() error {
	if err := g.ShutdownRaft(); errors.Is(err, ErrShutdownStuck) {
		return err
	}
	g.closeOnce.Do(func() {
		g.wg.Wait()
		if g.alloc != nil {
			g.alloc.Close()
		}
		g.closeStores()
	})
	return g.raftErr
}

func (g *Group) closeStores() {
	if g.logStore != nil {
		_ = g.logStore.Close()
	}
	if g.fsm != nil {
		_ = g.fsm.Close()
	}
}
