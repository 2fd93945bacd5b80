package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
)

// Clean-stop records: a server that stops gracefully (Shutdown) writes, in
// the directory of each group it was admitted in, once raft has stopped,
// the last index and term of its log (file cleanStopFile). On its next start the record says whether
// the log is still the one it stopped with; admission without a leader
// then lets it in on the answer of any voter of its configuration that
// does not record its log beyond it (admit: ByCleanStop, and why that is
// sound). A crash writes no record, and a record from an earlier stop no
// longer matches once the log has moved on. The file is replaced
// atomically and not synced: after a power loss it may be missing or
// empty, which only means the rule does not apply.

// cleanStopFile names the file in each group's directory.
const cleanStopFile = "clean-stop"

// cleanStop is a clean-stop record: the log's last index and term.
type cleanStop struct{ index, term uint64 }

// lastLog reads raft's last log index and term (after a snapshot restore
// with an empty log, the snapshot's).
func lastLog(r *raft.Raft) cleanStop {
	st := r.Stats()
	i, err1 := strconv.ParseUint(st["last_log_index"], 10, 64)
	t, err2 := strconv.ParseUint(st["last_log_term"], 10, 64)
	if err1 != nil || err2 != nil {
		return cleanStop{}
	}
	return cleanStop{i, t}
}

// readCleanStop reads group directory dir's clean-stop record (the zero
// record for none or a malformed one).
func readCleanStop(dir string) cleanStop {
	b, err := os.ReadFile(filepath.Join(dir, cleanStopFile))
	if err != nil {
		return cleanStop{}
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return cleanStop{}
	}
	i, err1 := strconv.ParseUint(f[0], 10, 64)
	t, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || i == 0 || t == 0 {
		return cleanStop{}
	}
	return cleanStop{i, t}
}

// writeCleanStops writes the clean-stop record of every group this server
// was admitted in when it began to stop (admitted); raft has stopped in
// every group. A record certifies a log the group let take part: a server
// refused (an older copy found stale) or still waiting gets none, so that
// stopping it gracefully does not make its log look like one it stopped
// with as a member.
func (n *Node) writeCleanStops(admitted []bool) {
	for i, g := range n.groups {
		if !admitted[i] {
			continue
		}
		c := lastLog(g.Raft())
		if c.index == 0 {
			continue
		}
		if err := writeAtomic(groupDir(n.cfg.DataDir, i), cleanStopFile, fmt.Appendf(nil, "%d %d\n", c.index, c.term)); err != nil {
			n.log.Warn("writing the clean-stop record", "group", i, "err", err)
		}
	}
}

// stoppedCleanly reports whether group i's log is the one this server
// stopped with, gracefully, last time (see above).
func (n *Node) stoppedCleanly(i int) bool {
	c, r := n.cleanStops[i], n.groups[i].Raft()
	// The index first: once the log has moved on, raft's Stats (which
	// formats every statistic) is not needed.
	return c.index != 0 && c.index == r.LastIndex() && c == lastLog(r)
}
