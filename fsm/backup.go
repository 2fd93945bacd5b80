package fsm

import (
	"errors"
	"fmt"
	"io"
	"math"

	bolt "go.etcd.io/bbolt"
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

// RestoreSummary describes what PrepareRestore did.
type RestoreSummary struct {
	Spaces, Sections int
	// HighestBefore and HighestAfter are the largest high-water mark in the
	// backup and after adding the margin.
	HighestBefore, HighestAfter uint64
}

// ErrMarginTooLarge means adding the margin would push a mark past 2^63-1.
var ErrMarginTooLarge = errors.New("fsm: margin pushes a high-water mark past 2^63-1")

// PrepareRestore turns the backup file at path (written by Backup) into the
// state a restored cluster starts from, in place: it validates the file,
// then raises every section's high-water mark by margin, and every space's
// base (the floor of sections the backup never raised) by margin too, so
// that values issued after the backup was taken (up to margin per section)
// are never issued again. The applied index is reset: it belonged to the old
// cluster's log. margin must be at least 1.
func PrepareRestore(path string, margin uint64) (RestoreSummary, error) {
	var sum RestoreSummary
	if margin == 0 {
		return sum, errors.New("fsm: a restore needs a margin of at least 1")
	}
	if err := precheck(path); err != nil {
		return sum, err
	}
	db, st, err := openStore(path, false, true)
	if err != nil {
		return sum, fmt.Errorf("fsm: backup %s is not valid: %w", path, err)
	}
	defer db.Close()
	add := func(v uint64) (uint64, error) {
		if v > math.MaxInt64-margin {
			return 0, ErrMarginTooLarge
		}
		return v + margin, nil
	}
	err = db.Update(func(tx *bolt.Tx) error {
		bases, err := tx.CreateBucketIfNotExists(bucketBases)
		if err != nil {
			return err
		}
		for name := range st.spaces {
			sum.Spaces++
			nb, err := add(st.bases[name])
			if err != nil {
				return err
			}
			if err := bases.Put([]byte(name), u64(nb)); err != nil {
				return err
			}
			sum.HighestBefore = max(sum.HighestBefore, st.bases[name])
			sum.HighestAfter = max(sum.HighestAfter, nb)
			b := tx.Bucket(bucketMarks).Bucket([]byte(name))
			for sec, m := range st.marks[name] {
				sum.Sections++
				nm, err := add(m)
				if err != nil {
					return err
				}
				if err := b.Put(u64(sec), u64(nm)); err != nil {
					return err
				}
				sum.HighestBefore = max(sum.HighestBefore, m)
				sum.HighestAfter = max(sum.HighestAfter, nm)
			}
		}
		// The servers of the old cluster are not this one's.
		if tx.Bucket(bucketServers) != nil {
			if err := tx.DeleteBucket(bucketServers); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Delete(keyApplied)
	})
	if err != nil {
		return RestoreSummary{}, fmt.Errorf("fsm: preparing restore: %w", err)
	}
	return sum, nil
}
