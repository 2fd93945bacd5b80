package fsm

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

// Apply applies a committed raft log entry. Entries other than
// raft.LogCommand are ignored and answered with nil.
//
// Responses: nil on success (including the idempotent replay of a create);
// otherwise an error value, so callers can test `resp.(error)`: an error
// wrapping ErrInvalidSpace, ErrSpaceExists or ErrUnknownSpace. These rejected
// commands change no state. (A raise rejected for an unknown space may be
// accepted when replayed over a later state in which the space exists; that
// only raises marks, which is always safe for a sequence service.)
//
// Apply dispatches on the command's kind through the registry (commands). A
// kind this build does not know but that carries KindIgnorable (a later
// build's command) is skipped as a no-op, and logged at Warn level the first
// time it is met.
//
// Apply panics, after logging at Error level, if the entry cannot be decoded
// (which includes an unknown kind without KindIgnorable), moves the cluster
// to a protocol this build does not speak, or the state cannot be written to
// disk (or the FSM is closed). Skipping such an entry would
// silently make this replica diverge from the others, so the node must stop
// and be repaired instead.
func (f *FSM) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, err := Decode(l.Data)
	if err != nil {
		f.fatal(l, "cannot decode raft log entry", err)
	}
	var resp any
	c, known := commands[cmd.Kind]
	switch {
	case known:
		resp = c.apply(f, l, cmd)
	case cmd.Kind&KindIgnorable != 0:
		// A later build's kind that this one may skip (Decode refuses an
		// unknown kind without the bit).
		f.skip(l, cmd.Kind)
	default:
		// Decode knows the kind but the registry does not: this build is
		// broken, and skipping the entry could make this replica diverge.
		f.fatal(l, "cannot apply raft log entry", fmt.Errorf("command kind %d is not registered", cmd.Kind))
	}
	if resp == errStopping {
		return resp // not applied: raft is shutting down
	}
	f.applied.Store(l.Index)
	if resp != nil {
		return resp
	}
	return nil
}

func (f *FSM) applyCreate(l *raft.Log, s seqd.Space) error {
	if err := seqd.ValidateSpace(s); err != nil {
		return err
	}
	rec, ok := f.Record(s.Name)
	old := rec.Space
	switch {
	case f.stale(rec, ok):
		return nil
	case ok && old.Step == 0 && old.SectionSize != s.SectionSize:
		return fmt.Errorf("%w: %q was deleted with section size %d, and its marks are per section: create it again with that section size, or use another name", seqd.ErrSpaceExists, old.Name, old.SectionSize)
	case ok && old.Step == 0:
		// Created again after a delete: back with its marks (see
		// space_change.go).
	case ok && old == s:
		return nil
	case ok:
		return seqd.SpaceConflict(old, s)
	}
	return f.storeRecord(l, SpaceRecord{Space: s, Version: f.nextVersion(rec)})
}

// putSpace writes a space's settings (step 0 for a deleted space) and makes
// sure it has a marks bucket.
func putSpace(tx *bolt.Tx, s seqd.Space) error {
	v := make([]byte, spaceValueLen)
	binary.BigEndian.PutUint64(v[:8], s.Step)
	binary.BigEndian.PutUint64(v[8:], s.SectionSize)
	if err := tx.Bucket(bucketSpaces).Put([]byte(s.Name), v); err != nil {
		return err
	}
	_, err := tx.Bucket(bucketMarks).CreateBucketIfNotExists([]byte(s.Name))
	return err
}

func (f *FSM) applyServerSeen(l *raft.Log, id string, index uint64) error {
	if id == "" {
		return errors.New("fsm: empty server id")
	}
	f.mu.RLock()
	old, seen := f.seen[id]
	f.mu.RUnlock()
	if seen && old >= index {
		return nil
	}
	if err := f.write(l, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketServers)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), u64(index))
	}); err != nil {
		return err
	}
	f.mu.Lock()
	f.seen[id] = index
	f.mu.Unlock()
	return nil
}

