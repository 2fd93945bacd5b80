package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/fsm"
)

// A server whose disk is full must not lead. hashicorp/raft steps a leader
// down when it cannot write its log, but the server then stands for
// election again and, with a log at least as long as anyone's and its term
// and vote still saved, wins, fails, steps down, and wins again, every
// second or two: the cluster serves nothing meanwhile. So a server that
// finds its file system full (a raft log write, or a state machine write,
// fails with ENOSPC or EDQUOT) stops dialling other servers: it cannot
// campaign (pre-vote fails), and as leader it loses contact with its
// followers and steps down at once. It still answers the others, so as a
// follower it keeps receiving entries (harmless: it stores what it can).
// It stands again once a probe succeeds: a 4 MB file written, synced and
// removed in the data directory, every probe interval (2 s, doubling up to a
// minute while the disk keeps failing right after a probe said it had
// room), and at once after any raft log write succeeds. A small log write
// succeeding is not enough by itself: the store may still have free pages
// for a heartbeat's entries while it cannot grow, and a server that stood
// again on that would win, fail and step down again. A write of the term or
// vote that finds the disk full is retried until it succeeds (raft would
// otherwise stop the process), which stalls raft on this server like a
// pause. The state is logged, counted in Status and shown in metrics.

const (
	probeFirst = 2 * time.Second
	probeMax   = time.Minute
	probeBytes = 4 << 20
)

// diskState tracks whether this server's disk accepts writes.
type diskState struct {
	logFull   atomic.Bool // a raft log write found the disk full
	fsmFull   atomic.Bool // a state machine write found the disk full
	failures  atomic.Int64
	probeNext atomic.Int64 // unix nanos of the next probe
	probeGap  atomic.Int64 // current probe interval
	clearedAt atomic.Int64 // unix nanos a probe last cleared logFull
}

// Full reports whether a write found the disk full and none succeeded since.
func (d *diskState) Full() bool { return d.logFull.Load() || d.fsmFull.Load() }

// setLogDisk records that a raft log (or stable store) write found the disk
// full (full), or that a probe found room again.
func (n *Node) setLogDisk(full bool, err error) {
	d := &n.disk
	if full {
		d.failures.Add(1)
		if !d.logFull.Swap(true) {
			gap := probeFirst
			if time.Since(time.Unix(0, d.clearedAt.Load())) < 30*time.Second {
				gap = min(2*time.Duration(d.probeGap.Load()), probeMax)
			}
			d.probeGap.Store(int64(gap))
			d.probeNext.Store(time.Now().Add(gap).UnixNano())
			n.log.Error("the disk is full: this server stops standing for election and dials no other server until a write succeeds",
				"err", err, "probe_in", gap)
		}
		return
	}
	if d.logFull.Swap(false) {
		n.log.Info("raft log writes succeed again: this server stands for election again")
	}
}

// setFSMDisk is the state machine's disk hook.
func (n *Node) setFSMDisk(full bool, err error) {
	if full {
		n.disk.failures.Add(1)
		if !n.disk.fsmFull.Swap(true) {
			n.log.Error("the disk is full: the state machine waits to apply; this server stops standing for election", "err", err)
		}
		return
	}
	if n.disk.fsmFull.Swap(false) {
		n.log.Info("state machine writes succeed again")
	}
}

// probeDisk runs on the host loop (loop.go): while the raft log found the disk
// full, it checks every probe interval whether the file system has room
// again.
func (n *Node) probeDisk() {
	d := &n.disk
	if !d.logFull.Load() || time.Now().UnixNano() < d.probeNext.Load() {
		return
	}
	err := probeWrite(n.cfg.DataDir)
	if err != nil {
		d.probeNext.Store(time.Now().Add(time.Duration(d.probeGap.Load())).UnixNano())
		return
	}
	d.clearedAt.Store(time.Now().UnixNano())
	n.setLogDisk(false, nil)
}

// probeWrite writes, syncs and removes a probeBytes file in dir.
func probeWrite(dir string) error {
	path := filepath.Join(dir, "disk-probe.tmp")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	buf := make([]byte, 64<<10)
	for written := 0; written < probeBytes; written += len(buf) {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// LogWrite implements group.Host: it sees every raft log and stable-store
// write's outcome.
func (n *Node) LogWrite(err error) {
	if err == nil {
		if n.disk.logFull.Load() {
			n.disk.probeNext.Store(0) // probe on the next gossip pass
		}
	} else if fsm.IsDiskFull(err) {
		n.setLogDisk(true, err)
	}
}

// FSMDisk implements group.Host: the state machine's disk hook.
func (n *Node) FSMDisk(full bool, err error) { n.setFSMDisk(full, err) }

// errDiskFull refuses an outgoing raft connection while the disk is full.
var errDiskFull = errors.New("raft traffic refused: this server's disk is full")
