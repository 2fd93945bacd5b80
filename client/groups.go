package client

import (
	"context"
	"sync"

	"github.com/seqd/seqd"
)

// byGroup runs a Next or Current call in a cluster of several groups:
// keys of one group go to that group's leader; keys of several groups are
// split into one share per group, sent in parallel, and the values merged
// back in the keys' order. Next calls on streams are split by lane instead
// (groupTable.lane): the keys of the groups one server leads go in one
// share, through one batcher, and so in one message per round trip. The
// call succeeds or fails as a whole: the first share to fail cancels the
// others and its error is the call's. A space the table does not know
// (created since the last refresh) is sent whole, as with one group, and a
// success starts a refresh.
func (c *Client) byGroup(ctx context.Context, t *groupTable, kind batchKind, space string, keys []uint64) ([]uint64, error) {
	name, size, ok := t.space(space)
	if !ok || len(keys) == 0 || len(keys) > seqd.MaxKeys {
		// Unknown space, or a call the server refuses as a whole.
		vals, err := c.send(ctx, kind, space, keys, noGroup)
		if err == nil && !ok {
			c.refreshRouting() // the space exists: learn its section size
		}
		return vals, err
	}
	r := router{name: name, size: size, t: t, lanes: kind == kindNext && c.streaming}
	// The common case, one group for every key, costs no allocation.
	sec := keys[0] / size
	g0, home := r.of(keys[0])
	first := -1 // the first key of another group than g0
	for i, k := range keys[1:] {
		if k/size == sec {
			continue
		}
		g, h := r.of(k)
		if g != g0 {
			first = i + 1
			break
		}
		home = homeOf(home, h)
	}
	if first < 0 {
		return c.sendShare(ctx, kind, space, keys, g0, home)
	}
	shares := r.split(keys, g0, home, first)
	vals := make([]uint64, len(keys))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once sync.Once
		fail error
		wg   sync.WaitGroup
	)
	run := func(sh *keyShare) {
		v, err := c.sendShare(ctx, kind, space, sh.keys, sh.group, sh.home)
		if err != nil {
			once.Do(func() { fail = err; cancel() })
			return
		}
		for i, p := range sh.pos {
			vals[p] = v[i]
		}
	}
	for i := 1; i < len(shares); i++ {
		wg.Go(func() { run(&shares[i]) })
	}
	run(&shares[0])
	wg.Wait()
	if fail != nil {
		return nil, fail
	}
	return vals, nil
}

// keyShare is one group's share of a call: its keys and their positions in
// the call.
type keyShare struct {
	group int
	pos   []int
	keys  []uint64
	home  int // the raft group of every key (noGroup: of several), in group's lane
}

// homeOf is the raft group of keys of groups a and b: a if the same, else
// noGroup.
func homeOf(a, b int) int {
	if a == b {
		return a
	}
	return noGroup
}

// router maps a key of a space to the group whose batcher takes it: its
// raft group, or with lanes the lane of that group.
type router struct {
	name  string
	size  uint64
	t     *groupTable
	lanes bool
}

// of returns the group whose batcher takes k (its lane's), and k's raft
// group.
func (r router) of(k uint64) (int, int) {
	g := seqd.GroupOfKey(r.name, r.size, k, r.t.n)
	if r.lanes {
		return r.t.lane(g), g
	}
	return g, g
}

// split splits keys by group (r.of), in order of first appearance;
// keys[:first] all belong to group g0 (of raft group home).
func (r router) split(keys []uint64, g0, home, first int) []keyShare {
	size := r.size
	shares := []keyShare{{group: g0, home: home}}
	for p := range first {
		shares[0].pos = append(shares[0].pos, p)
		shares[0].keys = append(shares[0].keys, keys[p])
	}
	lastSec, lastShare := keys[0]/size, 0
	for p := first; p < len(keys); p++ {
		k := keys[p]
		if sec := k / size; sec != lastSec {
			g, h := r.of(k)
			lastSec, lastShare = sec, -1
			for i := range shares {
				if shares[i].group == g {
					lastShare = i
					break
				}
			}
			if lastShare < 0 {
				lastShare = len(shares)
				shares = append(shares, keyShare{group: g, home: h})
			}
			shares[lastShare].home = homeOf(shares[lastShare].home, h)
		}
		sh := &shares[lastShare]
		sh.pos = append(sh.pos, p)
		sh.keys = append(sh.keys, k)
	}
	return shares
}