// applyCluster sets the cluster's ID if it has none (the first ID applied
// wins, so every replica ends with the same one) and raises its protocol;
// from protocol 4 it records the group count (the first one applied wins;
// an entry with another count is refused).
func (f *FSM) applyCluster(l *raft.Log, id string, protocol uint64, groups int) error {
	if protocol > ProtocolVersion {
		// A leader of a newer build moves to its protocol once every server
		// it asked speaks it: this replica was left behind (an older build
		// started on data it had promised, or one added while the move was
		// asked). Refusing the entry and carrying on would hold another
		// protocol than every other replica and follow the newer build's
		// entries by this build's rules: stop, as on a kind it does not know.
		f.fatal(l, "cannot apply raft log entry", fmt.Errorf("the cluster moves to protocol %d, and this build speaks protocol %d or older: run a build that speaks it", protocol, ProtocolVersion))
	}
	if protocol < 2 {
		// Decode accepts any number; a leader never writes these.
		return fmt.Errorf("fsm: protocol %d is not one this build writes (2 to %d)", protocol, ProtocolVersion)
	}
	f.mu.RLock()
	ext := f.ext
	f.mu.RUnlock()
	if ext.clusterID != "" {
		id = ext.clusterID
	}
	protocol = max(protocol, ext.protocol)
	switch {
	case ext.groups != 0 && groups != 0 && groups != ext.groups:
		return fmt.Errorf("fsm: the cluster runs %d raft groups; an entry says %d", ext.groups, groups)
	case ext.groups != 0:
		groups = ext.groups
	}
	if id == ext.clusterID && protocol == ext.protocol && groups == ext.groups {
		return nil
	}
	if err := f.write(l, func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if err := m.Put(keyCluster, []byte(id)); err != nil {
			return err
		}
		if err := m.Put(keyProtocol, u64(protocol)); err != nil {
			return err
		}
		if groups != 0 {
			if err := m.Put(keyGroups, u64(uint64(groups))); err != nil {
				return err
			}
		}
		return setFormat(tx, 2)
	}); err != nil {
		return err
	}
	f.mu.Lock()
	f.ext.clusterID, f.ext.protocol, f.ext.groups = id, protocol, groups
	f.mu.Unlock()
	return nil
}

// applyLease records the lease carried by a renewal; the file is written
// only when the record changes.
func (f *FSM) applyLease(l *raft.Log, rec LeaseRecord) error {
	f.mu.Lock()
	f.handoff.Renewal(l.Term) // a renewal after a release: a leader holds a lease again
	same := f.ext.lease == rec
	f.mu.Unlock()
	if same {
		return nil
	}
	if err := f.write(l, func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		v := make([]byte, 16)
		binary.BigEndian.PutUint64(v[:8], uint64(rec.Lease))
		binary.BigEndian.PutUint64(v[8:], uint64(rec.Margin))
		if err := m.Put(keyLease, v); err != nil {
			return err
		}
		return setFormat(tx, 2)
	}); err != nil {
		return err
	}
	f.mu.Lock()
	f.ext.lease = rec
	f.mu.Unlock()
	return nil
}

type sectionKey struct {
	space   string
	section uint64
}

