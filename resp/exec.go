package resp

import (
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
}

func (s *Server) exec(c redcon.Conn, st *connState, cmds []redcon.Command) {
	var r run
	for _, cmd := range cmds {
		if len(cmd.Args) == 0 {
			continue
		}
		name := strings.ToUpper(string(cmd.Args[0]))
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
		p, errMsg := parseRunCommand(name, cmd.Args)
		if errMsg != "" {
			// Answered in its place: the run so far is flushed, and an
			// invalid command takes nothing.
			s.flushSlow(c, st, &r)
			c.WriteError(errMsg)
			continue
		}
		r.kind = kind
		r.cmds = append(r.cmds, p)
		r.nkeys += len(p.keys)
	}
	s.flush(c, st, &r)
}

// parseRunCommand parses INCR key, GET key, MGET key [key ...]; it returns
// an error reply for a malformed one.
func parseRunCommand(name string, args [][]byte) (*pending, string) {
	p := &pending{isMGET: name == "MGET"}
	if (p.isMGET && len(args) < 2) || (!p.isMGET && len(args) != 2) {
		return nil, wrongArgs(name)
	}
	if len(args)-1 > maxRunKeys {
		return nil, "ERR MGET takes at most " + strconv.Itoa(maxRunKeys) + " keys"
	}
	p.keys = make([]key, 0, len(args)-1)
	for _, a := range args[1:] {
		k, err := parseKey(a)
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
	// One Backend call per space, keys in command order.
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
	call := s.cfg.Backend.Next
	if r.kind == runCurrent {
		call = s.cfg.Backend.Current
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
	*r = run{}
}
