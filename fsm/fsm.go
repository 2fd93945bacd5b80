// Package fsm is the replicated state machine of seqd.
//
// For every space (a named family of sequences) it persists, per section
// (section = key / SectionSize), a high-water mark max: no value above max has
// ever been handed out for a key of that section. The leader hands values out
// of memory and raises max through raft entries before crossing it.
//
// All state lives in a bbolt file and is mirrored in memory, so that reads
// (Space, Spaces, Max, AppliedIndex) never touch disk. Applying an entry is
// idempotent: a create of an existing identical space is a no-op, and raises
// carry absolute values applied as max = maximum(old, new), so replaying any
// entries, in any order and any number of times, yields the same state.
package fsm

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/seqd/seqd"
)

var (
	bucketSpaces = []byte("spaces")
	bucketMarks  = []byte("marks")
	bucketMeta   = []byte("meta")
	// bucketBases (optional) holds a floor per space: every section's
	// high-water mark is at least its space's base. Only a restore from a
	// backup sets it (see PrepareRestore).
	bucketBases = []byte("bases")
	// bucketServers (optional) lists the servers seen holding raft state,
	// each with the highest raft index recorded for it.
	bucketServers = []byte("servers")
	// bucketBackup (format 2, backup files only) describes where and when a
	// backup was taken (see BackupInfo). PrepareRestore removes it.
	bucketBackup = []byte("backup")
	keyApplied   = []byte("applied")
	// keyFormat (in meta) is the data format version. A file without it is
	// format 1 (written before the key existed). A file of a later format
	// than formatVersion is refused, so that an older binary never misreads
	// what a newer one wrote (nor a snapshot a newer leader sent).
	keyFormat = []byte("format")
	// Format 2 keys in meta, each written only once its state exists (so a
	// file stays format 1, readable by the first release, until then):
	// the cluster's ID, its replicated-command protocol, a floor under every
	// section of every space (set by a restore), and the lease record.
	keyCluster  = []byte("cluster")
	keyProtocol = []byte("protocol")
	keyFloor    = []byte("floor")
	keyLease    = []byte("lease")
)

// formatVersion is the newest data format this package reads. Files are
// written as format 1 until they hold format 2 state (a cluster ID, a
// protocol, a floor, a lease record, backup information), and as format 2
// from then on; the first release reads format 1 only and refuses format 2
// with "written by a newer seqd".
const formatVersion = 2

// baseFormat is the format a new file is written in.
const baseFormat = 1

var errClosed = errors.New("fsm: closed")

// openTimeout bounds how long Open and Restore wait for the bbolt file lock.
const openTimeout = 1 * time.Second

// spaceValueLen is the length of a value in the "spaces" bucket: step and
// section size as 8-byte big-endian integers.
const spaceValueLen = 16

// FSM is the seqd raft.FSM backed by a bbolt file. Apply, Snapshot and Restore
// must be called from a single goroutine (raft's FSM goroutine); the read
// methods may be called from any goroutine at any time.
type FSM struct {
	path   string
	logger *slog.Logger

	dbMu   sync.Mutex // guards db and broken
	db     *bolt.DB
	broken error // why db is nil

	applied atomic.Uint64

	mu     sync.RWMutex // guards the in-memory mirror below
	spaces map[string]seqd.Space
	marks  map[string]map[uint64]uint64
	bases  map[string]uint64
	seen   map[string]uint64
	ext    extState

	diskMu   sync.Mutex
	onDisk   func(full bool, err error)
	diskFull bool
	stopping chan struct{}
	stopOnce sync.Once
}

// extState is the format 2 part of the state.
type extState struct {
	clusterID string
	protocol  uint64
	floor     uint64
	lease     LeaseRecord
}

// LeaseRecord is the lease length and margin carried by the last lease
// renewal applied (zero if none was).
type LeaseRecord struct {
	Lease, Margin time.Duration
}

// state is a loaded (and validated) copy of the database contents.
type state struct {
	spaces  map[string]seqd.Space
	marks   map[string]map[uint64]uint64
	bases   map[string]uint64
	seen    map[string]uint64
	ext     extState
	backup  *BackupInfo
	format  uint64
	applied uint64
}

// Open opens the bbolt file at path, creating and initializing it if it does
// not exist or is empty, and loads its contents into memory. A file that is
// not a bbolt database, is corrupt, holds unexpected contents, or is locked by
// another process (for more than one second) yields an error; Open never
// panics. logger may be nil, in which case slog.Default() is used.
func Open(path string, logger *slog.Logger) (*FSM, error) {
	if logger == nil {
		logger = slog.Default()
	}
	// A leftover from a Restore interrupted by a crash is never needed.
	if err := os.Remove(restorePath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("fsm: remove stale restore file: %w", err)
	}
	db, st, err := openStore(path, true, false)
	if err != nil {
		return nil, err
	}
	f := &FSM{path: path, logger: logger, db: db, stopping: make(chan struct{})}
	f.install(st)
	return f, nil
}

