package nodes

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Every node runs with `--unsafe-clock-offset-file ClockPath`: its wall
// clock is the host's plus the milliseconds in that file, which seqd
// re-reads every 100 ms. The file lies next to the node's data directory
// (not in it, so that a fault that wipes the directory keeps it), and the
// harness alone writes it.

// ClockFlag is seqd's flag that names the clock offset file.
const ClockFlag = "unsafe-clock-offset-file"

// SetClockOffset sets the node's wall-clock offset: the file is written
// aside and renamed over the old one, so seqd never reads half a value.
func (n *Node) SetClockOffset(d time.Duration) error {
	tmp := n.ClockPath + ".tmp"
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		return fmt.Errorf("%s: clock offset: %w", n.ID, err)
	}
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(d.Milliseconds(), 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("%s: clock offset: %w", n.ID, err)
	}
	if err := os.Rename(tmp, n.ClockPath); err != nil {
		return fmt.Errorf("%s: clock offset: %w", n.ID, err)
	}
	n.mu.Lock()
	n.clockOffset = d
	n.mu.Unlock()
	return nil
}

// ClockOffset is the offset the harness last set.
func (n *Node) ClockOffset() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.clockOffset
}

// clockPath is where node id's offset file lies, for a cluster whose data
// directories are under dataDir.
func clockPath(dataDir, id string) string { return filepath.Join(dataDir, id+".clock-offset") }
