package fsm

import (
	"errors"
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// MaxCallValues is the most values one call may take for one key (a
// Reserve count, or a key repeated in a Next). The server's limits are
// below it; MinMargin relies on it.
const MaxCallValues = 1_000_000

// MinMargin returns the smallest restore margin that is provably enough,
// or an error if it passes 2^63-1. valuesSince bounds the values taken
// from any one section after the backup was taken (returned, or skipped by
// a call that failed after taking them), termsSince the leader terms that
// served after it (counting the term that was serving when it was taken;
// a leader loads each section once per term), and largestStep the largest
// step of any space (including spaces created after the backup).
//
// Why it is enough. Take one section and one term that serves it, starting
// from the committed mark M (every value taken before is at most M). Let H
// be the highest value taken in the section during the term; H is at most M
// plus the values taken during the term, since every value continues a
// key's current value, which is at most the highest value taken so far. The leader raises the mark either ahead of need, to
// max+step once less than step/2 is left above H (so to at most H +
// 1.5·step), or for a call that needs more, to the call's last value plus
// step, and a call's last value is at most H + MaxCallValues. So the term
// leaves the mark at most H + MaxCallValues + 2·step, whether or not the
// call that raised it succeeded. Chaining the terms from the backup's mark
// m (the term serving at the backup had handed out nothing above m), the
// mark at the end is at most m + valuesSince + termsSince·(MaxCallValues +
// 2·largestStep), and every value ever handed out is at most that mark. A
// restore that starts every section at m + margin (and every other section,
// of any space, at margin) therefore never hands out a value again when
// margin >= MinMargin(...).
func MinMargin(valuesSince, termsSince, largestStep uint64) (uint64, error) {
	if largestStep > seqd.MaxStep {
		return 0, fmt.Errorf("fsm: step %d is above the largest a space may have (%d)", largestStep, uint64(seqd.MaxStep))
	}
	per := MaxCallValues + 2*largestStep
	if valuesSince > math.MaxInt64 || (termsSince > 0 && per > (math.MaxInt64-valuesSince)/termsSince) {
		return 0, ErrMarginTooLarge
	}
	return valuesSince + termsSince*per, nil
}

// RestoreOptions says how PrepareRestore turns a backup into a restored
// cluster's first state.
type RestoreOptions struct {
	// Margin is added to every high-water mark (see MinMargin); at least 1.
	Margin uint64
	// ClusterID is the new cluster's ID; it must differ from the backup's.
	ClusterID string
	// FromCluster, when set, must be the backup's cluster ID.
	FromCluster string
	// FlakeFloorMs is the time floor (Unix ms) under every flake namespace
	// of the restored cluster, including namespaces created after the
	// backup: no worker's new range starts below it. It must lie above any
	// time the old cluster can have granted, including after the backup
	// was taken (its leader's time plus the longest range it hands out);
	// PrepareRestore refuses a backup with flake namespaces without one,
	// or with one at or below the backup's highest grant.
	FlakeFloorMs int64
}

// ErrFlakeFloor means a restore of a backup with flake namespaces was not
// given a time floor above the backup's highest grant.
var ErrFlakeFloor = errors.New("fsm: a backup with flake namespaces needs a time floor above its highest grant")

// RestoreSummary describes what PrepareRestore did.
type RestoreSummary struct {
	Spaces, Sections int
	// HighestBefore and HighestAfter are the largest high-water mark in the
	// backup and after adding the margin.
	HighestBefore, HighestAfter uint64
	// MaxStep is the largest step of the backup's spaces.
	MaxStep uint64
	// FlakeNamespaces counts the backup's flake namespaces, and
	// FlakeHighestMs is the end (Unix ms) of the highest range any of their
	// workers was granted.
	FlakeNamespaces int
	FlakeHighestMs  int64
	// Info describes the backup (zero for a backup without it, written by
	// the first release).
	Info BackupInfo
	// Generation is the backup's generation (unknown for a cluster still on
	// protocol 1, which has no cluster ID), and Restored the restored
	// cluster's: the backup's lineage (the new cluster ID for a backup
	// without one), its number plus one, and the new cluster ID.
	Generation, Restored seqd.Generation
	// Protocol is the backup's protocol (group 0's).
	Protocol uint64
}

// ErrMarginTooLarge means adding the margin would push a mark past 2^63-1.
var ErrMarginTooLarge = errors.New("fsm: margin pushes a high-water mark past 2^63-1")

// ErrWrongCluster means the backup is not from the cluster it was expected
// to come from.
var ErrWrongCluster = errors.New("fsm: the backup is from another cluster")

// PrepareRestore turns the backup file at path (written by WriteBackup or
// Backup) into the state a restored cluster of one group starts from, in
// place; see PrepareRestoreGroups. A backup of several groups is refused
// (ErrGroupCount): it restores into one state per group.
func PrepareRestore(path string, o RestoreOptions) (RestoreSummary, error) {
	return PrepareRestoreGroups(path, []string{path}, o)
}

// PrepareRestoreGroups turns the backup file at backup into the states the
// groups of a restored cluster start from: out[g] for group g, as many as
// the backup holds groups (one for a backup of one group; ErrGroupCount
// otherwise). Each out[g] is written (replaced if it exists) from a copy of
// the backup, except that out[0] may be backup itself, which is then
// changed in place; otherwise the backup is not changed.
//
// It validates the backup, then, in every group's state, raises the
// high-water mark of each of the group's sections by the margin (the other
// groups' marks are dropped: sections never move between groups), every
// space's base (the floor of sections the backup never raised) by the
// margin, and sets a cluster-wide floor of at least the margin under every
// section of every space, including spaces created after the restore
// (values a space created after the backup handed out are then never handed
// out again either). It gives every state the new cluster ID, protocol
// ProtocolVersion and the group count, as a bootstrapped cluster's entries
// record them, and drops what belonged to the old cluster's raft logs (the
// applied index, the servers seen, the lease record, the backup's
// description). Group 0 keeps the flake namespaces, under the time floor;
// the other groups hold none.
func PrepareRestoreGroups(backup string, out []string, o RestoreOptions) (RestoreSummary, error) {
	var sum RestoreSummary
	if o.Margin == 0 {
		return sum, errors.New("fsm: a restore needs a margin of at least 1")
	}
	if o.ClusterID == "" || len(o.ClusterID) > maxClusterIDLen {
		return sum, errors.New("fsm: a restore needs a new cluster ID")
	}
	db, st, sum, err := openBackup(backup)
	if err != nil {
		return sum, err
	}
	db.Close()
	n := sum.Info.GroupCount()
	if len(out) != n {
		return sum, fmt.Errorf("%w: the backup holds %d groups, not %d", ErrGroupCount, n, len(out))
	}
	if o.FromCluster != "" && sum.Info.ClusterID != o.FromCluster {
		return sum, fmt.Errorf("%w: it was taken from cluster %q, not %q", ErrWrongCluster, sum.Info.ClusterID, o.FromCluster)
	}
	if sum.Info.ClusterID == o.ClusterID {
		return sum, errors.New("fsm: the restored cluster needs an ID of its own")
	}
	sum.Restored = seqd.Generation{Lineage: sum.Generation.Lineage, Number: sum.Generation.Number + 1, Cluster: o.ClusterID}
	if sum.Restored.Lineage == "" {
		sum.Restored.Lineage = o.ClusterID // a backup of a cluster on protocol 1: no lineage to keep
	}
	floor, err := addMargin(st.ext.floor, o.Margin)
	if err != nil {
		return sum, err
	}
	if len(st.flake.spaces) > 0 {
		highest := st.flake.highestGrantMs()
		sum.FlakeNamespaces, sum.FlakeHighestMs = len(st.flake.spaces), highest
		if o.FlakeFloorMs <= highest {
			return sum, fmt.Errorf("%w: %s given, highest grant ends at %s", ErrFlakeFloor, seqd.Date(o.FlakeFloorMs), seqd.Date(highest))
		}
	}
	sum.HighestAfter = floor
	for g, path := range out {
		if path != backup {
			if err := copyPath(backup, path); err != nil {
				return RestoreSummary{}, fmt.Errorf("fsm: preparing restore: %w", err)
			}
		}
		highest, err := prepareGroup(path, st, g, n, floor, sum.Restored, o)
		if err != nil {
			if errors.Is(err, ErrMarginTooLarge) {
				return sum, err
			}
			return RestoreSummary{}, fmt.Errorf("fsm: preparing restore of group %d: %w", g, err)
		}
		sum.HighestAfter = max(sum.HighestAfter, highest)
	}
	return sum, nil
}

func addMargin(v, margin uint64) (uint64, error) {
	if v > math.MaxInt64-margin {
		return 0, ErrMarginTooLarge
	}
	return v + margin, nil
}

// prepareGroup turns the copy of the backup (whose state is st) at path into
// group g's state among n groups (see PrepareRestoreGroups), and returns
// the highest mark or base it wrote.
func prepareGroup(path string, st *state, g, n int, floor uint64, gen seqd.Generation, o RestoreOptions) (uint64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		return 0, err
	}
	var highest uint64
	err = db.Update(func(tx *bolt.Tx) error {
		bases, err := tx.CreateBucketIfNotExists(bucketBases)
		if err != nil {
			return err
		}
		for name := range st.spaces {
			nb, err := addMargin(st.bases[name], o.Margin)
			if err != nil {
				return err
			}
			if err := bases.Put([]byte(name), u64(nb)); err != nil {
				return err
			}
			highest = max(highest, nb)
			b := tx.Bucket(bucketMarks).Bucket([]byte(name))
			for sec, m := range st.marks[name] {
				if n > 1 && seqd.SlotGroup(seqd.SlotOf(name, sec), n) != g {
					if err := b.Delete(u64(sec)); err != nil {
						return err
					}
					continue
				}
				nm, err := addMargin(m, o.Margin)
				if err != nil {
					return err
				}
				if err := b.Put(u64(sec), u64(nm)); err != nil {
					return err
				}
				highest = max(highest, nm)
			}
		}
		// The old cluster's servers, raft position and leases are not this
		// one's; flake namespaces are group 0's alone.
		drop := [][]byte{bucketServers, bucketBackup}
		if g > 0 {
			drop = append(drop, bucketFlake)
		}
		for _, name := range drop {
			if tx.Bucket(name) != nil {
				if err := tx.DeleteBucket(name); err != nil {
					return err
				}
			}
		}
		meta := tx.Bucket(bucketMeta)
		for _, k := range [][]byte{keyApplied, keyLease} {
			if err := meta.Delete(k); err != nil {
				return err
			}
		}
		for _, kv := range []struct{ k, v []byte }{
			{keyFloor, u64(floor)}, {keyCluster, []byte(o.ClusterID)},
			{keyProtocol, u64(ProtocolVersion)}, {keyGroups, u64(uint64(n))},
			{keyLineage, []byte(gen.Lineage)}, {keyGeneration, u64(gen.Number)},
			{keyFormat, u64(promisedFormat(ProtocolVersion))},
		} {
			if err := meta.Put(kv.k, kv.v); err != nil {
				return err
			}
		}
		if g == 0 {
			if err := restoreFlake(tx, o.FlakeFloorMs); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return highest, err
}
