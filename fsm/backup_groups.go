package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// A backup of a cluster of several raft groups is one file (format 4): the
// state of group 0 (spaces, flake namespaces, the cluster ID and its own
// marks) with every other group's section marks added (the groups own
// disjoint sections, so the marks never meet), the spaces any group knew,
// the largest floor and base of any group, and, in the backup bucket, the
// group count, the slot count and each group's part: the raft term, applied
// index and time its leader took it at. Each part comes from its group's
// serving leader (WriteBackup), so the file holds every mark committed in
// any group before its part was taken; the parts are not taken at one
// instant, and a restore's margin is counted, per group, from that group's
// part (see MinMargin).
//
// Builds before it read formats up to 3 and refuse format 4 as written by
// a newer seqd, never misreading a backup of several groups as one of a
// single group. A backup of one group stays format 2 (3 with flake state),
// readable by the builds before groups.

// groupsBackupFormat is the data format of a backup of several groups.
// Only MergeBackups writes it; a restore writes every group's state in
// format 2 or 3.
const groupsBackupFormat = 4

var (
	// In the backup bucket of a format 4 file: the group and slot counts,
	// and a bucket of parts, one per group under its 8-byte big-endian
	// number: term, applied index and time taken (Unix ns), 8 bytes each.
	keyInfoGroups   = []byte("groups")
	keyInfoSlots    = []byte("slots")
	bucketInfoParts = []byte("parts")
	// keyInfoDigest (format 4) is a SHA-256 of every bucket, key and value
	// of the file but itself (see contentDigest), written last by
	// MergeBackups: bbolt's own checks find damaged pages, not a flipped
	// bit in a value, and a mark lowered that way would restore below
	// values handed out. Backups of one group carry none (the builds
	// before groups refuse a key they do not know).
	keyInfoDigest = []byte("digest")
)

// ErrDamaged means a backup's contents do not match the digest written
// with them.
var ErrDamaged = errors.New("fsm: the backup is damaged")

// contentDigest returns a SHA-256 of every bucket (by path), key and value
// in tx, in bbolt's order, leaving out the backup bucket's digest itself.
func contentDigest(tx *bolt.Tx) []byte {
	h := sha256.New()
	field := func(b []byte) {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
		h.Write(b)
	}
	var walk func(depth int, path []byte, b *bolt.Bucket)
	walk = func(depth int, path []byte, b *bolt.Bucket) {
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if depth == 1 && string(path) == string(bucketBackup) && string(k) == string(keyInfoDigest) {
				continue
			}
			h.Write([]byte{byte(depth)})
			field(k)
			if v == nil {
				h.Write([]byte{'b'})
				walk(depth+1, k, b.Bucket(k))
				continue
			}
			h.Write([]byte{'v'})
			field(v)
		}
	}
	_ = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		h.Write([]byte{0})
		field(name)
		walk(1, name, b)
		return nil
	})
	return h.Sum(nil)
}

// SealBackup writes the digest of the backup of several groups at path
// again, over its contents as they are now. It is for tools and tests that
// edit a backup on purpose (to make the file another build would have
// written); anything else that changes a backup makes it damaged.
func SealBackup(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		return fmt.Errorf("fsm: sealing %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBackup)
		if b == nil || b.Get(keyInfoGroups) == nil {
			return errors.New("not a backup of several groups")
		}
		return b.Put(keyInfoDigest, contentDigest(tx))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsm: sealing %s: %w", path, err)
	}
	return nil
}

// checkDigest refuses a backup of several groups whose contents do not
// match its digest, or that has none.
func checkDigest(db *bolt.DB, info BackupInfo) error {
	if info.Groups == 0 {
		return nil // a backup of one group carries no digest
	}
	return db.View(func(tx *bolt.Tx) error {
		want := tx.Bucket(bucketBackup).Get(keyInfoDigest)
		if want == nil {
			return fmt.Errorf("%w: a backup of several groups without its digest", ErrDamaged)
		}
		if got := contentDigest(tx); !bytes.Equal(got, want) {
			return fmt.Errorf("%w: its contents do not match the digest `seqd backup` wrote with them (changed or damaged since): take another backup", ErrDamaged)
		}
		return nil
	})
}

// ErrSlotCount means a backup was taken by a build whose slot count
// (seqd.SlotCount) differs from this build's: its groups' sections cannot
// be placed on this build's groups.
var ErrSlotCount = errors.New("fsm: the backup's slot count differs from this build's")

