package cluster

import (
	"context"
	"sync"

	"github.com/seqd/seqd/fsm"
)

// lookups coalesces concurrent questions about one space to group 0's
// leader, and answers every caller from a question that began after it
// asked. A caller that arrives while a question is in flight waits for
// the next one, which starts when that one ends and serves every caller
// that arrived meanwhile: at most two questions per space at a time, and
// never an answer older than the caller. An older one would undo what
// the caller was told happened before it asked: a space that group 0's
// CreateSpace returned (a call that starts after it must find the space),
// or a change that group 0 decided and then asked this server's group to
// follow (FollowSpace would follow the record from before it, and the
// change would report every group followed).
type lookups struct {
	mu      sync.Mutex
	running map[string]*lookup // the question in flight, per space
	next    map[string]*lookup // the one that starts when it ends
}

type lookup struct {
	done    chan struct{}
	callers int // callers waiting for it (under lookups.mu)
	rec     fsm.SpaceRecord
	err     error
}

// ask returns the answer of a question about name (query) that began
// after ask was called, shared with the other callers of that question.
func (ls *lookups) ask(ctx context.Context, name string, query func(name string) (fsm.SpaceRecord, error)) (fsm.SpaceRecord, error) {
	ls.mu.Lock()
	if ls.running == nil {
		ls.running, ls.next = map[string]*lookup{}, map[string]*lookup{}
	}
	l := ls.running[name]
	switch {
	case l == nil:
		l = &lookup{done: make(chan struct{})}
		ls.running[name] = l
		go ls.run(name, l, query)
	default:
		if l = ls.next[name]; l == nil {
			l = &lookup{done: make(chan struct{})}
			ls.next[name] = l
		}
	}
	l.callers++
	ls.mu.Unlock()
	select {
	case <-l.done:
		return l.rec, l.err
	case <-ctx.Done():
		return fsm.SpaceRecord{}, ctx.Err()
	}
}

// run asks, then starts the question its answer was too early for, if
// anyone waits for one, and answers l's callers.
func (ls *lookups) run(name string, l *lookup, query func(name string) (fsm.SpaceRecord, error)) {
	l.rec, l.err = query(name)
	ls.mu.Lock()
	delete(ls.running, name)
	if nx := ls.next[name]; nx != nil {
		delete(ls.next, name)
		ls.running[name] = nx
		go ls.run(name, nx, query)
	}
	ls.mu.Unlock()
	close(l.done)
}
