package fsm

import (
	"crypto/sha256"
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
// A backup of a cluster of several raft groups (MergeBackups, format 4)
// also records the group and slot counts and each group's part.
type BackupInfo struct {
	// ClusterID is the ID of the cluster the backup came from ("" for a
	// cluster still on protocol 1).
	ClusterID string
	// Term and Index are the leader's raft term and applied index when the
	// backup was taken: group 0's in a backup of several groups.
	Term, Index uint64
	// Taken is the leader's wall-clock time when the backup was taken
	// (group 0's leader's in a backup of several groups).
	Taken time.Time
	// Groups is the cluster's raft group count and Slots its slot count
	// (seqd.SlotCount); both 0 in a backup of one group, which owns every
	// section whatever the slots.
	Groups, Slots int
	// Parts holds, for a backup of several groups, each group's part: the
	// raft term and applied index of its leader, and the time, it was
	// taken at (Parts[0] is Term, Index and Taken). Nil for one group.
	Parts []GroupPart
}

// GroupPart says when one group's part of a backup was taken, and the
// group's protocol then (0 in backups of builds before it was recorded).
type GroupPart struct {
	Term, Index uint64
	Taken       time.Time
	Protocol    uint64
}

// GroupCount returns the group count of the cluster the backup came from:
// 1 for a backup of one group.
func (i BackupInfo) GroupCount() int { return max(i.Groups, 1) }

var (
	keyInfoCluster = []byte("cluster")
	keyInfoTerm    = []byte("term")
	keyInfoIndex   = []byte("index")
	keyInfoTaken   = []byte("taken")
)

func readBackupInfo(b *bolt.Bucket) (BackupInfo, error) {
	var info BackupInfo
	digest := false
	err := b.ForEach(func(k, v []byte) error {
		if v == nil {
			if string(k) == string(bucketInfoParts) {
				return nil // read below
			}
			return fmt.Errorf("%q is a bucket", k)
		}
		if string(k) == string(keyInfoDigest) {
			digest = true
			if len(v) != sha256.Size {
				return fmt.Errorf("digest of %d bytes", len(v))
			}
			return nil // checked by checkDigest
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
		case string(keyInfoGroups):
			if n < 2 || n > seqd.MaxGroups {
				return fmt.Errorf("group count %d (want 2 to %d)", n, seqd.MaxGroups)
			}
			info.Groups = int(n)
		case string(keyInfoSlots):
			if n == 0 || n > math.MaxInt32 {
				return fmt.Errorf("slot count %d", n)
			}
			info.Slots = int(n)
		default:
			return fmt.Errorf("unexpected key %q", k)
		}
		return nil
	})
	if err != nil {
		return info, err
	}
	if digest && info.Groups == 0 {
		return info, errors.New("a digest in a backup of one group (only backups of several groups are sealed)")
	}
	return info, readGroupParts(b, &info)
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
	if err := checkDigest(db, sum.Info); err != nil {
		db.Close()
		return nil, nil, sum, fmt.Errorf("%s: %w", path, err)
	}
	if sum.Info.Slots != 0 && sum.Info.Slots != seqd.SlotCount {
		db.Close()
		return nil, nil, sum, fmt.Errorf("%w: the backup places sections on %d slots, this build on %d: restore it with a build of its slot count", ErrSlotCount, sum.Info.Slots, seqd.SlotCount)
	}
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
	sum.Generation = st.ext.generationOf()
	sum.Protocol = st.ext.protocol
}