// applyRaise applies a raise to marks of spaces this state holds, deleted
// ones too (a raise is always safe, and a deleted space keeps its marks):
// stamped with its leader's wall time (KindRaiseAt), held to the raise
// budget (budget.go), or unstamped (KindRaise, stampMs < 0). A floor
// (SetFloor) is a raise like any other, so the budget bounds it too.
//
// An unstamped raise on protocol 5 or later is applied too, never refused:
// its leader applied it (an older build, or this one before the group's move
// to 5 committed) and may be handing out values under it, so a replica that
// refused it would keep a lower mark than values handed out, and a later
// leader would hand them out again. It is charged to the budget at the raise
// clock (budgetUnstamped), so later raises pay for it.
func (f *FSM) applyRaise(l *raft.Log, marks []seqd.Mark, stampMs int64) error {
	// Only this goroutine writes the mirror, so what is read here stays
	// current until the write below.
	f.mu.RLock()
	unstamped := stampMs < 0 && f.ext.protocol >= budgetProtocol
	for _, m := range marks {
		if _, ok := f.spaces[m.Space]; !ok {
			f.mu.RUnlock()
			return fmt.Errorf("%w: %q", seqd.ErrUnknownSpace, m.Space)
		}
	}
	var (
		pending []seqd.Mark
		at      map[sectionKey]int // index into pending, only for duplicates
	)
	for _, m := range marks {
		k := sectionKey{m.Space, m.Section}
		if i, ok := at[k]; ok {
			pending[i].Max = max(pending[i].Max, m.Max)
			continue
		}
		if m.Max <= f.marks[m.Space][m.Section] {
			continue
		}
		if at == nil {
			at = make(map[sectionKey]int, len(marks))
		}
		at[k] = len(pending)
		pending = append(pending, m)
	}
	clockUs := f.ext.raiseClock
	f.mu.RUnlock()
	if len(pending) == 0 {
		// A replay or a lower raise: nothing to write.
		return nil
	}
	slices.SortFunc(pending, func(a, b seqd.Mark) int {
		if c := strings.Compare(a.Space, b.Space); c != 0 {
			return c
		}
		switch {
		case a.Section < b.Section:
			return -1
		case a.Section > b.Section:
			return 1
		}
		return 0
	})
	var budgets []int64
	switch {
	case stampMs >= 0:
		nowUs := stampMs * 1000
		var err error
		if budgets, err = f.checkBudget(pending, nowUs, false); err != nil {
			return err
		}
		clockUs = max(clockUs, nowUs)
	case unstamped:
		budgets = f.budgetUnstamped(l, pending, clockUs)
	}
	if err := f.write(l, func(tx *bolt.Tx) error {
		if budgets != nil {
			if err := putBudgets(tx, pending, budgets, clockUs); err != nil {
				return err
			}
		}
		mb := tx.Bucket(bucketMarks)
		var (
			b     *bolt.Bucket
			bname string
		)
		for _, m := range pending {
			if b == nil || bname != m.Space {
				if b = mb.Bucket([]byte(m.Space)); b == nil {
					return fmt.Errorf("marks bucket of space %q is missing", m.Space)
				}
				bname = m.Space
			}
			if err := b.Put(u64(m.Section), u64(m.Max)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	f.mu.Lock()
	for _, m := range pending {
		f.marks[m.Space][m.Section] = m.Max
	}
	f.ext.raiseClock = clockUs
	f.mu.Unlock()
	return nil
}

// write runs fn and records l.Index as the applied index in one bbolt
// transaction. It panics (via fatal) if the transaction fails, except when
// the file system is full: then it retries, with a growing pause, until the
// write succeeds (the FSM goroutine, and with it this replica's applying,
// stalls meanwhile; raft keeps the entries in its log), reporting the state
// through SetDiskHook. It returns errStopping, without writing, if Stop is
// called while it waits.
func (f *FSM) write(l *raft.Log, fn func(tx *bolt.Tx) error) error {
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	pause := 50 * time.Millisecond
	for {
		if f.db == nil {
			f.fatal(l, "cannot apply raft log entry", f.broken)
		}
		err := f.db.Update(func(tx *bolt.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(keyApplied, u64(l.Index))
		})
		if err == nil {
			f.reportDisk(false, nil)
			return nil
		}
		if !IsDiskFull(err) {
			f.fatal(l, "cannot persist raft log entry", err)
		}
		f.reportDisk(true, err)
		f.dbMu.Unlock()
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-f.stopping:
			t.Stop()
			f.dbMu.Lock()
			return errStopping
		}
		f.dbMu.Lock()
		pause = min(2*pause, 2*time.Second)
	}
}

// errStopping answers an entry that could not be applied because the FSM
// was stopped while waiting for disk space.
var errStopping = errors.New("fsm: stopped while waiting for disk space")

// IsDiskFull reports whether err says the file system is out of space (or
// over quota). bbolt does not always keep the error chain, so the message
// is checked as well.
func IsDiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// SetDiskHook sets a function called when a write finds the file system
// full (full = true, with the error) and when a write succeeds again after
// that (full = false). It is called from the goroutine applying entries.
func (f *FSM) SetDiskHook(fn func(full bool, err error)) {
	f.diskMu.Lock()
	f.onDisk = fn
	f.diskMu.Unlock()
}

func (f *FSM) reportDisk(full bool, err error) {
	f.diskMu.Lock()
	changed := f.diskFull != full
	f.diskFull = full
	hook := f.onDisk
	f.diskMu.Unlock()
	if !changed {
		return
	}
	if full {
		f.logger.Error("fsm: the file system is full; applying waits until a write succeeds", slog.String("path", f.path), slog.Any("error", err))
	} else {
		f.logger.Info("fsm: writes succeed again", slog.String("path", f.path))
	}
	if hook != nil {
		hook(full, err)
	}
}

// Stop makes a write that waits for disk space give up (its entry is
// answered with an error and not applied), so that raft can shut down. Call
// it before shutting raft down; the FSM must not be used for applying
// afterwards. Stop is idempotent.
func (f *FSM) Stop() {
	f.stopOnce.Do(func() { close(f.stopping) })
}

// skip logs, the first time this FSM meets kind, that it skips entry l of an
// ignorable kind it does not know. Only Apply's goroutine calls it.
func (f *FSM) skip(l *raft.Log, kind Kind) {
	if f.skipped[kind] {
		return
	}
	f.skipped[kind] = true
	f.logger.Warn("fsm: skipping an ignorable command of a kind this build does not know; a later seqd wrote it: upgrade this server",
		slog.Int("kind", int(kind)),
		slog.Uint64("index", l.Index),
		slog.Uint64("term", l.Term),
	)
}

// fatal logs the failure to apply l and panics.
func (f *FSM) fatal(l *raft.Log, what string, err error) {
	head := l.Data
	if len(head) > 64 {
		head = head[:64]
	}
	f.logger.Error("fsm: "+what+"; stopping the node to avoid diverging from the cluster",
		slog.Uint64("index", l.Index),
		slog.Uint64("term", l.Term),
		slog.Any("error", err),
		slog.Int("len", len(l.Data)),
		slog.String("data_hex", hex.EncodeToString(head)),
	)
	panic(fmt.Sprintf("fsm: %s at raft index %d (term %d): %v; refusing to skip it, since that would make this replica diverge", what, l.Index, l.Term, err))
}