// Close closes the database. Reads keep answering from the in-memory mirror;
// Apply after Close panics. Close waits for any snapshot returned by Snapshot
// to be released. Closing twice is a no-op.
func (f *FSM) Close() error {
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db, f.broken = nil, errClosed
	if err != nil {
		return fmt.Errorf("fsm: close %s: %w", f.path, err)
	}
	return nil
}

// install replaces the in-memory mirror with st.
func (f *FSM) install(st *state) {
	f.mu.Lock()
	f.spaces, f.marks, f.bases, f.seen, f.ext = st.spaces, st.marks, st.bases, st.seen, st.ext
	f.applied.Store(st.applied)
	f.mu.Unlock()
}

// Space returns the settings of the named space.
func (f *FSM) Space(name string) (seqd.Space, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.spaces[name]
	return s, ok
}

// Spaces returns all spaces sorted by name.
func (f *FSM) Spaces() []seqd.Space {
	f.mu.RLock()
	out := make([]seqd.Space, 0, len(f.spaces))
	for _, s := range f.spaces {
		out = append(out, s)
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b seqd.Space) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Max returns the high-water mark of the given section: the largest value
// raised for it, or its space's base or the cluster-wide floor if larger (a
// restored backup sets both), or 0 if none exists. The floor covers spaces
// created after a restore too. The value returned is always durable: the
// mirror is updated only after the bbolt transaction has committed.
func (f *FSM) Max(space string, section uint64) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return max(f.marks[space][section], f.bases[space], f.ext.floor)
}

// ClusterID returns the cluster's ID, or "" while it has none (a cluster
// created by the first release, before its upgrade to protocol 2).
func (f *FSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ext.clusterID
}

// Protocol returns the cluster's replicated-command protocol: 1 until a
// KindCluster entry raised it.
func (f *FSM) Protocol() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return max(f.ext.protocol, 1)
}

// Floor returns the cluster-wide floor under every section's high-water
// mark (0 unless the cluster was restored from a backup).
func (f *FSM) Floor() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ext.floor
}

// LeaseRecord returns the lease length and margin of the last lease
// renewal applied, and false if no renewal carried one.
func (f *FSM) LeaseRecord() (LeaseRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ext.lease, f.ext.lease.Lease > 0
}

// AppliedIndex returns the index of the last raft log entry applied, or 0 if
// none was. After Open or Restore it is the index of the last entry that
// changed state, since entries that change nothing (such as noops) are not
// written to disk.
func (f *FSM) AppliedIndex() uint64 {
	return f.applied.Load()
}

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
// Apply panics, after logging at Error level, if the entry cannot be decoded
// or the state cannot be written to disk (or the FSM is closed). Skipping such
// an entry would silently make this replica diverge from the others, so the
// node must stop and be repaired instead.
func (f *FSM) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, err := Decode(l.Data)
	if err != nil {
		f.fatal(l, "cannot decode raft log entry", err)
	}
	var resp error
	switch cmd.Kind {
	case KindCreateSpace:
		resp = f.applyCreate(l, cmd.Space)
	case KindRaise:
		resp = f.applyRaise(l, cmd.Marks)
	case KindNoop:
	case KindServerSeen:
		resp = f.applyServerSeen(l, cmd.Server, cmd.Index)
	case KindCluster:
		resp = f.applyCluster(l, cmd.ClusterID, cmd.Protocol)
	case KindLease:
		resp = f.applyLease(l, LeaseRecord{Lease: cmd.Lease, Margin: cmd.LeaseMargin})
	default:
		// An ignorable kind of a later build (Decode refuses others).
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
	f.mu.RLock()
	old, ok := f.spaces[s.Name]
	f.mu.RUnlock()
	if ok {
		if old == s {
			return nil
		}
		return fmt.Errorf("%w: %q has step %d and section size %d", seqd.ErrSpaceExists, old.Name, old.Step, old.SectionSize)
	}
	if err := f.write(l, func(tx *bolt.Tx) error {
		v := make([]byte, spaceValueLen)
		binary.BigEndian.PutUint64(v[:8], s.Step)
		binary.BigEndian.PutUint64(v[8:], s.SectionSize)
		if err := tx.Bucket(bucketSpaces).Put([]byte(s.Name), v); err != nil {
			return err
		}
		_, err := tx.Bucket(bucketMarks).CreateBucketIfNotExists([]byte(s.Name))
		return err
	}); err != nil {
		return err
	}
	f.mu.Lock()
	f.spaces[s.Name] = s
	f.marks[s.Name] = make(map[uint64]uint64)
	f.mu.Unlock()
	return nil
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
// wins, so every replica ends with the same one) and raises its protocol.
func (f *FSM) applyCluster(l *raft.Log, id string, protocol uint64) error {
	if protocol < 2 || protocol > ProtocolVersion {
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
	if id == ext.clusterID && protocol == ext.protocol {
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
		return m.Put(keyFormat, u64(2))
	}); err != nil {
		return err
	}
	f.mu.Lock()
	f.ext.clusterID, f.ext.protocol = id, protocol
	f.mu.Unlock()
	return nil
}

// applyLease records the lease carried by a renewal; the file is written
// only when the record changes.
func (f *FSM) applyLease(l *raft.Log, rec LeaseRecord) error {
	f.mu.RLock()
	same := f.ext.lease == rec
	f.mu.RUnlock()
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
		return m.Put(keyFormat, u64(2))
	}); err != nil {
		return err
	}
	f.mu.Lock()
	f.ext.lease = rec
	f.mu.Unlock()
	return nil
}

