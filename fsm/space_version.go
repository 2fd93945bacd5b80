package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// Space record versions (protocol 6): a group's record of a space never
// goes back.
//
// Group 0 decides spaces; every other group keeps its own record and
// follows group 0's through several paths (a call's follow, the leader's
// upkeep, the resolver), each of which asks group 0 (or reads this
// server's copy of it) and then proposes an entry. Nothing orders one
// path's question against another's entry, so an entry made from an older
// answer may commit after one made from a newer answer. The record's
// version orders them instead, in the log:
//
//   - Group 0 counts a version in every space record, deleted ones (step
//     0) included, so that a space created again counts on: every create,
//     step change or delete that changes a record gives it its version
//     plus one (FSM.CountVersions; from protocol 6 on, applied alike by
//     every replica of group 0, since the protocol is replicated state).
//     The version is kept in the record, in the file, so snapshots,
//     backups and restores keep it; it is never taken from raft's index.
//   - Every other group sets its record from group 0's with
//     KindFollowSpace, which carries the version it copies (a create from
//     the copy or an answer, a new step, a deletion, which leaves a
//     tombstone even where the group had no record), and applies it only
//     if Supersedes says so: on every replica, whatever order the paths'
//     entries commit in, the record only moves forward. A stale entry is
//     a no-op, answered without error.
//   - Version 0 is a record no versioned decision touched: made before
//     the move to protocol 6, or by an unversioned entry (KindCreateSpace,
//     KindUpdateSpace, KindDeleteSpace in a group other than group 0). An
//     entry of version 0 changes a record of version 0, as every entry did
//     before the versions (group 0's record may still be at 0 too: changes
//     made before the move); once group 0 gave a record a version, no entry
//     of a lower version, and no unversioned one, changes it.
//
// Before the move to protocol 6 no version is written and no
// KindFollowSpace is proposed: the behaviour, and the file, are those of
// protocol 5 (a record decided on an older answer may still commit after
// a newer one, until the next upkeep mends it). Every replica of a group
// applies the move at the same entry, so versions are the same on every
// replica.

// versionProtocol is the protocol of space record versions: group 0
// counts them, and the other groups write KindFollowSpace.
const versionProtocol = 6

// versionFormat is the data format of a file that holds versions, or whose
// server promised protocol 6 (PromiseProtocol). Builds that read format 5
// at most refuse it as written by a newer seqd.
const versionFormat = 6

// keyVersions (format 6) is a bucket inside meta: per space name, its
// record's version (8 bytes, never 0; a record without an entry is at
// version 0). It lives in meta, after the key "format" in bbolt's order,
// so that a build that reads format 5 at most refuses the file by its
// format ("written by a newer seqd") before it meets the bucket.
var keyVersions = []byte("versions")

// SpaceRecord is a group's record of a space: its settings (Step 0: a
// deleted space, which keeps its section size) and the version group 0
// gave them (0: none yet).
type SpaceRecord struct {
	Space   seqd.Space
	Version uint64
}

// Live reports whether the record is of a space that exists (not a
// deletion).
func (r SpaceRecord) Live() bool { return r.Space.Step != 0 }

// Supersedes decides whether an entry that copies group 0's record at
// version may set a group's record own (have: the group has one): a
// higher version does; an equal or lower one does not, except that
// version 0 changes a record at version 0 (unversioned: see above).
func Supersedes(own SpaceRecord, have bool, version uint64) bool {
	switch {
	case !have, version > own.Version:
		return true
	default:
		return version == 0 && own.Version == 0
	}
}

// EncodeFollowSpace encodes setting a group's record of a space to group
// 0's record r (KindFollowSpace; protocol 6).
//
// Layout: 0x08, uvarint len(name), name, uvarint step (0: deleted),
// uvarint section_size, uvarint version.
func EncodeFollowSpace(r SpaceRecord) []byte {
	b := appendString([]byte{byte(KindFollowSpace)}, r.Space.Name)
	b = binary.AppendUvarint(b, r.Space.Step)
	b = binary.AppendUvarint(b, r.Space.SectionSize)
	return binary.AppendUvarint(b, r.Version)
}