// ErrGroupCount means a restore was asked for another number of groups
// than the backup holds.
var ErrGroupCount = errors.New("fsm: the restore's group count differs from the backup's")

func readGroupParts(b *bolt.Bucket, info *BackupInfo) error {
	pb := b.Bucket(bucketInfoParts)
	switch {
	case info.Groups == 0 && info.Slots == 0 && pb == nil:
		return nil
	case info.Groups == 0 || info.Slots == 0 || pb == nil:
		return errors.New("a backup of several groups needs a group count, a slot count and its parts")
	}
	info.Parts = make([]GroupPart, info.Groups)
	seen := 0
	err := pb.ForEach(func(k, v []byte) error {
		if v == nil || len(k) != 8 || (len(v) != 24 && len(v) != 32) {
			return fmt.Errorf("parts: bad entry %x", k)
		}
		g := binary.BigEndian.Uint64(k)
		if g >= uint64(info.Groups) {
			return fmt.Errorf("parts: group %d of %d", g, info.Groups)
		}
		taken := binary.BigEndian.Uint64(v[16:])
		if taken > math.MaxInt64 {
			return errors.New("parts: time out of range")
		}
		info.Parts[g] = GroupPart{Term: binary.BigEndian.Uint64(v), Index: binary.BigEndian.Uint64(v[8:]), Taken: time.Unix(0, int64(taken)).UTC()}
		if len(v) == 32 {
			info.Parts[g].Protocol = binary.BigEndian.Uint64(v[24:])
		}
		seen++
		return nil
	})
	if err != nil {
		return err
	}
	if seen != info.Groups {
		return fmt.Errorf("parts: %d of %d groups", seen, info.Groups)
	}
	if p := info.Parts[0]; p.Term != info.Term || p.Index != info.Index || !p.Taken.Equal(info.Taken) {
		return errors.New("parts: group 0's part differs from the backup's term, index or time")
	}
	return nil
}

// MergeBackups writes to dst (created, or replaced) the backup of a cluster of
// len(parts) raft groups (at least 2) from its groups' backups: parts[g]
// is group g's, written by WriteBackup on the group's serving leader. It
// checks that the parts belong together: one cluster, group 0 recording
// len(parts) groups (and no other group recording another count), every
// group holding marks only of sections it owns among len(parts) groups
// (seqd.SlotGroup), flake state in group 0 only, and a space's settings
// the same wherever it appears. The result keeps group 0's state and adds
// the other groups' marks and spaces, the largest floor and base of any
// group, and the counts and parts (see above). The parts are not changed.
func MergeBackups(dst string, parts []string) (BackupInfo, error) {
	n := len(parts)
	if n < 2 || n > seqd.MaxGroups {
		return BackupInfo{}, fmt.Errorf("fsm: a backup of several groups needs 2 to %d parts, not %d", seqd.MaxGroups, n)
	}
	sts := make([]*state, n)
	for g, p := range parts {
		db, st, _, err := openBackup(p)
		if err != nil {
			return BackupInfo{}, fmt.Errorf("fsm: group %d's part: %w", g, err)
		}
		db.Close()
		switch {
		case st.backup == nil:
			return BackupInfo{}, fmt.Errorf("fsm: group %d's part records no backup information", g)
		case st.backup.Groups != 0:
			return BackupInfo{}, fmt.Errorf("fsm: group %d's part is a backup of several groups itself", g)
		}
		sts[g] = st
	}
	spaces, err := checkParts(sts)
	if err != nil {
		return BackupInfo{}, err
	}
	if err := copyPath(parts[0], dst); err != nil {
		return BackupInfo{}, fmt.Errorf("fsm: merging backups: %w", err)
	}
	db, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		return BackupInfo{}, fmt.Errorf("fsm: merging backups: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := mergeInto(tx, sts, spaces); err != nil {
			return err
		}
		return tx.Bucket(bucketBackup).Put(keyInfoDigest, contentDigest(tx))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return BackupInfo{}, fmt.Errorf("fsm: merging backups: %w", err)
	}
	db, _, sum, err := openBackup(dst)
	if err != nil {
		return BackupInfo{}, err
	}
	db.Close()
	return sum.Info, nil
}

