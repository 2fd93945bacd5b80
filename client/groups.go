package client

import (
	"context"
	"sync"

	"github.com/seqd/seqd"
)

// byGroup runs a Next or Current call in a cluster of several groups:
// keys of one group go to that group's leader; keys of several groups are
// split into one share per group, sent in parallel, and the values merged
// back in the keys' order. The call succeeds or fails as a whole: the first
// share to fail cancels the others and its error is the call's. A space the
// table does not know (created since the last refresh) is sent whole, as
// with one group, and a success starts a refresh.
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
	// The common case, one group for every key, costs no allocation.
	sec := keys[0] / size
	g0 := seqd.GroupOfKey(name, size, keys[0], t.n)
	first := -1 // the first key of another group than g0
	for i, k := range keys[1:] {
		if k/size == sec {
			continue
		}
		if seqd.GroupOfKey(name, size, k, t.n) != g0 {
			first = i + 1
			break
		}
	}
	if first < 0 {
		return c.send(ctx, kind, space, keys, g0)
	}
	shares := splitShares(name, size, t.n, keys, g0, first)
	vals := make([]uint64, len(keys))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once sync.Once
		fail error
		wg   sync.WaitGroup
	)
	run := func(sh *keyShare) {
		v, err := c.send(ctx, kind, space, sh.keys, sh.group)
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
}

// splitShares splits keys by group, in order of first appearance; keys[:first]
// all belong to group g0.
func splitShares(space string, size uint64, groups int, keys []uint64, g0, first int) []keyShare {
	shares := []keyShare{{group: g0}}
	for p := range first {
		shares[0].pos = append(shares[0].pos, p)
		shares[0].keys = append(shares[0].keys, keys[p])
	}
	lastSec, lastShare := keys[0]/size, 0
	for p := first; p < len(keys); p++ {
		k := keys[p]
		if sec := k / size; sec != lastSec {
			g := seqd.GroupOfKey(space, size, k, groups)
			lastSec, lastShare = sec, -1
			for i := range shares {
				if shares[i].group == g {
					lastShare = i
					break
				}
			}
			if lastShare < 0 {
				lastShare = len(shares)
				shares = append(shares, keyShare{group: g})
			}
		}
		sh := &shares[lastShare]
		sh.pos = append(sh.pos, p)
		sh.keys = append(sh.keys, k)
	}
	return shares
}
