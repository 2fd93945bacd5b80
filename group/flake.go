package group

import (
	"context"
	"fmt"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

// flakeProtocol is the replicated-command protocol that brought KindFlake.
var flakeProtocol = fsm.KindProtocol(fsm.KindFlake)

// ErrFlakeProtocol means the group is not yet on the protocol of flake
// commands: a rolling upgrade has not finished (every server must run a
// build that knows them before the leader writes one).
var ErrFlakeProtocol = fmt.Errorf("%w: flake ids need every server on protocol %d (finish the rolling upgrade)", seqd.ErrNotServing, flakeProtocol)

// wallMs reads the wall clock the leader stamps flake grants with.
func (g *Group) wallMs() int64 {
	if g.cfg.WallClock != nil {
		return g.cfg.WallClock()
	}
	return time.Now().UnixMilli()
}

// ApplyFlake decides flake operations on the leader: it stamps them with
// the leader's wall-clock time and commits them in one entry, and answers
// one result per op (see fsm.FlakeResult). It answers seqd.ErrNotLeader on
// a follower and ErrFlakeProtocol before the group is on protocol 3.
func (g *Group) ApplyFlake(ctx context.Context, ops []fsm.FlakeOp) ([]fsm.FlakeResult, error) {
	if !g.IsLeader() {
		return nil, seqd.ErrNotLeader
	}
	if g.fsm.Protocol() < flakeProtocol {
		return nil, ErrFlakeProtocol
	}
	resp, err := g.applyResponse(ctx, fsm.EncodeFlake(g.wallMs(), ops))
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*fsm.FlakeResponse)
	if !ok || len(r.Results) != len(ops) {
		return nil, fmt.Errorf("group: flake entry answered %T", resp)
	}
	return r.Results, nil
}
