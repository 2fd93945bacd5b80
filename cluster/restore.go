package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/fsm"
)

// RestoreConfig says where and how to build the first node of a cluster
// restored from a backup.
type RestoreConfig struct {
	// Backup is the path of a backup written by `seqd backup`.
	Backup string
	// Now is the restore's time (zero: this machine's clock), and
	// ClockError how far every wall clock involved may be from true time
	// (zero: fsm.DefaultClockError). For a backup taken on protocol 5 or
	// later they alone give the minimum margin (fsm.TimeMargin): nothing
	// to count.
	Now        time.Time
	ClockError time.Duration
	// ValuesSince bounds the values any one section may have handed out
	// after the backup was taken, and TermsSince the leader terms that
	// served after it (counting the one serving when it was taken; at least
	// 1). MaxStep is the largest step of any space, including spaces created
	// after the backup (0: the largest in the backup). They give the minimum
	// margin (fsm.MinMargin) of a backup taken before protocol 5, which
	// needs them; for a later backup they may raise it.
	ValuesSince, TermsSince, MaxStep uint64
	// Margin is added to every high-water mark; 0 means the minimum. A
	// margin below the minimum is refused.
	Margin uint64
	// FromCluster, when set, must be the ID of the cluster the backup was
	// taken from.
	FromCluster string
	// FlakeFloorMs is the time floor (Unix ms) of the backup's flake
	// namespaces: it must lie after any time the old cluster can have
	// granted (see fsm.RestoreOptions.FlakeFloorMs); required when the
	// backup holds flake namespaces.
	FlakeFloorMs int64
	// ID, DataDir and RaftAdvertise are the new node's, as it will be
	// started with `seqd serve` (--id, --data-dir, --raft-addr/--advertise-raft).
	ID, DataDir, RaftAdvertise string
	// Groups, when not 0, must be the backup's raft group count (the
	// restored cluster runs as many groups as the backed-up one did).
	Groups int
}

// RestoreResult describes a restore.
type RestoreResult struct {
	fsm.RestoreSummary
	// MinMargin is the minimum margin for the given bounds; Margin the one used.
	MinMargin, Margin uint64
	// ClusterID is the restored cluster's new ID, and Generation its
	// generation (the backup's lineage, its number plus one).
	ClusterID  string
	Generation seqd.Generation
}

var (
	// ErrHasState means the data directory already holds raft state or an FSM.
	ErrHasState = errors.New("data directory already has state")
	// ErrBadBackup means the file is not a backup this build can restore.
	ErrBadBackup = errors.New("not a usable backup")
	// ErrMarginBelowMinimum means the margin given is below what the bounds need.
	ErrMarginBelowMinimum = errors.New("margin below the minimum")
)

// stateFiles are what a data directory holding state contains.
var stateFiles = []string{"raft.db", "fsm.db", "snapshots", "groups", groupsFile}

