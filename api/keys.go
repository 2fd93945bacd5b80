package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"connectrpc.com/connect"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
)

// The per-key calls (Next, Current, Reserve) take one path, whatever
// carried them (a unary Connect call, a NextStream message, the Redis
// protocol or Leaf's API through Sequences): the keys are split by the
// raft group owning each key's section (cluster.Node.KeyGroups; with one
// group, one share of every key), and each group's share is served here if
// this server leads the group, or forwarded once to its leader
// (forwardOnce). The shares run in parallel, and the call succeeds or fails
// as a whole: values already taken in groups that answered become gaps,
// which the contract allows. The group's leader checks ownership against
// its own state (the allocator's Owns), never against this server's view.

// keysKind is which per-key call.
type keysKind uint8

const (
	kindNext keysKind = iota
	kindCurrent
	kindReserve
	kindFloor // SetFloor: no values, floors[i] for keys[i]
)

// keysCall is one per-key call as the routing path sees it.
type keysCall struct {
	kind   keysKind
	space  string // resolved
	asked  string // as the caller gave it (forwarded as given)
	keys   []uint64
	floors []uint64    // SetFloor's, one per key
	count  uint32      // Reserve's
	hdr    http.Header // the caller's: its token, Seqd-Forwarded, Seqd-Entry
	via    via         // the client a forwarded share goes with
	// stream forwards a Next share over the leader's forward stream
	// (fwdstream.go) rather than as a unary call.
	stream bool
}

// keysAnswer is a per-key call's answer: the values in the keys' order, and
// what its headers say. When the call had one share, either this server
// served it as group's leader in term (served), or leader (the leader's
// address) answered it and fwd holds that answer's headers.
type keysAnswer struct {
	vals   []uint64
	shares int
	served bool
	group  int
	term   uint64
	leader string
	fwd    http.Header
	here   int // values served by this server (not forwarded)
}

// groupError is an error of one group's share; toConnect hints that
// group's leader.
type groupError struct {
	group int
	err   error
}

func (e *groupError) Error() string { return e.err.Error() }
func (e *groupError) Unwrap() error { return e.err }

// share is one group's part of a per-key call: the positions of its keys
// in the call.
type share struct {
	group int
	pos   []int
	keys  []uint64
}

// splitKeys groups keys by the group owning them, in first-seen order.
func (s *Server) splitKeys(ctx context.Context, space string, keys []uint64) ([]share, error) {
	groupOf, err := s.node.KeyGroups(ctx, space)
	if err != nil {
		return nil, err
	}
	return groupShares(keys, groupOf), nil
}

// groupShares splits keys into one share per group (groupOf), in the order
// the groups are first seen; a share's keys keep their order in keys.
func groupShares(keys []uint64, groupOf func(uint64) int) []share {
	if g := groupOf(keys[0]); allIn(groupOf, g, keys) {
		pos := make([]int, len(keys))
		for i := range pos {
			pos[i] = i
		}
		return []share{{group: g, pos: pos, keys: keys}}
	}
	// Two passes: the groups and their counts, then each share's slices
	// carved from one array of positions and one of keys.
	gs := make([]int, len(keys))
	var out []share
	var counts []int
	var idx map[int]int // once the call spans more groups than a scan suits
	for p, k := range keys {
		g := groupOf(k)
		i := -1
		if idx == nil {
			i = shareOf(out, g)
		} else if j, ok := idx[g]; ok {
			i = j
		}
		if i < 0 {
			i = len(out)
			out, counts = append(out, share{group: g}), append(counts, 0)
			if idx == nil && len(out) > scanShares {
				idx = make(map[int]int)
				for j, sh := range out {
					idx[sh.group] = j
				}
			} else if idx != nil {
				idx[g] = i
			}
		}
		gs[p] = i
		counts[i]++
	}
	pos, ks := make([]int, len(keys)), make([]uint64, len(keys))
	at := 0
	for i, n := range counts {
		out[i].pos, out[i].keys = pos[at:at:at+n], ks[at:at:at+n]
		at += n
	}
	for p, k := range keys {
		sh := &out[gs[p]]
		sh.pos, sh.keys = append(sh.pos, p), append(sh.keys, k)
	}
	return out
}

// scanShares is how many shares splitKeys finds by a scan (shareOf) before
// it indexes them in a map: most calls span a few groups.
const scanShares = 8

// shareOf returns the index of group g's share in out, or -1.
func shareOf(out []share, g int) int {
	for i := range out {
		if out[i].group == g {
			return i
		}
	}
	return -1
}

// allIn reports whether every key is group g's.
func allIn(groupOf func(uint64) int, g int, keys []uint64) bool {
	for _, k := range keys[1:] {
		if groupOf(k) != g {
			return false
		}
	}
	return true
}

