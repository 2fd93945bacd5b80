package resp

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"
)

// Execution of one read's commands.
//
// The commands a client pipelined are answered in their order. Consecutive
// INCRs (a run) go to the Backend together: one Next call per space with
// their keys in command order, so that the Backend coalesces them with other
// connections' calls and a key named twice gets increasing values; so do
// consecutive GETs and MGETs (Current). A run ends at a command of another
// kind, which runs only once the run's values are known: each command sees
// the effects of the ones before it, as in Redis. The next read's commands
// run only after this read's are answered.

// runKind is the kind of a run of commands handed to the Backend together.
type runKind uint8

const (
	runNone runKind = iota
	runNext
	runCurrent
)

// key is a parsed "[space:]key".
type key struct {
	space string
	key   uint64
}

// pending is one command of a run: its keys (MGET: several), and the reply
// once known.
type pending struct {
	keys   []key
	isMGET bool
	vals   []uint64
	err    error // of the first failed key
}

type run struct {
	kind  runKind
	cmds  []*pending
	nkeys int
	space string // of the first key
	mixed bool   // a key of another space
}

// add appends p to the run.
func (r *run) add(kind runKind, p *pending) {
	for _, k := range p.keys {
		if r.nkeys == 0 {
			r.space = k.space
		}
		r.mixed = r.mixed || k.space != r.space
		r.nkeys++
	}
	r.kind = kind
	r.cmds = append(r.cmds, p)
}

// arena holds a read's pending commands and their keys, a block at a time:
// a block is never moved (a full one is left to the commands that point
// into it), so a pending or its keys stay where they are. A connection
// keeps its arena: reset makes the last blocks (twice the size of the one
// before, so they come to fit the connection's reads) serve the next read,
// up to a bound.
type arena struct {
	ps   []pending
	keys []key
}

// reset makes the arena's blocks serve the next read. Call it only once
// nothing points into them: the read's replies are written.
func (a *arena) reset() {
	clear(a.ps) // the replies' values and errors
	a.ps, a.keys = keep(a.ps, keptCommands), keep(a.keys, keptKeys)
}

// A connection keeps, from one read to the next, room for this many
// commands and keys (a larger read's is let go).
const (
	keptCommands = 1024
	keptKeys     = 4 * keptCommands
)

// keep returns s emptied, or nil if it holds room for more than n.
func keep[T any](s []T, n int) []T {
	if cap(s) > n {
		return nil
	}
	return s[:0]
}

// pending returns a new pending command with room for n keys.
func (a *arena) pending(n int) *pending {
	if len(a.ps) == cap(a.ps) {
		a.ps = make([]pending, 0, max(16, 2*cap(a.ps)))
	}
	a.ps = append(a.ps, pending{})
	p := &a.ps[len(a.ps)-1]
	if cap(a.keys)-len(a.keys) < n {
		a.keys = make([]key, 0, max(64, n, 2*cap(a.keys)))
	}
	start := len(a.keys)
	a.keys = a.keys[:start+n]
	p.keys = a.keys[start : start : start+n]
	return p
}

func (s *Server) exec(c redcon.Conn, st *connState, cmds []redcon.Command) {
	r := run{cmds: st.pend[:0]}
	ar := &st.arena
	defer func() {
		ar.reset()
		clear(r.cmds[:cap(r.cmds)])
		st.pend, st.keys = keep(r.cmds, keptCommands), keep(st.keys, keptKeys)
	}()
	for _, cmd := range cmds {
		if len(cmd.Args) == 0 {
			continue
		}
		name := commandName(cmd.Args[0])
		kind := runNone
		if st.authed {
			switch name {
			case "INCR":
				kind = runNext
			case "GET", "MGET":
				kind = runCurrent
			}
		}
		if kind == runNone || kind != r.kind || r.nkeys >= maxRunKeys {
			s.flushSlow(c, st, &r)
		}
		if kind == runNone {
			if s.command(c, st, name, cmd.Args) {
				return // QUIT
			}
			continue
		}
		p, errMsg := parseRunCommand(name, cmd.Args, ar, &st.spaces)
		if errMsg != "" {
			// Answered in its place: the run so far is flushed, and an
			// invalid command takes nothing.
			s.flushSlow(c, st, &r)
			c.WriteError(errMsg)
			continue
		}
		r.add(kind, p)
	}
	s.flush(c, st, &r)
}

// runNames are the commands that run together; commandName returns them
// without an allocation.
var runNames = [...]string{"INCR", "GET", "MGET"}

// commandName is a command's name in upper case.
func commandName(b []byte) string {
	for _, n := range runNames {
		if isName(b, n) {
			return n
		}
	}
	return strings.ToUpper(string(b))
}

// isName reports whether b is upper, a name of upper-case ASCII letters, in
// any case (a byte matches a letter only as that letter, upper or lower).
func isName(b []byte, upper string) bool {
	if len(b) != len(upper) {
		return false
	}
	for i := range b {
		if b[i]&^0x20 != upper[i] {
			return false
		}
	}
	return true
}