// PrepareRestore builds a data directory from which `seqd serve` starts a new
// single-voter cluster whose state is the backup with every mark raised by
// the margin, and a floor of the margin under every section of every space
// (including spaces created later). The cluster runs as many raft groups as
// the backed-up one (laid out as groups.go says, with the count recorded in
// group-count and in every group's state, as a bootstrap records it); each
// group's state is installed as a raft snapshot (index 1, term 1, with a
// configuration of this node alone), so servers that join later receive it
// through raft like any other state. The restored cluster gets a new
// cluster ID, so that it is never taken for the cluster the backup came
// from (see vouch.go).
//
// Everything is checked before anything is written to the data directory:
// a directory that holds state, a file that is not a backup (or is of a
// newer format, or of another slot count), a backup of another group count
// than Groups, a backup from another cluster than FromCluster, a margin
// below the minimum: an error wrapping ErrInvalidConfig, ErrHasState,
// ErrBadBackup, fsm.ErrGroupCount, fsm.ErrWrongCluster or
// ErrMarginBelowMinimum, and the data directory is left as it was. The
// backup file itself is never changed.
func PrepareRestore(rc RestoreConfig) (RestoreResult, error) {
	var res RestoreResult
	if rc.ID == "" || rc.DataDir == "" || rc.RaftAdvertise == "" {
		return res, fmt.Errorf("%w: restore needs an ID, a data directory and a raft address", ErrInvalidConfig)
	}
	if err := checkHostPort("raft address", rc.RaftAdvertise); err != nil {
		return res, err
	}
	for _, name := range append(stateFiles, "restore.tmp") {
		if _, err := os.Stat(filepath.Join(rc.DataDir, name)); err == nil {
			return res, fmt.Errorf("%w: %s exists; restore into a new, empty directory", ErrHasState, filepath.Join(rc.DataDir, name))
		}
	}

	// Work on a copy outside the data directory, so that the backup stays
	// as it was and nothing lands in the data directory before every check
	// has passed.
	tmp, err := os.MkdirTemp("", "seqd-restore-*")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	work := filepath.Join(tmp, "backup.db")
	if err := copyFile(rc.Backup, work); err != nil {
		return res, fmt.Errorf("%w: reading %s: %v", ErrBadBackup, rc.Backup, err)
	}
	sum, err := fsm.InspectBackup(work)
	if err != nil {
		return res, fmt.Errorf("%w: %s: %v", ErrBadBackup, rc.Backup, err)
	}
	groups := sum.Info.GroupCount()
	if rc.Groups != 0 && rc.Groups != groups {
		return res, fmt.Errorf("%w: the backed-up cluster's raft group count is %d; --groups %d cannot change it (restore with --groups %d, or without --groups)", fsm.ErrGroupCount, groups, rc.Groups, groups)
	}
	if rc.FromCluster != "" && sum.Info.ClusterID != rc.FromCluster {
		return res, fmt.Errorf("%w: it was taken from cluster %q, not %q", fsm.ErrWrongCluster, sum.Info.ClusterID, rc.FromCluster)
	}
	if res.MinMargin, err = minMargin(rc, sum); err != nil {
		return res, err
	}
	res.Margin = rc.Margin
	if res.Margin == 0 {
		res.Margin = res.MinMargin
	}
	if res.Margin < res.MinMargin {
		return res, fmt.Errorf("%w: margin %d is below %d, the minimum for this backup and the time since it was taken", ErrMarginBelowMinimum, res.Margin, res.MinMargin)
	}
	res.ClusterID = NewClusterID()
	states := make([]string, groups)
	for g := range states {
		states[g] = filepath.Join(tmp, fmt.Sprintf("group-%d.db", g))
	}
	res.RestoreSummary, err = fsm.PrepareRestoreGroups(work, states, fsm.RestoreOptions{Margin: res.Margin, ClusterID: res.ClusterID, FlakeFloorMs: rc.FlakeFloorMs})
	if err != nil {
		if errors.Is(err, fsm.ErrMarginTooLarge) {
			return res, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		return res, err
	}
	res.Generation = res.RestoreSummary.Restored
	if err := checkFenceRecord(rc.DataDir, res.Generation); err != nil {
		return res, err
	}
	if err := writeRestored(rc, states); err != nil {
		for _, name := range append(stateFiles, identityFile) {
			_ = os.RemoveAll(filepath.Join(rc.DataDir, name))
		}
		return res, err
	}
	return res, nil
}

// ErrNeedsCounts means a backup taken before its cluster held every raise
// to the raise budget (protocol 5) was restored without --values-since and
// --terms-since.
var ErrNeedsCounts = errors.New("this backup was taken before every raise was held to the raise budget")

// minMargin is the smallest provably sufficient margin (see
// PrepareRestore).
func minMargin(rc RestoreConfig, sum fsm.RestoreSummary) (uint64, error) {
	counted := rc.TermsSince > 0
	var byCounts uint64
	if counted {
		m, err := fsm.MinMargin(rc.ValuesSince, rc.TermsSince, max(sum.MaxStep, rc.MaxStep))
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		byCounts = m
	}
	if !sum.Budgeted() {
		if !counted {
			return 0, fmt.Errorf("%w (protocol %d; a group was still on an earlier protocol, or the cluster was being upgraded): "+
				"its margin needs --values-since and --terms-since (docs/operations.md), or restore a backup taken after the upgrade", ErrNeedsCounts, sum.Protocol)
		}
		return byCounts, nil
	}
	now, clockErr := rc.Now, rc.ClockError
	if now.IsZero() {
		now = time.Now()
	}
	if clockErr == 0 {
		clockErr = fsm.DefaultClockError
	}
	byTime, err := fsm.TimeMargin(sum.Earliest(), now, clockErr)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return max(byTime, byCounts), nil
}

// restoredFromFile names the file in which builds before generations
// recorded, in a restored data directory, the cluster the backup was taken
// from; it is read still (see Node.Generation), never written.
const restoredFromFile = "restored-from"

// ErrOlderGeneration means a restore would make a generation that a
// cluster already replaced (the data directory's fence record says so).
var ErrOlderGeneration = errors.New("the backup is older than a generation this data directory knows")

// checkFenceRecord refuses a restore into a data directory that holds a
// fence record: one of the same lineage whose replacing generation is at
// least the one the restore would make says the backup is older than a
// cluster that replaced it; any other is left from another cluster.
func checkFenceRecord(dataDir string, next seqd.Generation) error {
	rec, err := readFence(dataDir)
	if err != nil || rec == nil {
		return err
	}
	path := filepath.Join(dataDir, fencedFile)
	if by, perr := seqd.ParseGeneration(rec.By); perr == nil && by.Lineage == next.Lineage && by.Number >= next.Number {
		return fmt.Errorf("%w: %s says generation %d of this lineage replaced this server's cluster, and this restore would make generation %d: "+
			"restore a backup of the cluster that replaced it, or restore into a new, empty directory", ErrOlderGeneration, path, by.Number, next.Number)
	}
	return fmt.Errorf("%w: %s exists (this directory belonged to a fenced server); restore into a new, empty directory", ErrHasState, path)
}

// readRestoredFrom returns the cluster a data directory was restored from
// ("" when it was not restored, or from a cluster without an ID).
func readRestoredFrom(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, restoredFromFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", filepath.Join(dataDir, restoredFromFile), err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeRestored writes the group count and, for each group, the raft
// state of a new single-voter cluster whose snapshot is the prepared file
// states[g]. Group 0 comes last, as in a bootstrap: its state is what says
// the server holds a cluster (see checkGroupState).
func writeRestored(rc RestoreConfig, states []string) error {
	if err := os.MkdirAll(rc.DataDir, 0o750); err != nil {
		return err
	}
	if err := writeGroups(rc.DataDir, len(states)); err != nil {
		return err
	}
	for g := len(states) - 1; g >= 0; g-- {
		if err := writeRestoredGroup(rc, groupDir(rc.DataDir, g), states[g], g); err != nil {
			return fmt.Errorf("group %d: %w", g, err)
		}
	}
	return nil
}

func writeRestoredGroup(rc RestoreConfig, dir, state string, g int) error {
	if err := writeIdentity(dir, rc.ID, g); err != nil {
		return err
	}
	ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		return err
	}
	defer ls.Close()
	// The snapshot is from term 1; start the term there too.
	if err := ls.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		return err
	}
	conf := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(rc.ID), Address: raft.ServerAddress(rc.RaftAdvertise), Suffrage: raft.Voter}}}
	_, enc := raft.NewInmemTransport(raft.ServerAddress(rc.RaftAdvertise)) // only encodes the peer list
	sink, err := snaps.Create(1, 1, 1, conf, 1, enc)
	if err != nil {
		return err
	}
	in, err := os.Open(state)
	if err != nil {
		_ = sink.Cancel()
		return err
	}
	defer in.Close()
	if _, err := io.Copy(sink, in); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
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

