package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd/fsm"
)

// RestoreConfig says where and how to build the first node of a cluster
// restored from a backup.
type RestoreConfig struct {
	// Backup is the path of a backup written by `seqd backup` (an FSM file).
	Backup string
	// Margin is added to every high-water mark of the backup (and to the
	// floor of sections it never raised); it must cover the values issued
	// after the backup was taken, per section. Required (at least 1).
	Margin uint64
	// ID, DataDir and RaftAdvertise are the new node's, as it will be
	// started with `seqd serve` (--id, --data-dir, --raft-addr/--advertise-raft).
	ID, DataDir, RaftAdvertise string
}

// ErrHasState means the data directory already holds raft state or an FSM.
var ErrHasState = errors.New("data directory already has state")

// PrepareRestore builds a data directory from which `seqd serve` starts a new
// single-voter cluster whose state is the backup with every mark raised by
// Margin. The state is installed as a raft snapshot (index 1, term 1, with a
// configuration of this node alone), so servers that join later receive it
// through raft like any other state. The backup file itself is not changed.
// It refuses a directory that already has state.
func PrepareRestore(rc RestoreConfig) (fsm.RestoreSummary, error) {
	var sum fsm.RestoreSummary
	if rc.Margin == 0 {
		return sum, fmt.Errorf("%w: a restore needs --margin: values issued after the backup are not in it", ErrInvalidConfig)
	}
	if rc.ID == "" || rc.DataDir == "" || rc.RaftAdvertise == "" {
		return sum, fmt.Errorf("%w: restore needs an ID, a data directory and a raft address", ErrInvalidConfig)
	}
	if err := checkHostPort("raft address", rc.RaftAdvertise); err != nil {
		return sum, err
	}
	for _, name := range []string{"raft.db", "fsm.db", "snapshots"} {
		if _, err := os.Stat(filepath.Join(rc.DataDir, name)); err == nil {
			return sum, fmt.Errorf("%w: %s exists; restore into a new, empty directory", ErrHasState, filepath.Join(rc.DataDir, name))
		}
	}
	if err := os.MkdirAll(rc.DataDir, 0o750); err != nil {
		return sum, err
	}

	// Work on a copy so that the backup stays as it was.
	work := filepath.Join(rc.DataDir, "restore.tmp")
	if err := copyFile(rc.Backup, work); err != nil {
		return sum, fmt.Errorf("reading backup: %w", err)
	}
	defer os.Remove(work)
	sum, err := fsm.PrepareRestore(work, rc.Margin)
	if err != nil {
		return sum, err
	}

	ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(rc.DataDir, "raft.db")})
	if err != nil {
		return sum, err
	}
	defer ls.Close()
	// The snapshot is from term 1; start the term there too.
	if err := ls.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		return sum, err
	}
	snaps, err := raft.NewFileSnapshotStore(rc.DataDir, 2, io.Discard)
	if err != nil {
		return sum, err
	}
	conf := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(rc.ID), Address: raft.ServerAddress(rc.RaftAdvertise), Suffrage: raft.Voter}}}
	_, enc := raft.NewInmemTransport(raft.ServerAddress(rc.RaftAdvertise)) // only encodes the peer list
	sink, err := snaps.Create(1, 1, 1, conf, 1, enc)
	if err != nil {
		return sum, err
	}
	in, err := os.Open(work)
	if err != nil {
		_ = sink.Cancel()
		return sum, err
	}
	defer in.Close()
	if _, err := io.Copy(sink, in); err != nil {
		_ = sink.Cancel()
		return sum, err
	}
	if err := sink.Close(); err != nil {
		return sum, err
	}
	return sum, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Backup writes a consistent copy of this node's FSM to w. Only the leader
// holding its lease answers, so the copy includes every committed mark.
func (n *Node) Backup(w io.Writer) (int64, error) {
	if !n.IsLeader() || !n.alloc.Serving() {
		return 0, ErrNotLeader
	}
	return n.fsm.Backup(w)
}
