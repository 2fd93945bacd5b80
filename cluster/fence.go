package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/cluster/admit"
)

// Fencing by generations (DESIGN.md §6). Every cluster has a generation
// (seqd.Generation: a lineage fixed when it first bootstrapped, a number
// that each restore raises, its cluster ID). A server learns of other
// generations all the time, from every source: gossip metadata (every
// member publishes its generation, whether it is admitted, and what fenced
// it), vouch questions and answers, and the Seqd-Generation header of
// every API request (a client carries the newest generation it met). When
// admit.Fence says a generation it learned of replaces its own, the server
// stops for good: it closes every raft gate, stops every group's lease,
// records the fence in its data directory (a restart keeps it fenced),
// publishes it, and answers calls with seqd.ErrSuperseded. An operator can
// still wipe it and start it to join the new generation.

// fencedFile names the file, in a fenced server's data directory, that
// records why it was fenced. While it exists the server never serves.
const fencedFile = "fenced"

// fenceRecord is the content of fencedFile.
type fenceRecord struct {
	// Generation is this server's when it was fenced; By the generation it
	// learned of, and From where it learned it.
	Generation string    `json:"generation"`
	By         string    `json:"by"`
	From       string    `json:"from"`
	At         time.Time `json:"at"`
}

// readFence reads dataDir's fence record (nil if the server is not fenced).
func readFence(dataDir string) (*fenceRecord, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, fencedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dataDir, fencedFile), err)
	}
	var r fenceRecord
	if err := json.Unmarshal(b, &r); err != nil {
		// A damaged record still fences: it exists.
		return &fenceRecord{By: "(unreadable fence record)"}, nil
	}
	return &r, nil
}

// Generation returns this server's generation (unknown until its cluster
// has an ID). A data directory restored by a build before generations
// records only the cluster it came from (restored-from): its lineage is
// that cluster, its number 1.
func (n *Node) Generation() seqd.Generation {
	g := n.authority().FSM().Generation()
	if g.Known() && g.Number == 0 && n.legacySource != "" && n.legacySource != g.Cluster {
		g.Lineage, g.Number = n.legacySource, 1
	}
	return g
}

// Fenced reports whether this server has been fenced (see above).
func (n *Node) Fenced() bool { return n.fenced.Load() }

// FencedBy returns the generation that fenced this server ("" if none).
func (n *Node) FencedBy() string {
	if r := n.fence.Load(); r != nil {
		return r.By
	}
	return ""
}

// LearnGeneration notes that a client met generation g (it had an answer
// from it): see learn. It reports whether this server is fenced now.
func (n *Node) LearnGeneration(g seqd.Generation) bool {
	n.learn(admit.Learned{Generation: g, Served: true, From: "a client"})
	return n.fenced.Load()
}

// learn applies admit.Fence to a generation this server learned of.
func (n *Node) learn(l admit.Learned) {
	if !l.Generation.Known() || n.fenced.Load() {
		return
	}
	v := admit.Fence(n.Generation(), n.GroupAdmitted(0), l)
	if v.Outcome == admit.Refuse {
		n.fenceNow(v, l)
	}
}

// fenceNow fences this server for good (see above). Only the first call
// acts.
func (n *Node) fenceNow(v admit.Verdict, l admit.Learned) {
	if !n.fenced.CompareAndSwap(false, true) {
		return
	}
	rec := &fenceRecord{Generation: n.Generation().String(), By: l.Generation.String(), From: l.From, At: time.Now().UTC()}
	n.fence.Store(rec)
	b, _ := json.Marshal(rec)
	if err := writeSynced(n.cfg.DataDir, fencedFile, append(b, '\n')); err != nil {
		// The server stops serving anyway; only a restart could forget it.
		n.log.Error("recording the fence in the data directory failed: a restart would forget it", "err", err)
	}
	n.shutGates()
	for _, g := range n.groups {
		g.Fence()
	}
	for i := range n.gates {
		v.Group = i
		g := n.gates[i]
		g.mu.Lock()
		g.verdict = v
		g.mu.Unlock()
	}
	v.Group = 0
	n.log.Error(v.Message(n.cfg.ID), "refusal", string(admit.Superseded), "admission", string(admit.Superseded), "id", n.cfg.ID,
		"generation", rec.Generation, "superseded_by", rec.By, "learned_from", rec.From)
	if n.gossip != nil {
		n.gossip.nudge()
	}
}