// serveKeys serves a per-key call over every group it spans (see above).
func (s *Server) serveKeys(ctx context.Context, c *keysCall) (keysAnswer, error) {
	shares, err := s.splitKeys(ctx, c.space, c.keys)
	if err != nil {
		return keysAnswer{}, err
	}
	a := keysAnswer{shares: len(shares)}
	if len(shares) == 1 {
		sh := shares[0]
		a.vals, a.leader, a.fwd, a.term, err = s.serveShare(ctx, c, sh)
		a.served, a.group = a.leader == "", sh.group
		if a.served {
			a.here = len(a.vals)
		}
		return a, err
	}
	a.vals = make([]uint64, len(c.keys))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(shares))
	fwds := make([]forwarded, len(shares))
	here := make([]int, len(shares))
	serve := func(i int) bool {
		sh := shares[i]
		got, leader, fwd, _, err := s.serveShare(ctx, c, sh)
		fwds[i] = forwarded{leader, fwd}
		if errs[i] = err; err != nil {
			cancel() // the call fails as a whole: stop the others
			return false
		}
		for j, p := range sh.pos {
			a.vals[p] = got[j]
		}
		if leader == "" {
			here[i] = len(got)
		}
		return true
	}
	// The shares of groups other servers lead are forwarded in parallel;
	// those this server leads are served here, one after another, while
	// the forwards are out: a local share takes microseconds, and a
	// goroutine each cost more in wake-ups than it saved (BENCHMARKS.md,
	// "One message per server"). Where a share goes is only where it is
	// sent first: serveShare looks again, and forwards a share whose
	// group moved off this server meanwhile (from here, in turn).
	var wg sync.WaitGroup
	local := make([]int, 0, len(shares))
	for i, sh := range shares {
		if s.node.Group(sh.group).IsLeader() {
			local = append(local, i)
		} else {
			wg.Go(func() { serve(i) })
		}
	}
	for _, i := range local {
		if ctx.Err() != nil || !serve(i) {
			break // a share failed: the call fails as a whole
		}
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return keysAnswer{}, err
	}
	for _, n := range here {
		a.here += n
	}
	// A share forwarded tells a stream's client where its group went, as
	// a call of that group alone would (streamNext): the Go client sends
	// the groups of one server in one message (its lanes) and learns of a
	// group that moved off that server from the first such answer. A
	// unary answer of several shares names no leader (setKeysHeaders):
	// clients that send whole calls to one server (Python) would take it
	// for the server to use next.
	for _, f := range fwds {
		if f.leader != "" {
			a.leader, a.fwd = f.leader, f.hdr
			break
		}
	}
	return a, nil
}

// forwarded is where a share was forwarded (leader "": served here), and
// the headers of the leader's answer.
type forwarded struct {
	leader string
	hdr    http.Header
}

// serveShare serves one group's share of c here if this server leads the
// group (and returns the term it served in), or forwards it once to the
// group's leader (and returns its address and answer headers). A group
// error wraps its error, and an answer of another length than the keys is
// one.
func (s *Server) serveShare(ctx context.Context, c *keysCall, sh share,
) (vals []uint64, leader string, fwd http.Header, term uint64, err error) {
	group, keys := sh.group, sh.keys
	if g := s.node.Group(group); g.IsLeader() {
		// The term read before serving: if leadership changed since, the
		// answer claims an older term, which a client never prefers.
		term = g.Raft().CurrentTerm()
		vals, err = s.localShare(ctx, c, sh)
	} else {
		leader, err = s.forwardOnce(ctx, c.hdr, group, forwardTimeout, func(ctx context.Context, p *peer, h http.Header) error {
			var err error
			vals, fwd, err = s.remoteShare(ctx, c, p, h, sh)
			return err
		})
	}
	if err == nil && len(vals) != len(keys) {
		err = fmt.Errorf("group %d answered %d values for %d keys", group, len(vals), len(keys))
	}
	if err != nil {
		return nil, "", nil, 0, &groupError{group: group, err: err}
	}
	if c.kind == kindNext {
		s.noteValues(c, group, len(keys), leader == "")
	}
	return vals, leader, fwd, term, nil
}

// noteValues counts the values of a Next share for the leaders that follow
// the traffic (cluster/traffic). Whether a share counts is decided once,
// where it entered the cluster, by its protocol: a call of the front ends
// that cannot route (Sequences: the Redis protocol, Leaf's API) carries
// Seqd-Entry naming its server (Sequences.header), which a forward to the
// group's leader keeps (forwardHeader); every other call (Connect, the Go
// client's streams, with or without routing) counts nowhere. A share that
// counts is counted by the server it entered at, whoever served it, and by
// the server that served it (servedHere) if that is another: a move of
// the group changes which server sees it, never whether it counts.
//
// A mark counts only where it can be true: on a call of this server's own
// front ends (not forwarded, naming this server), or at the leader the
// server it names forwarded the share to (Seqd-Forwarded names the same
// server). A mark a Connect caller sent is dropped where it enters
// (keysRequest), so it counts nowhere, whoever leads.
func (s *Server) noteValues(c *keysCall, group, n int, servedHere bool) {
	e, fwd := c.hdr.Get(seqd.HeaderEntry), c.hdr.Get(seqd.HeaderForwarded)
	switch {
	case e == "":
	case fwd == "" && e == s.node.ID(), servedHere && fwd == e:
		s.node.NoteValues(group, e, n)
	}
}

