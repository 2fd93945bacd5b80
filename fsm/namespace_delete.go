package fsm

import (
	"fmt"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/flake"
)

// Deleting a flake namespace hides it (Namespace, Namespaces and Workers
// leave it out, and every op on it but a create fails as for an unknown
// namespace) and fences its holders, and keeps the rest: its layout, its
// floor and every worker's time mark. A namespace created again under its
// name, which must have the same layout, grants every worker a range above
// the marks it had, so no id is issued twice, and the name keeps its time
// floor. Held workers are taken back as an operator's reclaim takes them
// (ReclaimedHolder): their holders are fenced at once, and the workers are
// handed out again, after a create, only once a leader watched the
// deletion stand for two leases, when the holders have stopped issuing.
//
// KindDeleteNamespace is ignorable: a build that skips it keeps the
// namespace as it was, with the same marks, and goes on granting from them
// (so uniqueness holds whichever build leads), but lists it; a leader
// writes it only once every server of the configuration applies it.

// EncodeDeleteNamespace encodes the deletion of flake namespace name.
//
// Layout: 0x86, uvarint len(name), name.
func EncodeDeleteNamespace(name string) []byte {
	return appendString([]byte{byte(KindDeleteNamespace)}, name)
}

// applyDeleteNamespace deletes a namespace (see above). A deleted one
// stays deleted; an unknown one is refused with seqd.ErrUnknownNamespace.
func (f *FSM) applyDeleteNamespace(l *raft.Log, name string) error {
	f.mu.RLock()
	base, ok := f.flake.spaces[name]
	f.mu.RUnlock()
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", seqd.ErrUnknownNamespace, name)
	case base.deleted:
		return nil
	}
	t := flakeTxn{index: l.Index, base: map[string]*flakeNS{name: base}, touched: map[string]*flakeNS{}}
	n, _ := t.get(name)
	n.deleted = true
	for id, w := range n.workers {
		if w.Holder == "" || w.Holder == ReclaimedHolder {
			continue
		}
		w.Holder = ReclaimedHolder
		w.Token++
		w.RenewedIndex = l.Index
		n.workers[id] = w
		t.dirty(name, id)
	}
	if err := f.write(l, func(tx *bolt.Tx) error { return t.persist(tx) }); err != nil {
		return err
	}
	f.mu.Lock()
	f.flake.spaces[name] = n
	f.mu.Unlock()
	return nil
}

// describeLayout names a layout's widths for an error message.
func describeLayout(l flake.Layout) string {
	s := fmt.Sprintf("epoch %d ms, unit %d ms, %d time bits", l.EpochMs, l.UnitMs, l.TimeBits)
	if l.ClusterBits > 0 {
		s += fmt.Sprintf(", %d cluster bits = %d", l.ClusterBits, l.Cluster)
	}
	if l.ShardBits > 0 {
		s += fmt.Sprintf(", %d shard bits", l.ShardBits)
	}
	s += fmt.Sprintf(", %d worker bits, %d sequence bits", l.WorkerBits, l.SequenceBits)
	if l.SequenceFirst {
		s += ", sequence above worker"
	}
	return s
}

// NamespaceDeleted reports whether the namespace was deleted (and not
// created again since).
func (f *FSM) NamespaceDeleted(name string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.flake.spaces[name]
	return ok && n.deleted
}
