package group

import (
	"context"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

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
