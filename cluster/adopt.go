package cluster

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/seqd/seqd/cluster/admit"
)

// Adopting the cluster's group count.
//
// A server started without --groups opens the default count (one group per
// bootstrap server: defaultGroups). A server that holds no raft state yet
// and finds, through gossip, the cluster it joins running another count
// cannot join it as it is: its keys would map to other groups than the
// ones holding their marks, and the leader refuses to add it. It holds
// nothing, so nothing is lost by starting again with the cluster's count:
// the node signals RestartNeeded, and its owner (seqd serve) closes it,
// records the count with AdoptGroups, and starts it again. This is how a
// server replacing a lost one joins with the same flags as the others even
// when they bootstrapped with another count (a cluster of an earlier build
// runs one group whatever --bootstrap-expect says). A server given
// --groups never adopts: it says in its log what the cluster runs.
// A server adopts only when every server holding state that it sees, alive,
// agrees on one cluster and one count.

// checkGroupCount runs on every gossip pass (see above); admit.AdoptCount
// decides.
func (g *gossip) checkGroupCount() {
	n := g.n
	if n.adopt.Load() != 0 {
		return
	}
	v := admit.AdoptCount(admit.CountFacts{Running: len(n.groups), Given: n.cfg.Groups, HasState: n.hasAnyState(), Members: n.admitMembers()})
	switch v.Outcome {
	case admit.Refuse:
		n.logEvery("groups-given", slog.LevelWarn, v.Message(n.cfg.ID), "id", n.cfg.ID, "refusal", string(v.Kind))
	case admit.Admit:
		n.log.Warn(v.Message(n.cfg.ID), "id", n.cfg.ID, "groups", v.Count)
		n.adopt.Store(int64(v.Count))
		close(n.restart)
	}
}

// hasAnyState reports whether this server holds raft state in any group.
func (n *Node) hasAnyState() bool {
	if n.hasState.Load() {
		return true
	}
	for i := range n.groups {
		if n.groupHasState(i) {
			return true
		}
	}
	return false
}

// RestartNeeded is closed when this server must be closed and started again
// to adopt its cluster's group count (see above); AdoptCount tells the count
// to record with AdoptGroups before the next start.
func (n *Node) RestartNeeded() <-chan struct{} { return n.restart }

// AdoptCount is the group count this server adopts (0 while it adopts none).
func (n *Node) AdoptCount() int { return int(n.adopt.Load()) }

// AdoptGroups records count as the group count of the data directory
// dataDir, which must hold no raft state in any group (it fails otherwise,
// with an error wrapping ErrInvalidConfig, and changes nothing), so that the
// next start without --groups opens count groups. Directories of groups
// beyond count, which hold nothing, are removed.
func AdoptGroups(dataDir string, count int) error {
	dirs := []string{dataDir}
	extra, _ := filepath.Glob(filepath.Join(dataDir, "groups", "*"))
	dirs = append(dirs, extra...)
	for _, d := range dirs {
		has, err := hasRaftState(d)
		if err != nil {
			return err
		}
		if has {
			return fmt.Errorf("%w: %s holds raft state: the group count of this server is fixed", ErrInvalidConfig, d)
		}
	}
	for _, d := range extra {
		if g, err := strconv.Atoi(filepath.Base(d)); err == nil && g >= count {
			if err := os.RemoveAll(d); err != nil {
				return fmt.Errorf("removing %s: %w", d, err)
			}
		}
	}
	return writeGroups(dataDir, count)
}
