package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/jepsen/nodes"
)

// Operator faults are what an operator does to a cluster, right or wrong,
// with the tools an operator has: the seqd binary (`seqd node remove`,
// `seqd backup`, `seqd restore`), stopping and starting servers with their
// usual flags (SIGTERM or kill -9), and copying or deleting data
// directories while a server is stopped. seqd's promise holds whatever an
// operator does: a mistake may be refused (a clear error, a non-zero exit,
// a server that logs why and stays out of service), never answered with a
// repeated value or one that goes backwards; the checkers see to the
// latter. Each fault's healing reports what the cluster did (the outcome in
// the history and in results.json), and leaves a node it broke repaired by
// README's procedure: `seqd node remove`, stop, delete the data directory,
// start.

// Log lines of seqd that show events other than admission verdicts (which
// the faults read by their kinds: admission.go).
const (
	diskFullLog  = "the disk is full" // ...: this server stops standing for election
	becameLeader = "became raft leader"
	lostLeader   = "lost raft leadership"
	servedLog    = "serving as leader" // it holds the lease and answers as leader
)

// served describes how often a node logged that it served as leader since
// offset ("" if never).
func served(n *nodes.Node, offset int64) string {
	if c := n.LogCount(offset, servedLog); c > 0 {
		return fmt.Sprintf("%s logged %q %d times on this data", n.ID, servedLog, c)
	}
	return ""
}

// opState is the operator faults' memory between faults.
type opState struct {
	mu      sync.Mutex
	seq     int
	copies  []*dirCopy
	backups []*backupFile
	broken  map[string]bool          // nodes to repair (remove, stop, wipe, start)
	leases  map[string]time.Duration // nodes whose --lease is not the run's
	filled  map[string]bool          // nodes whose small disk holds a filler
	help    string                   // `seqd restore --help`
	helpOK  bool
	// seed is the node a --bootstrap single cluster grew from, until the
	// first wipe-restart (see wipeRestart).
	seed *nodes.Node
	// restores counts restore-source-returns' restored servers (r1, r2,
	// ...); restore is the one in progress.
	restores int
	restore  *restoreRun
}

func (e *Env) path(prefix string) (string, error) {
	e.op.mu.Lock()
	e.op.seq++
	seq := e.op.seq
	e.op.mu.Unlock()
	dir := e.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%d", prefix, seq)), nil
}

func (e *Env) setBroken(n *nodes.Node, b bool) {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	if e.op.broken == nil {
		e.op.broken = map[string]bool{}
	}
	if b {
		e.op.broken[n.ID] = true
	} else {
		delete(e.op.broken, n.ID)
	}
}

func (e *Env) isBroken(n *nodes.Node) bool {
	e.op.mu.Lock()
	defer e.op.mu.Unlock()
	return e.op.broken[n.ID]
}

func (e *Env) brokenNodes() []*nodes.Node {
	var out []*nodes.Node
	for _, n := range e.Cluster.Nodes {
		if e.isBroken(n) {
			out = append(out, n)
		}
	}
	return out
}

// stopNode stops a node as the seed says: SIGTERM (a leader hands
// leadership over first) or kill -9. It returns which.
func (e *Env) stopNode(n *nodes.Node, rng *rand.Rand) (string, error) {
	if rng.IntN(2) == 0 {
		return "SIGTERM", n.Stop(10 * time.Second)
	}
	return "kill -9", n.Kill()
}

// repair is README's procedure for a server that must not take part with
// its data: `seqd node remove` it, stop it, delete its data directory,
// start it with its usual flags; it joins as a new server and is promoted.
func (e *Env) repair(n *nodes.Node) error {
	e.logf("nemesis:   repairing %s: seqd node remove, stop, wipe, start", n.ID)
	e.unblock(n)
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout+10*time.Second)
	rerr := e.nodeRemove(ctx, n)
	cancel()
	if err := errors.Join(n.Stop(10*time.Second), n.Wipe()); err != nil {
		return errors.Join(rerr, err)
	}
	err := e.rejoin([]*nodes.Node{n})
	if err == nil {
		e.setBroken(n, false)
	}
	return errors.Join(rerr, err)
}

// unblock is README's procedure when seqd node remove cannot run because no
// leader can be elected: broken server n is gone for good as far as the
// cluster is concerned (its data is another cluster's, or none), and the
// other servers that restarted since wait for its answer to be vouched for
// (admission=quorum-wait: with n lost, no majority of answers is left). They
// are restarted with --assume-gone n (this start only). Servers that do not
// wait for n are left alone.
func (e *Env) unblock(n *nodes.Node) {
	if e.Cluster.Leader(context.Background()) != nil {
		return
	}
	var others []*nodes.Node
	for _, o := range e.Cluster.Nodes {
		if o != n && o.State() == nodes.Running {
			others = append(others, o)
		}
	}
	lead, waited, took := e.leaderOrWait(others, recoverTimeout)
	if lead != nil || len(waited) == 0 {
		return
	}
	var waiting []*nodes.Node
	for _, id := range waited {
		waiting = append(waiting, e.Cluster.ByID(id))
	}
	e.logf("nemesis:   no leader for %v: %s wait for [%s]; restarting them with --assume-gone %s before repairing it",
		took.Round(100*time.Millisecond), strings.Join(waited, ","), n.ID, n.ID)
	if l, d, err := e.assumeGone(waiting, n); l == nil {
		e.logf("nemesis:   --assume-gone %s: NO leader within %v (%v)", n.ID, d.Round(100*time.Millisecond), err)
	} else {
		e.logf("nemesis:   --assume-gone %s: %s leads %v later", n.ID, l.ID, d.Round(100*time.Millisecond))
	}
}