// parseRunCommand parses INCR key, GET key, MGET key [key ...]; it returns
// an error reply for a malformed one.
func parseRunCommand(name string, args [][]byte, ar *arena, spaces *spaceCache) (*pending, string) {
	isMGET := name == "MGET"
	if (isMGET && len(args) < 2) || (!isMGET && len(args) != 2) {
		return nil, wrongArgs(name)
	}
	if len(args)-1 > maxRunKeys {
		return nil, "ERR MGET takes at most " + strconv.Itoa(maxRunKeys) + " keys"
	}
	p := ar.pending(len(args) - 1)
	p.isMGET = isMGET
	for _, a := range args[1:] {
		k, err := parseKey(a, spaces)
		if err != "" {
			return nil, err
		}
		p.keys = append(p.keys, k)
	}
	return p, ""
}

// slowRun is how long a run may take before its replies are sent at once,
// ahead of the rest of the read's: a client with a read timeout (go-redis:
// 3 s) then sees the first replies of a pipeline whose runs wait out the
// Backend's retries one after the other.
const slowRun = 50 * time.Millisecond

// flushSlow runs the pending run, and sends the replies written so far if
// it took longer than slowRun.
func (s *Server) flushSlow(c redcon.Conn, st *connState, r *run) {
	if len(r.cmds) == 0 {
		r.kind = runNone
		return
	}
	start := time.Now()
	s.flush(c, st, r)
	if time.Since(start) > slowRun {
		if w := redcon.BaseWriter(c); w != nil {
			if st.lc != nil {
				_ = st.lc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
			}
			_ = w.Flush() // an error shows at the read's last flush
		}
	}
}

// flush runs the pending run and writes its replies, in order.
func (s *Server) flush(c redcon.Conn, st *connState, r *run) {
	if len(r.cmds) == 0 {
		r.kind = runNone
		return
	}
	call := s.cfg.Backend.Next
	if r.kind == runCurrent {
		call = s.cfg.Backend.Current
	}
	if r.mixed {
		s.callSpaces(st, r, call)
	} else {
		s.callSpace(st, r, call)
	}
	for _, p := range r.cmds {
		switch {
		case p.err != nil:
			c.WriteError(errorReply(p.err))
		case p.isMGET:
			c.WriteArray(len(p.vals))
			for _, v := range p.vals {
				c.WriteBulkString(strconv.FormatUint(v, 10))
			}
		case r.kind == runNext:
			c.WriteUint64(p.vals[0])
		default:
			c.WriteBulkString(strconv.FormatUint(p.vals[0], 10))
		}
	}
	*r = run{cmds: r.cmds[:0]}
}

// backendCall is the Backend's Next or Current.
type backendCall func(ctx context.Context, space string, keys []uint64) ([]uint64, []error)

// callSpace sets the values and errors of a run whose keys are all of one
// space, from one call.
func (s *Server) callSpace(st *connState, r *run, call backendCall) {
	keys := st.keys[:0] // the Backend keeps no key past its return
	for _, p := range r.cmds {
		for _, k := range p.keys {
			keys = append(keys, k.key)
		}
	}
	st.keys = keys
	vals, errs := call(st.ctx, r.space, keys)
	j := 0
	for _, p := range r.cmds {
		n := len(p.keys)
		for i := j; errs != nil && i < j+n; i++ {
			if errs[i] != nil {
				p.err = errs[i]
				break
			}
		}
		if p.err == nil {
			p.vals = vals[j : j+n : j+n]
		}
		j += n
	}
}

// callSpaces sets the values and errors of a run of keys of several spaces:
// one Backend call per space, keys in command order.
func (s *Server) callSpaces(st *connState, r *run, call backendCall) {
	type part struct {
		keys []uint64
		at   []struct{ cmd, i int }
	}
	parts := map[string]*part{}
	var order []string
	for ci, p := range r.cmds {
		p.vals = make([]uint64, len(p.keys))
		for i, k := range p.keys {
			pt := parts[k.space]
			if pt == nil {
				pt = &part{}
				parts[k.space] = pt
				order = append(order, k.space)
			}
			pt.keys = append(pt.keys, k.key)
			pt.at = append(pt.at, struct{ cmd, i int }{ci, i})
		}
	}
	// Different spaces have no order between them: their calls run in
	// parallel. Each command's values and error are set under mu.
	var mu sync.Mutex
	do := func(space string) {
		pt := parts[space]
		vals, errs := call(st.ctx, space, pt.keys)
		mu.Lock()
		defer mu.Unlock()
		for j, a := range pt.at {
			p := r.cmds[a.cmd]
			if errs != nil && errs[j] != nil {
				if p.err == nil {
					p.err = errs[j]
				}
				continue
			}
			p.vals[a.i] = vals[j]
		}
	}
	if len(order) == 1 {
		do(order[0])
	} else {
		var wg sync.WaitGroup
		for _, space := range order {
			wg.Go(func() { do(space) })
		}
		wg.Wait()
	}
}
