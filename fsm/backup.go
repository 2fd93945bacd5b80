package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// Backup writes a consistent copy of the whole state (a bbolt file, the same
// bytes a snapshot holds) to w, as of the last applied entry, and returns
// how many bytes it wrote. It may run concurrently with Apply.
func (f *FSM) Backup(w io.Writer) (int64, error) {
	f.dbMu.Lock()
	if f.db == nil {
		err := f.broken
		f.dbMu.Unlock()
		return 0, err
	}
	tx, err := f.db.Begin(false)
	f.dbMu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("fsm: backup: %w", err)
	}
	defer tx.Rollback()
	n, err := tx.WriteTo(w)
	if err != nil {
		return n, fmt.Errorf("fsm: backup: %w", err)
	}
	return n, nil
}

// BackupInfo says where and when a backup was taken. WriteBackup stores it
// in the backup file (a "backup" bucket, format 2); PrepareRestore reads it.
type BackupInfo struct {
	// ClusterID is the ID of the cluster the backup came from ("" for a
	// cluster still on protocol 1).
	ClusterID string
	// Term and Index are the leader's raft term and applied index when the
	// backup was taken.
	Term, Index uint64
	// Taken is the leader's wall-clock time when the backup was taken.
	Taken time.Time
}

var (
	keyInfoCluster = []byte("cluster")
	keyInfoTerm    = []byte("term")
	keyInfoIndex   = []byte("index")
	keyInfoTaken   = []byte("taken")
)

func readBackupInfo(b *bolt.Bucket) (BackupInfo, error) {
	var info BackupInfo
	err := b.ForEach(func(k, v []byte) error {
		if v == nil {
			return fmt.Errorf("%q is a bucket", k)
		}
		if string(k) == string(keyInfoCluster) {
			if len(v) > maxClusterIDLen {
				return fmt.Errorf("cluster id of %d bytes", len(v))
			}
			info.ClusterID = string(v)
			return nil
		}
		if len(v) != 8 {
			return fmt.Errorf("%s has %d bytes, want 8", k, len(v))
		}
		n := binary.BigEndian.Uint64(v)
		switch string(k) {
		case string(keyInfoTerm):
			info.Term = n
		case string(keyInfoIndex):
			info.Index = n
		case string(keyInfoTaken):
			if n > math.MaxInt64 {
				return errors.New("time out of range")
			}
			info.Taken = time.Unix(0, int64(n)).UTC()
		default:
			return fmt.Errorf("unexpected key %q", k)
		}
		return nil
	})
	return info, err
}

// WriteBackup writes a backup to w: a consistent copy of the whole state as
// of the last applied entry (as Backup), with info recorded in it. It
// stages the copy in a temporary file (in os.TempDir) and returns how many
// bytes it wrote to w.
func (f *FSM) WriteBackup(w io.Writer, info BackupInfo) (int64, error) {
	tmp, err := os.CreateTemp("", "seqd-backup-*.db")
	if err != nil {
		return 0, fmt.Errorf("fsm: backup: %w", err)
	}
	path := tmp.Name()
	defer os.Remove(path)
	if _, err := f.Backup(tmp); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("fsm: backup: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		return 0, fmt.Errorf("fsm: backup: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketBackup)
		if err != nil {
			return err
		}
		if info.ClusterID != "" {
			if err := b.Put(keyInfoCluster, []byte(info.ClusterID)); err != nil {
				return err
			}
		}
		for _, kv := range []struct {
			k []byte
			v uint64
		}{{keyInfoTerm, info.Term}, {keyInfoIndex, info.Index}, {keyInfoTaken, uint64(max(info.Taken.UnixNano(), 0))}} {
			if err := b.Put(kv.k, u64(kv.v)); err != nil {
				return err
			}
		}
		return setFormat(tx, 2)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("fsm: backup: %w", err)
	}
	in, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("fsm: backup: %w", err)
	}
	defer in.Close()
	n, err := io.Copy(w, in)
	if err != nil {
		return n, fmt.Errorf("fsm: backup: %w", err)
	}
	return n, nil
}

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
}

// ErrMarginTooLarge means adding the margin would push a mark past 2^63-1.
var ErrMarginTooLarge = errors.New("fsm: margin pushes a high-water mark past 2^63-1")

// ErrWrongCluster means the backup is not from the cluster it was expected
// to come from.
var ErrWrongCluster = errors.New("fsm: the backup is from another cluster")

// InspectBackup validates the backup file at path without changing it and
// describes it (Margin-dependent fields are zero).
func InspectBackup(path string) (RestoreSummary, error) {
	db, _, sum, err := openBackup(path)
	if err != nil {
		return sum, err
	}
	db.Close()
	return sum, nil
}

