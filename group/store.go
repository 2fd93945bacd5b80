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
	rec, err := g.resolveRecord(ctx, name)
	if err != nil || !rec.Live() {
		return err
	}
	// New here, or created again after a deletion: a record of group 0's
	// (with its version from protocol 6, so that a copy that lags a
	// deletion already followed changes nothing), or a create every build
	// applies.
	return g.apply(ctx, g.encodeCopy(rec))
}

// encodeCopy encodes making this group's record group 0's live record
// rec: KindFollowSpace, with rec's version, once the group is on protocol
// 6; a create before.
func (g *Group) encodeCopy(rec fsm.SpaceRecord) []byte {
	if g.versioned() {
		return fsm.EncodeFollowSpace(rec)
	}
	return fsm.EncodeCreateSpace(rec.Space)
}

// versioned reports whether the group is on the protocol of space record
// versions: its entries that copy group 0's records carry their versions.
func (g *Group) versioned() bool {
	return g.fsm.Protocol() >= fsm.KindProtocol(fsm.KindFollowSpace)
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
	rec, err := g.resolveRecord(ctx, name)
	if err != nil || !rec.Live() {
		return seqd.Space{}, false, err
	}
	return rec.Space, true, nil
}

// resolveRecord is ResolveSpace's record, with its version: a live one
// when found, else group 0's serving leader's answer (a deletion, or none).
func (g *Group) resolveRecord(ctx context.Context, name string) (fsm.SpaceRecord, error) {
	own, ok := g.fsm.Record(name)
	if ok && own.Live() {
		return own, nil
	}
	if a := g.cfg.Authority; a != nil && !ok {
		if rec, ok := a.Record(name); ok && rec.Live() {
			return rec, nil
		}
	}
	if g.cfg.AskSpace == nil {
		return fsm.SpaceRecord{}, nil
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