// localShare serves a share of c on this server, its group's leader. A
// space this server's copies lag is found by the group's allocator itself
// (group.Group.ResolveSpace): an unknown space here is one that does not
// exist.
func (s *Server) localShare(ctx context.Context, c *keysCall, sh share) ([]uint64, error) {
	alloc, keys := s.node.Group(sh.group).Allocator(), sh.keys
	switch c.kind {
	case kindFloor:
		return make([]uint64, len(keys)), alloc.SetFloors(ctx, c.space, keys, c.shareFloors(sh))
	case kindCurrent:
		return alloc.Current(ctx, c.space, keys)
	case kindReserve:
		first, err := alloc.Reserve(ctx, c.space, keys[0], uint64(c.count))
		return []uint64{first}, err
	}
	return alloc.Next(ctx, c.space, keys)
}

// remoteShare sends a share of c to the leader p with the header h.
func (s *Server) remoteShare(ctx context.Context, c *keysCall, p *peer, h http.Header, sh share) ([]uint64, http.Header, error) {
	cl, keys := c.via(p), sh.keys
	switch c.kind {
	case kindFloor:
		r := connect.NewRequest(&seqv1.SetFloorRequest{Space: c.asked, Keys: keys, Floors: c.shareFloors(sh)})
		copyHeader(r.Header(), h)
		resp, err := p.admin.SetFloor(ctx, r)
		if err != nil {
			return nil, nil, err
		}
		return make([]uint64, len(keys)), resp.Header(), nil
	case kindCurrent:
		r := connect.NewRequest(&seqv1.CurrentRequest{Space: c.asked, Keys: keys})
		copyHeader(r.Header(), h)
		resp, err := cl.Current(ctx, r)
		if err != nil {
			return nil, nil, err
		}
		return resp.Msg.GetValues(), resp.Header(), nil
	case kindReserve:
		r := connect.NewRequest(&seqv1.ReserveRequest{Space: c.asked, Key: keys[0], Count: c.count})
		copyHeader(r.Header(), h)
		resp, err := cl.Reserve(ctx, r)
		if err != nil {
			return nil, nil, err
		}
		return []uint64{resp.Msg.GetFirst()}, resp.Header(), nil
	}
	if c.stream {
		if vals, fwd, sent, err := s.streamNextShare(ctx, p, h, c.asked, keys); sent {
			return vals, fwd, err
		}
	}
	r := connect.NewRequest(&seqv1.NextRequest{Space: c.asked, Keys: keys})
	copyHeader(r.Header(), h)
	resp, err := cl.Next(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	return resp.Msg.GetValues(), resp.Header(), nil
}

// shareFloors is the floors of a share's keys.
func (c *keysCall) shareFloors(sh share) []uint64 {
	out := make([]uint64, len(sh.pos))
	for i, p := range sh.pos {
		out[i] = c.floors[p]
	}
	return out
}

// setKeysHeaders puts on h what a per-key answer's headers say: the
// routing headers; with one share served here, the group and term; with
// one share forwarded, where the leader is, and its group and routing
// version.
func (s *Server) setKeysHeaders(h http.Header, a *keysAnswer) {
	switch {
	case a.shares == 1 && !a.served:
		h.Set(seqd.HeaderLeader, a.leader)
		for _, k := range []string{seqd.HeaderGroup, seqd.HeaderRoutingVersion} {
			if v := a.fwd.Get(k); v != "" {
				h.Set(k, v)
			}
		}
	case a.shares == 1:
		s.setAnswerHeaders(h)
		h.Set(seqd.HeaderGroup, groupValue(a.group, a.term))
	default:
		s.setAnswerHeaders(h)
	}
}

// groupValue is HeaderGroup's value: "<group> <term>".
func groupValue(g int, term uint64) string {
	return strconv.Itoa(g) + " " + strconv.FormatUint(term, 10)
}

// firstError returns the first error that is not a cancellation caused by
// another share's failure, else the first error.
func firstError(errs []error) error {
	var first error
	for _, e := range errs {
		if e == nil {
			continue
		}
		if first == nil {
			first = e
		}
		if !errors.Is(e, context.Canceled) {
			return e
		}
	}
	return first
}
