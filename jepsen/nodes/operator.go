package nodes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Wipe deletes the node's data directory (the node must not be running):
// the node then starts as a new server with the same ID and addresses.
func (n *Node) Wipe() error {
	n.mu.Lock()
	st := n.state
	n.mu.Unlock()
	if st == Running || st == Paused {
		return fmt.Errorf("wipe %s: it is %s", n.ID, st)
	}
	return os.RemoveAll(n.DataDir)
}

// CopyData copies the node's data directory (the node must not be
// running) to dst, as an operator's `cp -a` would.
func (n *Node) CopyData(dst string) error {
	if st := n.State(); st == Running || st == Paused {
		return fmt.Errorf("copy %s: it is %s", n.ID, st)
	}
	return CopyDir(n.DataDir, dst)
}

// ReplaceData deletes the node's data directory (the node must not be
// running) and puts a copy of src in its place.
func (n *Node) ReplaceData(src string) error {
	if err := n.Wipe(); err != nil {
		return err
	}
	return CopyDir(src, n.DataDir)
}

// Seqd runs the seqd binary as an operator would (e.g. `seqd node remove
// --addr A ID`), bounded by timeout, and returns its combined output. It
// runs where the harness runs (the client namespace under netns), which
// reaches every node's API.
func (c *Cluster) Seqd(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	if len(c.Nodes) == 0 {
		return "", errors.New("no nodes")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Nodes[0].bin, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
