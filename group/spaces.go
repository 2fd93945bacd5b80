package group

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

// Space changes in a group.
//
// Group 0 decides spaces: created, a step changed, deleted. Every other
// group keeps its own record of each space (so that its state, snapshots
// and backups stand on their own), which its leader makes follow group 0's:
// the call that changes a space in group 0 asks every other group's leader
// to follow at once (FollowSpace), and each leader checks, every few lease
// renewals, that its records agree with this server's copy of group 0
// (copySpaces). That copy may lag group 0 (a follower a heartbeat behind),
// so where a record differs from it, the leader asks group 0's serving
// leader (Config.AskSpace) and follows its answer, never the copy.
//
// Nothing orders one path's question against another path's entry, so on
// protocol 6 every entry that copies group 0's record carries the version
// group 0 gave it, and the state machine applies it only when that
// version supersedes the group's record's (fsm's space_version.go): a
// group never goes back to a step or a space that group 0 has since
// changed, whichever entry commits last. Before the move to protocol 6
// the entries carry no version, as the builds before wrote them.
//
// A group serves a space only from its own record (store.Space), which
// its store makes before the allocator first loads the space
// (store.FindSpace, through ResolveSpace). A deleted space keeps its marks everywhere: however a
// record lags, no value is handed out twice.

// ErrNotUpgraded means a server of the group's configuration runs a build
// that would skip the change (see Host.KindsApplied): finish the rolling
// upgrade first.
var ErrNotUpgraded = errors.New("a server runs a build that does not apply space and namespace changes; upgrade every server first")

// spaceKinds are the kinds of the space changes.
var spaceKinds = fsm.KindBit(fsm.KindUpdateSpace) | fsm.KindBit(fsm.KindDeleteSpace)

// kindsReady checks that every server of the configuration applies kinds.
func (g *Group) kindsReady(kinds uint64) error {
	cf := g.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return fmt.Errorf("%w: %v", seqd.ErrNotLeader, err)
	}
	if err := g.host.KindsApplied(cf.Configuration(), kinds); err != nil {
		return fmt.Errorf("%w: %v", ErrNotUpgraded, err)
	}
	return nil
}

// serving checks that this server leads the group and holds its lease: a
// change decided here is then made on the newest state.
func (g *Group) serving() error {
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	if !g.alloc.Serving() {
		return seqd.ErrLeaseNotHeld
	}
	return nil
}

// UpdateSpace changes a space's step through raft, on the serving leader
// (of group 0: see above). An unknown space is seqd.ErrUnknownSpace, a
// step out of range seqd.ErrInvalidSpace.
func (g *Group) UpdateSpace(ctx context.Context, name string, step uint64) error {
	if err := g.serving(); err != nil {
		return err
	}
	sp, ok := g.fsm.Space(name)
	if !ok {
		return fmt.Errorf("%w %q", seqd.ErrUnknownSpace, name)
	}
	sp.Step = step
	if err := seqd.ValidateSpace(sp); err != nil {
		return err
	}
	if err := g.kindsReady(spaceKinds); err != nil {
		return err
	}
	return g.apply(ctx, fsm.EncodeUpdateSpace(name, step))
}

// DeleteSpace deletes a space through raft, on the serving leader (of
// group 0): it keeps its marks (see fsm's space changes). Deleting a
// deleted space succeeds; an unknown one is seqd.ErrUnknownSpace.
func (g *Group) DeleteSpace(ctx context.Context, name string) error {
	if err := g.serving(); err != nil {
		return err
	}
	if _, deleted := g.fsm.Deleted(name); deleted {
		return nil
	}
	if _, ok := g.fsm.Space(name); !ok {
		return fmt.Errorf("%w %q", seqd.ErrUnknownSpace, name)
	}
	if err := g.kindsReady(spaceKinds); err != nil {
		return err
	}
	return g.apply(ctx, fsm.EncodeDeleteSpace(name))
}

