package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

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
// returned, leaving the current state untouched and usable. Otherwise it is
// given the current file's data format if that is newer (keepFormat), and the
// database file is atomically replaced by it and reloaded. Should reopening
// the replaced file fail, Restore returns an error and the FSM is unusable
// (Apply panics). Restore waits for outstanding snapshots to be released.
func (f *FSM) Restore(rc io.ReadCloser) error {
	tmp := restorePath(f.path)
	if err := writeFile(tmp, rc); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsm: restore: %w", err)
	}
	vdb, vst, err := openStore(tmp, false, true)
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
	if err := keepFormat(f.db, tmp, vst.format); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsm: restore: keeping the data format: %w", err)
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
	if fn := f.onRestore.Load(); fn != nil && *fn != nil {
		(*fn)()
	}
	f.spaceChanged("") // any space may have changed
	f.logger.Info("fsm: restored snapshot", slog.Int("spaces", len(st.spaces)), slog.Uint64("applied", st.applied))
	return nil
}

// keepFormat raises the data format of the snapshot file at tmp (which
// says format has) to the format of db, the file it is about to replace:
// an installed snapshot never lowers a file's format. The format is how a
// server's promise of a protocol (PromiseProtocol) keeps older builds
// out, and it must hold whenever raft installs a snapshot taken before
// the promise: one a leader sends, and the server's own latest, which
// raft installs at every start, when nothing in memory remembers the
// promise any more. tmp is marked before it replaces the file, so a crash
// never leaves an unmarked file in its place.
func keepFormat(db *bolt.DB, tmp string, has uint64) error {
	var want uint64
	if err := db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyFormat); len(v) == 8 {
			want = binary.BigEndian.Uint64(v)
		}
		return nil
	}); err != nil {
		return err
	}
	if want <= has {
		return nil
	}
	t, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		return err
	}
	err = t.Update(func(tx *bolt.Tx) error { return setFormat(tx, want) })
	return errors.Join(err, t.Close())
}

// SetRestoreHook sets a function called after every Restore that installed
// a snapshot, from the goroutine that called Restore.
func (f *FSM) SetRestoreHook(fn func()) {
	f.onRestore.Store(&fn)
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
