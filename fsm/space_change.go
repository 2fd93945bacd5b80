package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// Space changes: a space's step may change, and a space may be deleted,
// after it was created. Its section size never changes, not even across a
// delete and a later create under the same name: a key's section, and so
// the mark that covers its values, is key / section size.
//
// A deleted space keeps its record, with step 0, and its marks (and base):
// it is left out of Space and Spaces, so that calls for it fail as for an
// unknown space, and raises of it are still applied (a raise is always
// safe). Creating it again brings it back with the new step, above every
// value it ever handed out. A file holding a deleted space is refused by
// builds before this one (their check of a space's step), never misread.
//
// Both commands are ignorable: a build that does not know them skips
// them, and keeps the space as it was, with the same marks, so that no
// value is handed out twice whichever build leads. Its replica then lists
// a space the others deleted, or keeps the old step; so a leader writes
// them only once every server of the group's configuration says it
// applies them (cluster's gate, see Node.KindsReady), and the kind bit
// guards only what slips past that check (a server started on an older
// build in between).
//
// From protocol 6 these kinds are group 0's decisions, which count the
// record's version on (space_version.go); in any other group they are
// copies of group 0's record without a version, which no longer change a
// record group 0 gave a version: there, a group follows with
// KindFollowSpace.

// EncodeUpdateSpace encodes a change of space name's step.
//
// Layout: 0x84, uvarint len(name), name, uvarint step.
func EncodeUpdateSpace(name string, step uint64) []byte {
	b := appendString([]byte{byte(KindUpdateSpace)}, name)
	return binary.AppendUvarint(b, step)
}

// EncodeDeleteSpace encodes the deletion of space name.
//
// Layout: 0x85, uvarint len(name), name.
func EncodeDeleteSpace(name string) []byte {
	return appendString([]byte{byte(KindDeleteSpace)}, name)
}

// validStoredSpace checks a space record read from a file: a space, or a
// deleted one (step 0, a valid name and section size).
func validStoredSpace(s seqd.Space) error {
	if s.Step == 0 {
		s.Step = 1 // a deleted space: the rest must still be valid
	}
	return seqd.ValidateSpace(s)
}

// applyUpdateSpace sets an existing space's step. An unknown or deleted
// space is refused with seqd.ErrUnknownSpace, a step out of range with
// seqd.ErrInvalidSpace; neither changes anything.
func (f *FSM) applyUpdateSpace(l *raft.Log, name string, step uint64) error {
	rec, ok := f.Record(name)
	if f.stale(rec, ok) {
		return nil
	}
	old := rec.Space
	if !ok || old.Step == 0 {
		return fmt.Errorf("%w %q", seqd.ErrUnknownSpace, name)
	}
	s := old
	s.Step = step
	if err := seqd.ValidateSpace(s); err != nil {
		return err
	}
	if s == old {
		return nil
	}
	return f.storeRecord(l, SpaceRecord{Space: s, Version: f.nextVersion(rec)})
}

// applyDeleteSpace deletes a space: its record keeps the section size with
// step 0, its marks stay. Deleting a deleted space changes nothing; an
// unknown space is refused with seqd.ErrUnknownSpace, and the default space
// with seqd.ErrInvalidArgument (every leader of group 0 creates it).
func (f *FSM) applyDeleteSpace(l *raft.Log, name string) error {
	if name == seqd.DefaultSpaceName {
		return fmt.Errorf("%w: the default space cannot be deleted", seqd.ErrInvalidArgument)
	}
	rec, ok := f.Record(name)
	switch {
	case f.stale(rec, ok):
		return nil
	case !ok:
		return fmt.Errorf("%w %q", seqd.ErrUnknownSpace, name)
	case rec.Space.Step == 0:
		return nil
	}
	s := rec.Space
	s.Step = 0
	return f.storeRecord(l, SpaceRecord{Space: s, Version: f.nextVersion(rec)})
}

// storeRecord writes a space's record (a deleted one with step 0) and its
// version, keeping its marks, and tells the space hook.
func (f *FSM) storeRecord(l *raft.Log, r SpaceRecord) error {
	s := r.Space
	if err := f.write(l, func(tx *bolt.Tx) error {
		if err := putSpace(tx, s); err != nil {
			return err
		}
		return putVersion(tx, s.Name, r.Version)
	}); err != nil {
		return err
	}
	f.mu.Lock()
	f.spaces[s.Name] = s
	if r.Version != 0 {
		f.versions[s.Name] = r.Version
	}
	if f.marks[s.Name] == nil {
		f.marks[s.Name] = make(map[uint64]uint64)
	}
	f.mu.Unlock()
	f.spaceChanged(s.Name)
	return nil
}

// SetSpaceHook sets a function called after a space was created, changed
// or deleted (with its name), and after a snapshot was installed (with ""),
// from the goroutine applying entries: an allocator that cached a space's
// settings reads them again (see sections.Allocator.SpaceChanged).
func (f *FSM) SetSpaceHook(fn func(name string)) {
	f.onSpace.Store(&fn)
}

func (f *FSM) spaceChanged(name string) {
	if fn := f.onSpace.Load(); fn != nil && *fn != nil {
		(*fn)(name)
	}
}

func (d *decoder) updateSpace(c *Command) {
	c.Space.Name = d.string("space name")
	c.Space.Step = d.uvarint("step")
}

func (d *decoder) deleteSpace(c *Command) {
	c.Space.Name = d.string("space name")
}