func (d *decoder) followSpace(c *Command) {
	c.Space.Name = d.string("space name")
	c.Space.Step = d.uvarint("step")
	c.Space.SectionSize = d.uvarint("section size")
	c.Version = d.uvarint("version")
}

// CountVersions makes this state machine group 0's: from protocol 6 on,
// every create, step change and delete that changes a record gives it
// its version plus one. The group calls it right after Open, before raft
// applies anything, on every replica of group 0.
func (f *FSM) CountVersions() { f.counts.Store(true) }

// Record returns a space's record, a deleted one too, with its version;
// ok is false when this state holds none.
func (f *FSM) Record(name string) (SpaceRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.spaces[name]
	return SpaceRecord{Space: s, Version: f.versions[name]}, ok
}

// stale reports whether an unversioned entry (create, update, delete) of
// a group other than group 0 comes too late for own: version 0 never
// changes a record group 0 gave a version.
func (f *FSM) stale(own SpaceRecord, have bool) bool {
	return !f.counts.Load() && !Supersedes(own, have, 0)
}

// nextVersion is the version a change of own decided by this state takes:
// counted on in group 0 from protocol 6 on, kept as it is otherwise.
func (f *FSM) nextVersion(own SpaceRecord) uint64 {
	f.mu.RLock()
	p := f.ext.protocol
	f.mu.RUnlock()
	if f.counts.Load() && p >= versionProtocol {
		return own.Version + 1
	}
	return own.Version
}

// applyFollowSpace sets this group's record of a space to group 0's r
// when Supersedes allows it; otherwise, or when the record is r already,
// it changes nothing and answers nil. A record that is not a valid space
// or deletion, a deletion of the default space, and another section size
// than this group's record's are refused, changing nothing.
func (f *FSM) applyFollowSpace(l *raft.Log, r SpaceRecord) error {
	if err := validStoredSpace(r.Space); err != nil {
		return err
	}
	if !r.Live() && r.Space.Name == seqd.DefaultSpaceName {
		return fmt.Errorf("%w: the default space cannot be deleted", seqd.ErrInvalidArgument)
	}
	own, have := f.Record(r.Space.Name)
	switch {
	case have && own.Space.SectionSize != r.Space.SectionSize:
		return fmt.Errorf("%w: %q has section size %d here, and an entry copies %d", seqd.ErrSpaceExists, r.Space.Name, own.Space.SectionSize, r.Space.SectionSize)
	case !Supersedes(own, have, r.Version), have && own == r:
		return nil
	}
	return f.storeRecord(l, r)
}

// putVersion writes a record's version (none for 0) and marks the file
// format 6.
func putVersion(tx *bolt.Tx, name string, version uint64) error {
	if version == 0 {
		return nil
	}
	b, err := tx.Bucket(bucketMeta).CreateBucketIfNotExists(keyVersions)
	if err != nil {
		return err
	}
	if err := b.Put([]byte(name), u64(version)); err != nil {
		return err
	}
	return setFormat(tx, versionFormat)
}

// loadVersions reads the versions of a file's records into st.
func loadVersions(tx *bolt.Tx, st *state) error {
	st.versions = make(map[string]uint64)
	b := tx.Bucket(bucketMeta).Bucket(keyVersions)
	if b == nil {
		return nil
	}
	if st.format < versionFormat {
		return fmt.Errorf("meta: space versions in a file that says format %d", st.format)
	}
	return b.ForEach(func(k, v []byte) error {
		switch {
		case v == nil:
			return fmt.Errorf("meta/versions: %q is a bucket", k)
		case len(v) != 8:
			return fmt.Errorf("meta/versions: %q has %d bytes, want 8", k, len(v))
		}
		if _, ok := st.spaces[string(k)]; !ok {
			return fmt.Errorf("meta/versions: %q has no space", k)
		}
		n := binary.BigEndian.Uint64(v)
		if n == 0 {
			return errors.New("meta/versions: version 0 is never written")
		}
		st.versions[string(k)] = n
		return nil
	})
}
