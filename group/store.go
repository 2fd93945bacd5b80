package group

import (
	"context"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

// store adapts the group to sections.Store and sections.SpaceFinder.
type store struct{ g *Group }

// Space reads the group's own record of a space: the allocator serves a
// space only from it (FindSpace makes it first).
func (s store) Space(name string) (seqd.Space, bool) { return s.g.fsm.Space(name) }

// FindSpace implements sections.SpaceFinder: before the allocator loads a
// space, a group other than group 0 that has no record of it (or a record
// of its deletion) resolves it (ResolveSpace) and, when it exists, copies
// it into its own state (a raft entry of the group), so that it never
// depends on the lookup again. Group 0 decides spaces: its own record is
// the answer.
func (s store) FindSpace(ctx context.Context, name string) error {
	g := s.g
	if g.cfg.Authority == nil {
		return nil
	}
	if _, ok := g.fsm.Space(name); ok {
		return nil
	}
	sp, found, err := g.ResolveSpace(ctx, name)
	if err != nil || !found {
		return err
	}
	// New here, or created again after a deletion: a create every build
	// applies (as FollowSpace's).
	return g.apply(ctx, fsm.EncodeCreateSpace(sp))
}

// ResolveSpace returns a space's committed settings, found in one order by
// every path: the group's own record; else this server's copy of group 0
// (Config.Authority); else group 0's serving leader (Config.AskSpace, one
// peer call). A record of a deletion is never final, not even in this
// server's copy of group 0, since group 0's leader may have created the
// space again and the copy may lag: a deleted space is asked of group 0's
// leader, like one never seen. found is false for a space that
// does not exist (or is deleted); an error is one of asking (no leader
// known, the leader unreachable), which callers may retry.
func (g *Group) ResolveSpace(ctx context.Context, name string) (sp seqd.Space, found bool, err error) {
	if sp, ok := g.fsm.Space(name); ok {
		return sp, true, nil
	}
	_, deleted := g.fsm.Deleted(name)
	if a := g.cfg.Authority; a != nil && !deleted {
		if sp, ok := a.Space(name); ok {
			return sp, true, nil
		}
	}
	if g.cfg.AskSpace == nil {
		return seqd.Space{}, false, nil
	}
	return g.cfg.AskSpace(ctx, name)
}

func (s store) Max(space string, section uint64) uint64 { return s.g.fsm.Max(space, section) }

// Raise makes marks durable: the group holds their spaces already (the
// allocator loads a space only after FindSpace).
func (s store) Raise(ctx context.Context, marks []seqd.Mark) error {
	return s.g.apply(ctx, s.g.encodeRaise(marks))
}

// encodeRaise encodes a raise: stamped with this leader's wall time (never
// earlier than the newest stamp applied: see fsm's raise budget) once the
// group or group 0 is on protocol 5 (a group other than group 0 may trail
// group 0's protocol while one of its servers is down; every server speaks
// protocol 5 once group 0 does).
func (g *Group) encodeRaise(marks []seqd.Mark) []byte {
	p := g.fsm.Protocol()
	if g.cfg.Authority != nil {
		p = max(p, g.cfg.Authority.Protocol())
	}
	if p < fsm.KindProtocol(fsm.KindRaiseAt) {
		return fsm.EncodeRaise(marks)
	}
	return fsm.EncodeRaiseAt(max(g.wallMs(), g.fsm.RaiseClockMs()), marks)
}