// Backup writes a consistent copy of a cluster of one group's state to w
// (see group.Backup): only the serving leader answers. A cluster of
// several groups is backed up with BackupGroups.
func (n *Node) Backup(w io.Writer) (int64, error) {
	if len(n.groups) > 1 {
		return 0, fmt.Errorf("cluster: a cluster of %d groups is backed up by every group's leader (BackupGroups)", len(n.groups))
	}
	return n.authority().Backup(w)
}

// BackupGroup writes group g's part of a backup to w: a copy of the
// group's state as group.Backup takes it, only on its serving leader.
func (n *Node) BackupGroup(g int, w io.Writer) (int64, error) {
	if g < 0 || g >= len(n.groups) {
		return 0, fmt.Errorf("%w: group %d of %d", seqd.ErrInvalidArgument, g, len(n.groups))
	}
	return n.groups[g].Backup(w)
}

// BackupGroups writes to w one backup of every group of the cluster (see
// fsm.MergeBackups). part(ctx, g, w) writes group g's part as its serving
// leader takes it (BackupGroup there, on this server or another); the parts
// are fetched one after the other into temporary files, so that each comes
// whole from one leader, and merged once all have arrived. A part that
// fails fails the backup.
func (n *Node) BackupGroups(ctx context.Context, w io.Writer, part func(ctx context.Context, g int, w io.Writer) error) (int64, error) {
	dir, err := os.MkdirTemp("", "seqd-backup-*")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	parts := make([]string, len(n.groups))
	for g := range parts {
		parts[g] = filepath.Join(dir, fmt.Sprintf("part-%d.db", g))
		if err := writePart(ctx, parts[g], g, part); err != nil {
			return 0, err
		}
	}
	merged := filepath.Join(dir, "backup.db")
	if _, err := fsm.MergeBackups(merged, parts); err != nil {
		return 0, err
	}
	in, err := os.Open(merged)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	return io.Copy(w, in)
}

func writePart(ctx context.Context, path string, g int, part func(ctx context.Context, g int, w io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = part(ctx, g, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