// ServerSeen reports whether server id was recorded holding raft state, and
// the highest raft index recorded for it.
func (f *FSM) ServerSeen(id string) (seen bool, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	index, seen = f.seen[id]
	return seen, index
}

type sectionKey struct {
	space   string
	section uint64
}

func (f *FSM) applyRaise(l *raft.Log, marks []seqd.Mark) error {
	// Only this goroutine writes the mirror, so what is read here stays
	// current until the write below.
	f.mu.RLock()
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
	if err := f.write(l, func(tx *bolt.Tx) error {
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

// Snapshot captures the current state by beginning a bbolt read transaction.
// It is cheap; the copying happens in Persist, which may run concurrently with
// later Apply calls and never sees their effects. Note that bbolt cannot grow
// its memory map while a read transaction is open, so an Apply that needs to
// grow it waits until the snapshot is released.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	if f.db == nil {
		return nil, f.broken
	}
	tx, err := f.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("fsm: snapshot: %w", err)
	}
	return &snapshot{tx: tx}, nil
}

type snapshot struct {
	tx   *bolt.Tx
	once sync.Once
}

// Persist writes the whole database as of the snapshot to sink and closes it,
// or cancels the sink on error.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.tx.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("fsm: persist snapshot: close sink: %w", err)
	}
	return nil
}

// Release ends the snapshot's read transaction. It may be called more than
// once.
func (s *snapshot) Release() {
	s.once.Do(func() { _ = s.tx.Rollback() })
}

func restorePath(path string) string { return path + ".restore" }

// Restore replaces the whole state with the snapshot read from rc (as written
// by Persist). rc is read to the end but not closed; raft closes it.
//
// The snapshot is first written to a temporary file next to the database and
// fully validated (bbolt consistency check, expected buckets, value lengths,
// valid spaces). If that fails the temporary file is deleted and an error is
// returned, leaving the current state untouched and usable. Otherwise the
// database file is atomically replaced by it and reloaded. Should reopening
// the replaced file fail, Restore returns an error and the FSM is unusable
// (Apply panics). Restore waits for outstanding snapshots to be released.
func (f *FSM) Restore(rc io.ReadCloser) error {
	tmp := restorePath(f.path)
	if err := writeFile(tmp, rc); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsm: restore: %w", err)
	}
	vdb, _, err := openStore(tmp, false, true)
	if err == nil {
		err = vdb.Close()
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsm: restore: invalid snapshot: %w", err)
	}

	f.dbMu.Lock()
	defer f.dbMu.Unlock()
	if f.db == nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsm: restore: %w", f.broken)
	}
	if err := f.db.Close(); err != nil {
		f.logger.Warn("fsm: restore: closing the old database failed", slog.Any("error", err))
	}
	f.db = nil
	if err := os.Rename(tmp, f.path); err != nil {
		_ = os.Remove(tmp)
		// The old file is still in place: go back to it.
		db, _, oerr := openStore(f.path, false, false)
		if oerr != nil {
			f.broken = fmt.Errorf("fsm: restore: reopen after failed rename: %w", oerr)
			return errors.Join(fmt.Errorf("fsm: restore: %w", err), f.broken)
		}
		f.db = db
		return fmt.Errorf("fsm: restore: %w", err)
	}
	if err := syncDir(filepath.Dir(f.path)); err != nil {
		f.logger.Warn("fsm: restore: fsync of directory failed", slog.Any("error", err))
	}
	db, st, err := openStore(f.path, false, false)
	if err != nil {
		f.broken = fmt.Errorf("fsm: restore: reopen: %w", err)
		return f.broken
	}
	f.db = db
	f.install(st)
	f.logger.Info("fsm: restored snapshot", slog.Int("spaces", len(st.spaces)), slog.Uint64("applied", st.applied))
	return nil
}

