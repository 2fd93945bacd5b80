package api

import (
	"context"
	"net/http"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake/holder"
)

// GranterOf is the granter s gives its own holders (tests only).
func GranterOf(s *Server) holder.Granter { return granter{s} }

// ForwardStreamStats reports, of the forward streams from q's server to
// the server at addr (fwdstream.go): how many were opened, how many
// messages they carried, and whether one is open now.
func ForwardStreamStats(q *Sequences, addr string) (dials, sent uint64, open bool) {
	p := q.s.peer(addr)
	p.fwd.mu.Lock()
	open = p.fwd.cur != nil
	p.fwd.mu.Unlock()
	return p.fwd.dials.Load(), p.fwd.sent.Load(), open
}

// ForwardStreamRefusals returns how many forward streams from q's server
// to the server at addr were asked for and not opened.
func ForwardStreamRefusals(q *Sequences, addr string) uint64 {
	return q.s.peer(addr).fwd.refusals.Load()
}

// ForwardNext forwards a Next of keys, all of group's, from q's server to
// the group's leader with the caller's header h (its token), over the
// forward stream (stream) or as a unary call, and returns the Connect
// error a front end would get.
func ForwardNext(ctx context.Context, q *Sequences, group int, h http.Header, stream bool, keys ...uint64) ([]uint64, error) {
	c := &keysCall{kind: kindNext, space: seqd.DefaultSpaceName, asked: seqd.DefaultSpaceName, keys: keys, hdr: h, via: viaFront, stream: stream}
	vals, _, _, _, err := q.s.serveShare(ctx, c, share{group: group, keys: keys})
	return vals, q.s.toConnect(err)
}

// ForwardStreamOffline reports whether forwards from q's server to the
// server at addr go unary for now, after a stream it could not open.
func ForwardStreamOffline(q *Sequences, addr string) bool {
	p := q.s.peer(addr)
	p.fwd.mu.Lock()
	defer p.fwd.mu.Unlock()
	return time.Now().Before(p.fwd.offline)
}

// ForwardStreamTo sends a Next of keys on q's server's forward stream to
// the server at addr (opening one if needed), as a forward to a leader
// there would, and reports whether it went on a stream.
func ForwardStreamTo(ctx context.Context, q *Sequences, addr string, keys ...uint64) (sent bool, err error) {
	_, _, sent, err = q.s.streamNextShare(ctx, q.s.peer(addr), forwardHeader(q.s.node.ID(), http.Header{}), seqd.DefaultSpaceName, keys)
	return sent, err
}