// FollowSpace makes this group's record of a space what group 0's serving
// leader answered (rec: live, a deletion, or none), on this group's
// leader: a space created (again), a new step, a deletion. A record that
// already agrees costs nothing.
//
// On protocol 6 the entry carries the answer's version, and the state
// machine applies it only if that version supersedes the record's (fsm's
// space_version.go): whichever path's entry commits last (this call's,
// the upkeep's, the resolver's), made from whichever answer, the record
// only moves forward. Before, an answer older than one followed meanwhile
// may take the record back until the next upkeep.
func (g *Group) FollowSpace(ctx context.Context, name string, rec fsm.SpaceRecord) error {
	if !g.IsLeader() {
		return seqd.ErrNotLeader
	}
	if g.versioned() {
		return g.followRecord(ctx, name, rec)
	}
	sp, found := rec.Space, rec.Live()
	own, live := g.fsm.Space(name)
	switch {
	case found && !live:
		// New here, or created again: a create every build applies.
		return g.apply(ctx, fsm.EncodeCreateSpace(sp))
	case found && own.Step != sp.Step:
		if err := g.kindsReady(spaceKinds); err != nil {
			return err
		}
		return g.apply(ctx, fsm.EncodeUpdateSpace(name, sp.Step))
	case !found && live:
		if err := g.kindsReady(spaceKinds); err != nil {
			return err
		}
		return g.apply(ctx, fsm.EncodeDeleteSpace(name))
	}
	return nil
}

// followRecord is FollowSpace on protocol 6: one KindFollowSpace entry,
// which the state machine applies only when it supersedes the record.
func (g *Group) followRecord(ctx context.Context, name string, rec fsm.SpaceRecord) error {
	own, have := g.fsm.Record(name)
	rec.Space.Name = name
	if !rec.Live() && rec.Space.SectionSize == 0 {
		// Group 0 holds no record: nothing to follow, unless this group
		// serves a space group 0 only answers as gone (a build that
		// answers no section size for a deletion): delete it here.
		if !have || !own.Live() {
			return nil
		}
		rec.Space.SectionSize = own.Space.SectionSize
	}
	if have && own == rec {
		return nil
	}
	return g.apply(ctx, fsm.EncodeFollowSpace(rec))
}

// copySpaces makes this group's records follow group 0's (see above): a
// space this server's copy of group 0 has and the group has no record of
// is copied at once, as group 0's records never lose a space; a record that
// differs from the copy (another step, deleted on one side) is settled by
// asking group 0's serving leader. Group 0 runs nothing here.
func (g *Group) copySpaces(ctx context.Context) {
	a := g.cfg.Authority
	if a == nil {
		return
	}
	versioned := g.versioned()
	var differ []string
	for _, sp := range a.Spaces() {
		rec, ok := a.Record(sp.Name)
		if !ok || !rec.Live() {
			continue // deleted since Spaces answered
		}
		own, have := g.fsm.Record(sp.Name)
		switch {
		case !have:
			if err := g.apply(ctx, g.encodeCopy(rec)); err != nil {
				if !errors.Is(err, context.Canceled) {
					g.log.Warn("copying a space from group 0 failed", "space", sp.Name, "err", err)
				}
				return
			}
		case !own.Live() || own.Space.Step != rec.Space.Step, versioned && own.Version < rec.Version:
			differ = append(differ, sp.Name)
		}
	}
	for _, sp := range g.fsm.Spaces() {
		if _, deleted := a.Deleted(sp.Name); deleted {
			differ = append(differ, sp.Name)
		}
	}
	if len(differ) == 0 || g.cfg.AskSpace == nil {
		return
	}
	for _, name := range differ {
		rec, err := g.cfg.AskSpace(ctx, name)
		if err == nil {
			err = g.FollowSpace(ctx, name, rec)
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				g.log.Warn("following group 0's change of a space failed; trying again later", "space", name, "err", err)
			}
			return
		}
	}
}