// checkParts checks that the groups' parts belong together (see
// MergeBackups) and returns every space any of them knows.
func checkParts(sts []*state) (map[string]seqd.Space, error) {
	n := len(sts)
	zero := sts[0]
	if zero.ext.groups != n {
		return nil, fmt.Errorf("fsm: group 0 records %d groups, the backup has %d parts", max(zero.ext.groups, 1), n)
	}
	spaces := map[string]seqd.Space{}
	for g, st := range sts {
		if g > 0 {
			switch {
			case st.backup.ClusterID != "" && st.backup.ClusterID != zero.backup.ClusterID:
				return nil, fmt.Errorf("fsm: group %d's part is of cluster %q, group 0's of %q", g, st.backup.ClusterID, zero.backup.ClusterID)
			case st.ext.groups != 0 && st.ext.groups != n:
				return nil, fmt.Errorf("fsm: group %d records %d groups, the backup has %d parts", g, st.ext.groups, n)
			case len(st.flake.spaces) > 0:
				return nil, fmt.Errorf("fsm: group %d's part holds flake namespaces, which only group 0 decides", g)
			}
		}
		for name, sp := range st.spaces {
			// Group 0 decides a space's step and whether it is deleted;
			// another group may lag it (see group's copySpaces). The
			// section size never changes.
			o, ok := spaces[name]
			if ok && o.SectionSize != sp.SectionSize {
				return nil, fmt.Errorf("fsm: space %q has section size %d in group %d's part, %d in another", name, sp.SectionSize, g, o.SectionSize)
			}
			if !ok {
				spaces[name] = sp
			}
		}
		for name, marks := range st.marks {
			for sec := range marks {
				if owner := seqd.SlotGroup(seqd.SlotOf(name, sec), n); owner != g {
					return nil, fmt.Errorf("fsm: group %d's part holds a mark of section %d of space %q, which group %d owns", g, sec, name, owner)
				}
			}
		}
	}
	return spaces, nil
}

// mergeInto adds to tx (a copy of group 0's part) what the other groups'
// parts hold, and the backup bucket's record of the groups.
func mergeInto(tx *bolt.Tx, sts []*state, spaces map[string]seqd.Space) error {
	zero := sts[0]
	for name, sp := range spaces {
		if _, ok := zero.spaces[name]; ok {
			continue
		}
		if err := putSpace(tx, sp); err != nil {
			return err
		}
	}
	var floor uint64
	bases := map[string]uint64{}
	for _, st := range sts {
		floor = max(floor, st.ext.floor)
		for name, b := range st.bases {
			bases[name] = max(bases[name], b)
		}
	}
	for _, st := range sts[1:] {
		for name, marks := range st.marks {
			b := tx.Bucket(bucketMarks).Bucket([]byte(name))
			for sec, m := range marks {
				if err := b.Put(u64(sec), u64(m)); err != nil {
					return err
				}
			}
		}
	}
	if len(bases) > 0 {
		bb, err := tx.CreateBucketIfNotExists(bucketBases)
		if err != nil {
			return err
		}
		for name, v := range bases {
			if err := bb.Put([]byte(name), u64(v)); err != nil {
				return err
			}
		}
	}
	if floor > 0 {
		if err := tx.Bucket(bucketMeta).Put(keyFloor, u64(floor)); err != nil {
			return err
		}
	}
	ib := tx.Bucket(bucketBackup)
	if err := ib.Put(keyInfoGroups, u64(uint64(len(sts)))); err != nil {
		return err
	}
	if err := ib.Put(keyInfoSlots, u64(seqd.SlotCount)); err != nil {
		return err
	}
	pb, err := ib.CreateBucket(bucketInfoParts)
	if err != nil {
		return err
	}
	for g, st := range sts {
		v := make([]byte, 32)
		binary.BigEndian.PutUint64(v, st.backup.Term)
		binary.BigEndian.PutUint64(v[8:], st.backup.Index)
		binary.BigEndian.PutUint64(v[16:], uint64(max(st.backup.Taken.UnixNano(), 0)))
		binary.BigEndian.PutUint64(v[24:], st.ext.protocol)
		if err := pb.Put(u64(uint64(g)), v); err != nil {
			return err
		}
	}
	return setFormat(tx, generationFormat)
}

// copyPath copies the file at src to dst (replacing it) and syncs it.
func copyPath(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeFile(dst, in)
}