// writeFile copies r into a new file at path and fsyncs it.
func writeFile(path string, r io.Reader) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(fh, r); err != nil {
		_ = fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		_ = fh.Close()
		return err
	}
	return fh.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// openStore opens the bbolt file at path and loads (thereby validating) its
// contents. If initEmpty is set, a database without any bucket is initialized
// first; otherwise it is rejected. If check is set, bbolt's full consistency
// check runs as well. Corruption that makes bbolt panic or fault while opening
// or loading is turned into an error.
func openStore(path string, initEmpty, check bool) (db *bolt.DB, st *state, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fsm: open %s: database is corrupt: %v", path, r)
		}
		if err != nil && db != nil {
			_ = db.Close()
			db, st = nil, nil
		}
	}()
	if err = precheck(path); err != nil {
		return nil, nil, fmt.Errorf("fsm: open %s: %w", path, err)
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		return nil, nil, fmt.Errorf("fsm: open %s: %w", path, err)
	}
	if initEmpty {
		if err = initBuckets(db); err != nil {
			return db, nil, fmt.Errorf("fsm: open %s: initialize: %w", path, err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return db, nil, fmt.Errorf("fsm: open %s: %w", path, err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		if err := checkSize(tx, fi.Size()); err != nil {
			return err
		}
		var lerr error
		if st, lerr = loadState(tx); lerr != nil {
			return lerr
		}
		if check {
			for cerr := range tx.Check() {
				lerr = errors.Join(lerr, cerr)
			}
		}
		return lerr
	})
	if err != nil {
		return db, nil, fmt.Errorf("fsm: open %s: %w", path, err)
	}
	return db, st, nil
}

// precheck opens an existing, non-empty file at path read-only, which reads
// only the (checksummed) meta pages, and verifies that the file holds every
// page the meta page counts. Opening a truncated file read-write would
// otherwise fault while loading the freelist, inside bolt.Open, leaking the
// half-opened database.
func precheck(path string) (err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout, ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	return db.View(func(tx *bolt.Tx) error { return checkSize(tx, fi.Size()) })
}

func checkSize(tx *bolt.Tx, fileSize int64) error {
	if tx.Size() > fileSize {
		return fmt.Errorf("file is truncated: %d bytes, database needs %d", fileSize, tx.Size())
	}
	return nil
}

// initBuckets creates the buckets in a database that has none.
func initBuckets(db *bolt.DB) error {
	var empty bool
	if err := db.View(func(tx *bolt.Tx) error {
		k, _ := tx.Cursor().First()
		empty = k == nil
		return nil
	}); err != nil || !empty {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketSpaces, bucketMarks, bucketMeta} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyFormat, u64(baseFormat))
	})
}

