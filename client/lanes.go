package client

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
)

// Lanes: the groups one server leads share a batcher, so that server gets
// one message per round trip (groupTable.lane, routing.go). A message of a
// lane holds the calls of several groups; when it fails, what failed may
// be one group's, so its calls go again through their own groups'
// batchers (split).

// whole runs bt's request on the unary path (Client.multi). A batch that
// mixes the groups of a lane gets one attempt: if that fails (splits),
// its calls are split (and the answer is nil, nil).
func (b *batcher) whole(ctx context.Context, bt *batch) ([]uint64, error) {
	if !bt.mixed {
		return b.c.multi(ctx, b.kind, b.space, bt.keys, bt.gone, b.group)
	}
	n := b.c.groupLeader(b.group) // where the attempt goes, if known
	vals, err := b.c.multi(ctx, b.kind, b.space, bt.keys, func() bool { return true }, b.group)
	if ctx.Err() == nil && bt.splits(err) {
		b.split(bt, n)
		return nil, nil
	}
	return vals, err
}

// splits reports whether bt, failed with err, goes to its groups'
// batchers (split): it mixes the groups of a lane, and err may be one
// group's (any error but resource_exhausted, which goes to each call on
// its own, and the client's closing), and a caller still waits.
func (bt *batch) splits(err error) bool {
	return bt.mixed && err != nil && !errors.Is(err, ErrClosed) && !bt.gone() &&
		connect.CodeOf(err) != connect.CodeResourceExhausted
}

// split sends the calls of bt, a batch that mixes the groups of a lane and
// failed (splits), again through the batchers of their own raft groups (a
// call of several groups through the one that sends to the cluster's
// leader, which forwards), and keeps the groups of n, the server it was
// sent to, out of one lane for laneRest: so one group's failure, failover
// or move holds no call of another group that server leads, while the
// requests stay those of each group's batcher (coalesced, MaxInFlight),
// however many calls the batch held. Each call is answered when its
// group's batcher answers it, and given up with its caller (cancel);
// finish then only frees bt's slot.
func (b *batcher) split(bt *batch, n *node) {
	if n != nil {
		n.laneOff.Store(time.Now().Add(laneRest).UnixNano())
	}
	bt.split = true
	for _, w := range bt.waiters {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel.Store(&cancel)
		if w.gaveUp.Load() { // after the Store: a caller that gives up later cancels
			cancel()
			w.err = context.Canceled
			w.done <- struct{}{}
			continue
		}
		keys := bt.keys[w.off : w.off+w.n : w.off+w.n]
		go func() {
			defer cancel()
			w.vals, w.err = b.c.batcher(b.kind, b.space, w.group).enter(ctx, keys, w.group, false)
			w.done <- struct{}{}
		}()
	}
}

// routeOf is the group whose leader a call of raft group home, batched by
// group's batcher, goes to on its own: home's, unless it spans several.
func routeOf(home, group int) int {
	if home == noGroup {
		return group
	}
	return home
}

// laneRest is how long the groups of a server share no lane after one of
// its lane's requests failed.
const laneRest = 10 * time.Second
