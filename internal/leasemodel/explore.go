package leasemodel

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Config is an exploration.
type Config struct {
	// Seed fixes every run: run k's seed is derived from Seed and k.
	Seed uint64
	// Steps bounds the exploration: runs start until this many steps
	// (events: a timer or a fault) have been taken in all.
	Steps int
	// Rules are the decisions (Real{} when nil).
	Rules Rules
	// RunLength is each run's span of real time (DefaultRunLength when 0).
	RunLength time.Duration
}

// DefaultRunLength is a run's span: long enough for several failovers and
// for a restore's first server to serve (admit.SoloWait, a lease).
const DefaultRunLength = 40 * time.Second

// Result is what an exploration found.
type Result struct {
	Steps, Runs int
	// Violation is the first violation found (nil: none), RunSeed the
	// seed of the run that found it, and Trace the shortest run that
	// still breaks the same property: the setup, then the faults and the
	// protocol's moves in order, with real times.
	Violation *Violation
	RunSeed   uint64
	Trace     string
	Stats     Stats
}

// Explore runs randomized runs until a violation or the step budget.
// Runs alternate between clusters of 3 and of 5 servers.
func Explore(cfg Config) Result {
	if cfg.Rules == nil {
		cfg.Rules = Real{}
	}
	if cfg.RunLength == 0 {
		cfg.RunLength = DefaultRunLength
	}
	res := Result{Stats: Stats{}}
	for k := uint64(0); res.Steps < cfg.Steps; k++ {
		seed := runSeed(cfg.Seed, k)
		m := newRun(cfg, seed, nil)
		m.run()
		res.Steps += m.steps
		res.Runs++
		for k, v := range m.stats {
			res.Stats[k] += v
		}
		if m.violation != nil {
			res.Violation, res.RunSeed = m.violation, seed
			res.Trace = shrink(cfg, seed, m)
			return res
		}
	}
	return res
}

// Replay runs one run again from its seed, with its trace.
func Replay(cfg Config, seed uint64) Result {
	if cfg.Rules == nil {
		cfg.Rules = Real{}
	}
	if cfg.RunLength == 0 {
		cfg.RunLength = DefaultRunLength
	}
	m := newRun(cfg, seed, nil)
	m.run()
	res := Result{Steps: m.steps, Runs: 1, Violation: m.violation, RunSeed: seed}
	if m.violation != nil {
		res.Trace = shrink(cfg, seed, m)
	}
	return res
}

func runSeed(seed, k uint64) uint64 {
	z := seed + (k+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// newRun sets a run up from its seed: its size, the servers' clocks,
// leases and timers, and the faults (drawn, or replayed from script).
func newRun(cfg Config, seed uint64, script []fault) *Model {
	n := 3
	if seed%2 == 1 {
		n = 5
	}
	m := newModel(cfg.Rules, n, rand.New(rand.NewPCG(seed, 1)))
	m.end = int64(cfg.RunLength)
	m.faults = &faultGen{rng: rand.New(rand.NewPCG(seed, 2)), soon: never}
	if script != nil {
		m.faults.script = script
	} else {
		m.faults.gap = int64([]time.Duration{time.Second, 3 * time.Second, 8 * time.Second, 20 * time.Second}[m.faults.rng.IntN(4)])
		m.faults.next = m.faults.rng.Int64N(2 * m.faults.gap)
	}
	return m
}

// run takes steps until the run's end or a violation.
func (m *Model) run() { m.runUntil(m.end) }

// runUntil takes steps until real time end or a violation.
func (m *Model) runUntil(end int64) {
	for m.violation == nil {
		at, s, kind := m.nextEvent()
		if at > end {
			m.now = max(m.now, end)
			return
		}
		m.now = max(m.now, at)
		m.steps++
		if s == nil {
			m.injectFault()
		} else {
			m.fire(s, kind)
		}
		m.check()
	}
}

// nextEvent is the earliest timer of a running, unpaused server, or the
// next fault (s nil); ties go to the lower server and timer.
func (m *Model) nextEvent() (at int64, s *server, kind int) {
	at = m.faults.at()
	for _, v := range m.servers {
		if !v.up || v.paused {
			continue
		}
		for k, t := range v.t {
			if t < at {
				at, s, kind = t, v, k
			}
		}
	}
	return at, s, kind
}

func (m *Model) fire(s *server, kind int) {
	s.t[kind] = never
	switch kind {
	case tElection:
		m.electionTimeout(s)
	case tSend:
		if s.role == leader {
			m.send(s)
		}
	case tCheck:
		if s.role == leader {
			m.checkQuorum(s)
		}
	case tLead:
		m.leadTimer(s)
	case tMove:
		if s.move != noMove {
			m.moveTimer(s)
		}
	case tAsk:
		m.ask(s)
	case tGossip:
		m.gossip(s)
	case tRecord:
		if s.role == leader {
			m.record(s)
		}
	case tExit:
		m.note(s, "exits")
		m.down(s)
	}
}

// shrink finds a shorter run that breaks the same property: the faults
// up to the violation, each dropped in turn while the property still
// breaks (the protocol's own randomness is the run's, so a script
// replays exactly), and returns its trace.
func shrink(cfg Config, seed uint64, m *Model) string {
	prop := m.violation.Property
	script := append([]fault(nil), m.faults.done...)
	replay := func(sc []fault, trace bool) *Model {
		r := newRun(cfg, seed, sc)
		r.end = m.violation.At + int64(time.Second)
		if prop == Unavailable {
			r.end = m.end
		}
		if trace {
			r.trace = &strings.Builder{}
			r.describe()
		}
		r.run()
		return r
	}
	for i := len(script) - 1; i >= 0; i-- {
		try := append(append([]fault{}, script[:i]...), script[i+1:]...)
		if r := replay(try, false); r.violation != nil && r.violation.Property == prop {
			script = try
		}
	}
	r := replay(script, true)
	if r.violation == nil {
		// Cannot happen (the script is what broke it), but say so if it does.
		return fmt.Sprintf("run seed %#x: the shrunk run did not break %s again\n", seed, prop)
	}
	fmt.Fprintf(r.trace, "%10s  VIOLATION %s\n", fmtTime(r.violation.At), r.violation)
	return fmt.Sprintf("run seed %#x, %d faults (shrunk from %d):\n", seed, len(script), len(m.faults.done)) + r.trace.String()
}

// describe writes the run's setup to the trace.
func (m *Model) describe() {
	fmt.Fprintf(m.trace, "  setup  %d servers, %.1f%% of raft messages lost\n", len(m.servers), float64(m.loss)/10)
	for _, s := range m.servers {
		fmt.Fprintf(m.trace, "  setup  %s: clock rate %.3f, lease %v, margin %v, raft timers x%d\n",
			s.id, float64(s.rate)/1000, s.lease, s.marg, s.slow)
	}
}

// note writes a protocol move to the trace (when tracing).
func (m *Model) note(s *server, what string) {
	if m.trace != nil {
		fmt.Fprintf(m.trace, "%10s  %-3s %s\n", fmtTime(m.now), s.id, what)
	}
}

func (m *Model) noteFault(f fault) {
	if m.trace != nil {
		fmt.Fprintf(m.trace, "%10s  FAULT %s\n", fmtTime(m.now), f.String(m))
	}
}