// loadState reads and validates the whole database.
func loadState(tx *bolt.Tx) (*state, error) {
	st := &state{
		spaces: make(map[string]seqd.Space),
		marks:  make(map[string]map[uint64]uint64),
		bases:  make(map[string]uint64),
		seen:   make(map[string]uint64),
	}
	if err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		switch string(name) {
		case string(bucketSpaces), string(bucketMarks), string(bucketMeta), string(bucketBases), string(bucketServers), string(bucketBackup):
			if b == nil {
				return fmt.Errorf("top-level key %q is not a bucket", name)
			}
			return nil
		}
		return fmt.Errorf("unexpected top-level bucket %q", name)
	}); err != nil {
		return nil, err
	}
	spaces, marks, meta := tx.Bucket(bucketSpaces), tx.Bucket(bucketMarks), tx.Bucket(bucketMeta)
	switch {
	case spaces == nil:
		return nil, errors.New(`bucket "spaces" is missing`)
	case marks == nil:
		return nil, errors.New(`bucket "marks" is missing`)
	case meta == nil:
		return nil, errors.New(`bucket "meta" is missing`)
	}

	if err := spaces.ForEach(func(k, v []byte) error {
		if v == nil {
			return fmt.Errorf("spaces: %q is a bucket", k)
		}
		if len(v) != spaceValueLen {
			return fmt.Errorf("spaces: %q: value has %d bytes, want %d", k, len(v), spaceValueLen)
		}
		s := seqd.Space{
			Name:        string(k),
			Step:        binary.BigEndian.Uint64(v[:8]),
			SectionSize: binary.BigEndian.Uint64(v[8:]),
		}
		if err := seqd.ValidateSpace(s); err != nil {
			return fmt.Errorf("spaces: %w", err)
		}
		st.spaces[s.Name] = s
		return nil
	}); err != nil {
		return nil, err
	}

	if err := marks.ForEach(func(k, v []byte) error {
		if v != nil {
			return fmt.Errorf("marks: %q is not a bucket", k)
		}
		name := string(k)
		if _, ok := st.spaces[name]; !ok {
			return fmt.Errorf("marks: bucket %q has no space", k)
		}
		m := make(map[uint64]uint64)
		if err := marks.Bucket(k).ForEach(func(sk, sv []byte) error {
			if sv == nil {
				return fmt.Errorf("marks/%s: unexpected bucket %x", name, sk)
			}
			if len(sk) != 8 || len(sv) != 8 {
				return fmt.Errorf("marks/%s: entry has %d-byte key and %d-byte value, want 8 and 8", name, len(sk), len(sv))
			}
			m[binary.BigEndian.Uint64(sk)] = binary.BigEndian.Uint64(sv)
			return nil
		}); err != nil {
			return err
		}
		st.marks[name] = m
		return nil
	}); err != nil {
		return nil, err
	}
	for name := range st.spaces {
		if _, ok := st.marks[name]; !ok {
			return nil, fmt.Errorf("marks: bucket of space %q is missing", name)
		}
	}

	if servers := tx.Bucket(bucketServers); servers != nil {
		if err := servers.ForEach(func(k, v []byte) error {
			if v == nil || len(k) == 0 || len(v) != 8 {
				return fmt.Errorf("servers: bad entry %q", k)
			}
			st.seen[string(k)] = binary.BigEndian.Uint64(v)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if bases := tx.Bucket(bucketBases); bases != nil {
		if err := bases.ForEach(func(k, v []byte) error {
			if _, ok := st.spaces[string(k)]; !ok {
				return fmt.Errorf("bases: %q has no space", k)
			}
			if v == nil || len(v) != 8 {
				return fmt.Errorf("bases: %q: want an 8-byte value", k)
			}
			st.bases[string(k)] = binary.BigEndian.Uint64(v)
			return nil
		}); err != nil {
			return nil, err
		}
	}

	st.format = 1
	if err := meta.ForEach(func(k, v []byte) error {
		switch string(k) {
		case string(keyCluster):
			if len(v) == 0 || len(v) > maxClusterIDLen {
				return fmt.Errorf("meta: cluster id of %d bytes", len(v))
			}
			st.ext.clusterID = string(v)
			return nil
		case string(keyLease):
			if len(v) != 16 {
				return fmt.Errorf("meta: lease has %d bytes, want 16", len(v))
			}
			l, m := binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:])
			if l > math.MaxInt64 || m > math.MaxInt64 {
				return errors.New("meta: lease overflows a duration")
			}
			st.ext.lease = LeaseRecord{Lease: time.Duration(l), Margin: time.Duration(m)}
			return nil
		case string(keyApplied), string(keyFormat), string(keyProtocol), string(keyFloor):
		default:
			return fmt.Errorf("meta: unexpected key %q", k)
		}
		if len(v) != 8 {
			return fmt.Errorf("meta: %s has %d bytes, want 8", k, len(v))
		}
		n := binary.BigEndian.Uint64(v)
		switch string(k) {
		case string(keyFormat):
			switch {
			case n == 0:
				return errors.New("meta: data format 0 is not valid")
			case n > formatVersion:
				return fmt.Errorf("data format %d was written by a newer seqd; this one reads format %d or older: run the newer version", n, formatVersion)
			}
			st.format = n
		case string(keyProtocol):
			if n > ProtocolVersion {
				return fmt.Errorf("replicated-command protocol %d was written by a newer seqd; this one speaks protocol %d or older: run the newer version", n, ProtocolVersion)
			}
			st.ext.protocol = n
		case string(keyFloor):
			if n > math.MaxInt64 {
				return errors.New("meta: floor above 2^63-1")
			}
			st.ext.floor = n
		default:
			st.applied = n
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if b := tx.Bucket(bucketBackup); b != nil {
		info, err := readBackupInfo(b)
		if err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
		st.backup = &info
	}
	if st.format < 2 && (st.ext != extState{} || st.backup != nil) {
		return nil, errors.New("meta: format 2 state in a file that says format 1")
	}
	return st, nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}
