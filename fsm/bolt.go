package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"time"

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
	keyGroups   = []byte("groups")
	keyLease    = []byte("lease")
	// Format 5 keys in meta (see generationFormat): the lineage and the
	// generation number of a restored cluster (seqd.Generation). A cluster
	// that bootstrapped has neither: its lineage is its cluster ID and its
	// number 0.
	keyLineage    = []byte("lineage")
	keyGeneration = []byte("generation")
)

// generationFormat is the data format of a file that records a
// generation (a restored cluster's state, its snapshots and backups).
// Builds that read format 4 at most refuse it as written by a newer seqd.
const generationFormat = 5

// formatVersion is the newest data format this package reads. Files are
// written as format 1 until they hold format 2 state (a cluster ID, a
// protocol, a floor, a lease record, backup information), and as format 2
// from then on; the first release reads format 1 only and refuses format 2
// with "written by a newer seqd". Format 3 adds the flake bucket (see
// flakeFormat): a file is written as format 3 once it holds flake state,
// and builds that read format 2 at most refuse it the same way. Format 4
// is a backup of several raft groups (see groupsBackupFormat), never a
// group's own state; builds that read format 3 at most refuse it. Format 5
// records a generation (generationFormat), in a group's state or a backup.
// Format 6 holds space record versions, or was promised protocol 6
// (versionFormat).
const formatVersion = versionFormat

// baseFormat is the format a new file is written in.
const baseFormat = 1

// openTimeout bounds how long Open and Restore wait for the bbolt file lock.
const openTimeout = 1 * time.Second

// spaceValueLen is the length of a value in the "spaces" bucket: step and
// section size as 8-byte big-endian integers.
const spaceValueLen = 16

// state is a loaded (and validated) copy of the database contents.
type state struct {
	spaces   map[string]seqd.Space
	versions map[string]uint64
	marks    map[string]map[uint64]uint64
	bases    map[string]uint64
	seen     map[string]uint64
	ext      extState
	flake    flakeState
	backup   *BackupInfo
	format   uint64
	applied  uint64
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
		case string(bucketSpaces), string(bucketMarks), string(bucketMeta), string(bucketBases), string(bucketServers), string(bucketBackup), string(bucketFlake), string(bucketBudget):
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
		if err := validStoredSpace(s); err != nil {
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
		case string(keyLineage):
			if len(v) == 0 || len(v) > maxClusterIDLen {
				return fmt.Errorf("meta: lineage of %d bytes", len(v))
			}
			st.ext.lineage = string(v)
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
		case string(keyVersions):
			if v != nil {
				return errors.New("meta: versions is not a bucket")
			}
			return nil // loadVersions
		case string(keyApplied), string(keyFormat), string(keyProtocol), string(keyFloor), string(keyGroups), string(keyGeneration), string(keyRaiseClock):
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
		case string(keyGroups):
			if n < 1 || n > seqd.MaxGroups {
				return fmt.Errorf("meta: group count %d", n)
			}
			st.ext.groups = int(n)
		case string(keyFloor):
			if n > math.MaxInt64 {
				return errors.New("meta: floor above 2^63-1")
			}
			st.ext.floor = n
		case string(keyGeneration):
			st.ext.generation = n
		case string(keyRaiseClock):
			if n > math.MaxInt64 {
				return errors.New("meta: raise clock overflows")
			}
			st.ext.raiseClock = int64(n)
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
	severalGroups := st.backup != nil && st.backup.Groups != 0
	switch {
	case severalGroups && st.format < groupsBackupFormat:
		return nil, fmt.Errorf("meta: a backup of several groups in a file that says format %d", st.format)
	case !severalGroups && st.format == groupsBackupFormat:
		return nil, fmt.Errorf("meta: format %d is a backup of several groups, and this file records none", st.format)
	}
	switch {
	case (st.ext.lineage != "" || st.ext.generation != 0) && st.format < generationFormat:
		return nil, fmt.Errorf("meta: a generation in a file that says format %d", st.format)
	case (st.ext.lineage == "") != (st.ext.generation == 0):
		return nil, errors.New("meta: a lineage without a generation, or a generation without a lineage")
	}
	if st.ext.raiseClock != 0 && st.format < generationFormat {
		return nil, fmt.Errorf("meta: a raise clock in a file that says format %d", st.format)
	}
	if err := loadVersions(tx, st); err != nil {
		return nil, err
	}
	if err := loadBudget(tx, st); err != nil {
		return nil, err
	}
	var err error
	if st.flake, err = loadFlake(tx); err != nil {
		return nil, err
	}
	if st.format < flakeFormat && tx.Bucket(bucketFlake) != nil {
		return nil, fmt.Errorf("meta: flake state in a file that says format %d", st.format)
	}
	return st, nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}