// openBackup opens, fully checks and describes the backup at path.
func openBackup(path string) (*bolt.DB, *state, RestoreSummary, error) {
	var sum RestoreSummary
	if err := precheck(path); err != nil {
		return nil, nil, sum, fmt.Errorf("fsm: %s is not a seqd backup: %w", path, err)
	}
	db, st, err := openStore(path, false, true)
	if err != nil {
		return nil, nil, sum, fmt.Errorf("fsm: %s is not a valid seqd backup: %w", path, err)
	}
	describe(st, &sum)
	return db, st, sum, nil
}

func describe(st *state, sum *RestoreSummary) {
	sum.Spaces = len(st.spaces)
	for name, sp := range st.spaces {
		sum.MaxStep = max(sum.MaxStep, sp.Step)
		sum.HighestBefore = max(sum.HighestBefore, st.bases[name], st.ext.floor)
		for _, m := range st.marks[name] {
			sum.Sections++
			sum.HighestBefore = max(sum.HighestBefore, m)
		}
	}
	if st.backup != nil {
		sum.Info = *st.backup
	}
}

// PrepareRestore turns the backup file at path (written by WriteBackup or
// Backup) into the state a restored cluster starts from, in place: it
// validates the file, then raises every section's high-water mark by the
// margin, every space's base (the floor of sections the backup never
// raised) by the margin, and sets a cluster-wide floor of at least the
// margin under every section of every space, including spaces created after
// the restore (values a space created after the backup handed out are then
// never handed out again either). It gives the state the new cluster ID and
// protocol 2, and drops what belonged to the old cluster's raft log (the
// applied index, the servers seen, the lease record, the backup's
// description).
func PrepareRestore(path string, o RestoreOptions) (RestoreSummary, error) {
	var sum RestoreSummary
	if o.Margin == 0 {
		return sum, errors.New("fsm: a restore needs a margin of at least 1")
	}
	if o.ClusterID == "" || len(o.ClusterID) > maxClusterIDLen {
		return sum, errors.New("fsm: a restore needs a new cluster ID")
	}
	db, st, sum, err := openBackup(path)
	if err != nil {
		return sum, err
	}
	defer db.Close()
	if o.FromCluster != "" && sum.Info.ClusterID != o.FromCluster {
		return sum, fmt.Errorf("%w: it was taken from cluster %q, not %q", ErrWrongCluster, sum.Info.ClusterID, o.FromCluster)
	}
	if sum.Info.ClusterID == o.ClusterID {
		return sum, errors.New("fsm: the restored cluster needs an ID of its own")
	}
	add := func(v uint64) (uint64, error) {
		if v > math.MaxInt64-o.Margin {
			return 0, ErrMarginTooLarge
		}
		return v + o.Margin, nil
	}
	floor, err := add(st.ext.floor)
	if err != nil {
		return sum, err
	}
	if len(st.flake.spaces) > 0 {
		highest := st.flake.highestGrantMs()
		sum.FlakeNamespaces, sum.FlakeHighestMs = len(st.flake.spaces), highest
		if o.FlakeFloorMs <= highest {
			return sum, fmt.Errorf("%w: %d ms given, highest grant ends at %d ms", ErrFlakeFloor, o.FlakeFloorMs, highest)
		}
	}
	sum.HighestAfter = floor
	err = db.Update(func(tx *bolt.Tx) error {
		bases, err := tx.CreateBucketIfNotExists(bucketBases)
		if err != nil {
			return err
		}
		for name := range st.spaces {
			nb, err := add(st.bases[name])
			if err != nil {
				return err
			}
			if err := bases.Put([]byte(name), u64(nb)); err != nil {
				return err
			}
			sum.HighestAfter = max(sum.HighestAfter, nb)
			b := tx.Bucket(bucketMarks).Bucket([]byte(name))
			for sec, m := range st.marks[name] {
				nm, err := add(m)
				if err != nil {
					return err
				}
				if err := b.Put(u64(sec), u64(nm)); err != nil {
					return err
				}
				sum.HighestAfter = max(sum.HighestAfter, nm)
			}
		}
		// The old cluster's servers, raft position and leases are not this
		// one's.
		for _, name := range [][]byte{bucketServers, bucketBackup} {
			if tx.Bucket(name) != nil {
				if err := tx.DeleteBucket(name); err != nil {
					return err
				}
			}
		}
		meta := tx.Bucket(bucketMeta)
		for _, k := range [][]byte{keyApplied, keyLease, keyGroups} {
			if err := meta.Delete(k); err != nil {
				return err
			}
		}
		for _, kv := range []struct{ k, v []byte }{
			{keyFloor, u64(floor)}, {keyCluster, []byte(o.ClusterID)},
			{keyProtocol, u64(ProtocolVersion)},
		} {
			if err := meta.Put(kv.k, kv.v); err != nil {
				return err
			}
		}
		if err := restoreFlake(tx, o.FlakeFloorMs); err != nil {
			return err
		}
		return setFormat(tx, 2)
	})
	if err != nil {
		if errors.Is(err, ErrMarginTooLarge) {
			return sum, err
		}
		return RestoreSummary{}, fmt.Errorf("fsm: preparing restore: %w", err)
	}
	return sum, nil
}
