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
	// WaitVouched blocks until this server has been vouched for in the
	// group of index group (it may then write the group's raft entries) or
	// ctx ends; it reports whether it was. A new leader writes nothing, not
	// even a barrier, before it returns true.
	WaitVouched(ctx context.Context, group int) bool
	// ProtocolReady reports whether every server in conf runs a build that
	// speaks fsm.ProtocolVersion, so that the leader may move the group to
	// it (a server of an older build stops on a kind it does not know).
	ProtocolReady(conf raft.Configuration) bool
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
	// ClusterID returns group 0's cluster ID ("" until it has one).
	ClusterID() string
	// Groups returns the cluster's group count as group 0 records it, and
	// whether it is recorded (see fsm.FSM.Groups).
	Groups() (int, bool)
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

	stats stats

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

// TransferLeadership asks raft to hand leadership to server id (any voter
// when id is empty) and waits for the outcome. It must run on the leader.
// An id not in the configuration fails with an error wrapping unknown.
//
// Without LeaseHandoff the lease is not revoked first: a failed transfer
// leaves this server serving, and a successful one steps it down (revoking
// the lease) before the new leader can serve, which waits out this
// server's lease anyway. With LeaseHandoff, this server stops serving
// first (Withhold: nothing renews its lease again, not even a renewal
// committing meanwhile), commits a lease release, and then transfers, so
// that the new leader may serve at once; if the release or the transfer
// fails, it serves again through the whole lease procedure (ResumeLead),
// whose first renewal voids the release for any later leader.
func (g *Group) TransferLeadership(id string, unknown error) error {
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	var target *raft.Server
	if id != "" {
		cf := g.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			return err
		}
		for _, s := range cf.Configuration().Servers {
			if string(s.ID) == id {
				target = &s
			}
		}
		if target == nil {
			return fmt.Errorf("%w: %q", unknown, id)
		}
	}
	transfer := func() error {
		if target == nil {
			return g.raft.LeadershipTransfer().Error()
		}
		return g.raft.LeadershipTransferToServer(target.ID, target.Address).Error()
	}
	if !g.handoff() {
		return transfer()
	}
	// A move that withholds holds off every other such move (see moveMu).
	g.moveMu.Lock()
	defer g.moveMu.Unlock()
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	epoch := g.Withhold()
	err := g.release(context.Background())
	if err == nil {
		err = transfer()
	}
	if err != nil {
		g.ResumeLead(epoch)
	}
	return err
}

// LockMoves holds off every other planned move of the group until the
// returned function is called: a host that withholds, changes something
// and resumes (removing this server) holds it throughout.
func (g *Group) LockMoves() (unlock func()) {
	g.moveMu.Lock()
	return g.moveMu.Unlock
}

// handoff reports whether a planned move releases the lease: LeaseHandoff
// is set and the group is on a protocol every server of which knows
// KindRelease.
func (g *Group) handoff() bool {
	return g.cfg.LeaseHandoff && g.fsm.Protocol() >= fsm.KindProtocol(fsm.KindRelease)
}

// release commits a lease release; the caller has stopped serving. ctx
// bounds it (at most applyTimeout).
func (g *Group) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	if err := g.apply(ctx, fsm.EncodeRelease()); err != nil {
		g.log.Warn("releasing the lease before a leadership transfer failed", "err", err)
		return err
	}
	return nil
}

// Snapshot makes raft take a snapshot of the group's state now (and compact
// its log behind it, keeping the trailing entries).
func (g *Group) Snapshot() error { return g.raft.Snapshot().Error() }

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
		return false, seqd.ErrSpaceExists
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
// not an error.
func (g *Group) applyResponse(ctx context.Context, data []byte) (any, error) {
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

// store adapts the group to sections.Store.
type store struct{ g *Group }

// Space reads the group's own copy of a space, or group 0's committed
// settings until the copy is made (see copySpaces). A space the group's own
// record says is deleted is not found, whatever this server's copy of group
// 0 says (it may lag the deletion; a space created again reaches the group
// through FollowSpace).
func (s store) Space(name string) (seqd.Space, bool) {
	if sp, ok := s.g.fsm.Space(name); ok || s.g.cfg.Authority == nil {
		return sp, ok
	}
	if _, deleted := s.g.fsm.Deleted(name); deleted {
		return seqd.Space{}, false
	}
	return s.g.cfg.Authority.Space(name)
}

func (s store) Max(space string, section uint64) uint64 { return s.g.fsm.Max(space, section) }
func (s store) Raise(ctx context.Context, marks []seqd.Mark) error {
	if s.g.cfg.Authority != nil {
		// A space this group has not copied yet (created in group 0 since
		// the last copy pass): the group's state machine refuses marks of
		// a space it does not hold, so copy it first.
		for i, m := range marks {
			if i > 0 && m.Space == marks[i-1].Space {
				continue
			}
			if _, ok := s.g.fsm.Space(m.Space); ok {
				continue
			}
			if _, deleted := s.g.fsm.Deleted(m.Space); deleted {
				continue // a raise of a deleted space is applied as it is
			}
			sp, ok := s.g.cfg.Authority.Space(m.Space)
			if !ok {
				continue // the raise fails as the state machine says
			}
			if err := s.g.apply(ctx, fsm.EncodeCreateSpace(sp)); err != nil {
				return err
			}
		}
	}
	return s.g.apply(ctx, fsm.EncodeRaise(marks))
}

// Handover is the first step of a graceful stop: a leader drops its lease
// and in-memory state and hands leadership to another voter, if there is
// one. ctx bounds the handover.
func (g *Group) Handover(ctx context.Context) {
	g.moveMu.Lock()
	defer g.moveMu.Unlock()
	if !g.IsLeader() {
		return
	}
	g.alloc.Revoke()
	g.stepDownLead()
	if !g.hasOtherVoters() {
		return
	}
	if g.handoff() {
		_ = g.release(ctx) // on failure the next leader waits the lease out
	}
	f := g.raft.LeadershipTransfer()
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		if err != nil {
			g.log.Warn("leadership transfer failed", "err", err)
		} else {
			g.log.Info("leadership handed over")
		}
	case <-ctx.Done():
		g.log.Warn("leadership transfer timed out")
	}
}

func (g *Group) hasOtherVoters() bool {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != g.cfg.ID {
			return true
		}
	}
	return false
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
