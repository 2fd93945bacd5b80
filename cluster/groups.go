package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/seqd/seqd"
)

// A node runs the same fixed number of raft groups as every other server of
// its cluster (see seqd.SlotOf for which group owns which section). Group 0
// keeps the data directory's top level (raft.db, fsm.db, snapshots/), as a
// single-group server always had, so that a data directory of the previous
// build opens in place as group 0 of a one-group cluster; group g >= 1 keeps
// the same files under groups/<g>/. The count is written in the file
// "group-count" when the directory is first opened, and once group 0 holds raft
// state it is fixed: a start with another --groups fails, since keys would
// map to other groups than the ones holding their marks.
//
// Group 0 is the authority: spaces, flake namespaces and the cluster ID are
// decided in it, vouching (vouch.go) reads its configuration and records,
// and its leader runs membership. Every other group's leader makes its
// configuration follow group 0's (see mirrorMembership).

// groupsFile names the file holding the group count.
const groupsFile = "group-count"

// identityFile names the file, in each group's directory, that says whose
// state the directory holds: this server's, of which group (see
// checkIdentity).
const identityFile = "identity"

// identity is what identityFile holds.
type identity struct {
	Server string `json:"server"`
	Group  int    `json:"group"`
}

// checkIdentity refuses a group directory that holds another group's state,
// or another server's: nothing else ties a directory to its group, and a
// server whose groups/<a>/ holds groups/<b>/'s log (directories swapped or
// restored to the wrong places), or a copy of another server's directory,
// would take part in group a with a log and votes that are not its own of
// group a (vouching compares indexes and terms, which two groups' logs
// often share) and could hand out values again. A directory without the
// file (made by a build before it) is taken as it is and marked; the mark
// is written before the group opens, so before any raft state of the
// group's can be written.
func checkIdentity(dir, id string, g int) error {
	path := filepath.Join(dir, identityFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return writeIdentity(dir, id, g)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var got identity
	if err := json.Unmarshal(b, &got); err != nil || got.Server == "" {
		return fmt.Errorf("%w: the file %s is damaged (%q): it must say which server's group the directory holds", ErrInvalidConfig, path, b)
	}
	if got.Server != id || got.Group != g {
		return fmt.Errorf("%w: %s is the directory of group %d of this server (%s), but it holds group %d of server %s (directories swapped, copied from another server, or started with another --id): "+
			"put the right directories back, or start it with its own --id; otherwise remove this server from the cluster (seqd node remove %s), delete its whole data directory and start it again",
			ErrInvalidConfig, dir, g, id, got.Group, got.Server, id)
	}
	return nil
}

// writeIdentity records in dir that it holds group g of server id
// (written, synced and renamed into place).
func writeIdentity(dir, id string, g int) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	b, _ := json.Marshal(identity{Server: id, Group: g})
	return writeSynced(dir, identityFile, append(b, '\n'))
}

// defaultGroups is the group count of a new cluster whose servers were not
// given one: one group per bootstrap server, so that with balanced leaders
// every server leads one (a lone server, or one that never bootstraps,
// runs one; a server that joins a cluster adopts its count, see adopt.go).
func defaultGroups(bootstrapExpect int) int {
	return min(max(bootstrapExpect, 1), seqd.MaxGroups)
}

// groupDir returns the directory of group g.
func groupDir(dataDir string, g int) string {
	if g == 0 {
		return dataDir
	}
	return filepath.Join(dataDir, "groups", strconv.Itoa(g))
}

// hasRaftState reports whether dir holds raft state (a log, a term or a
// snapshot), without opening it for writing longer than the check.
func hasRaftState(dir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, "raft.db")); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	ls, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		return false, fmt.Errorf("raft log store %s: %w", filepath.Join(dir, "raft.db"), err)
	}
	defer ls.Close()
	snaps, err := raft.NewFileSnapshotStore(dir, 2, nil)
	if err != nil {
		return false, fmt.Errorf("snapshot store: %w", err)
	}
	return raft.HasExistingState(ls, ls, snaps)
}

// groupCount decides how many groups the node runs: the count recorded in
// the data directory once group 0 holds state (a previous build's
// directory, with no record, holds one group), else want (0: default).
// It records the count it returns.
func groupCount(dataDir string, want, def int) (int, error) {
	if want != 0 {
		if err := seqd.ValidGroups(want); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	has, err := hasRaftState(dataDir)
	if err != nil {
		return 0, err
	}
	rec, recorded, err := readGroups(dataDir)
	if err != nil {
		return 0, err
	}
	n := want
	switch {
	case has && !recorded && exists(filepath.Join(dataDir, "groups")):
		return 0, fmt.Errorf("%w: the file %s is missing while the data directory holds groups/: the group count is unknown; restore the file (it holds the cluster's --groups) or remove this server and start it again with an empty data directory", ErrInvalidConfig, filepath.Join(dataDir, groupsFile))
	case has && !recorded:
		// The previous build's data directory: one group.
		if want != 0 && want != 1 {
			return 0, fmt.Errorf("%w: this data directory holds a cluster of 1 group; --groups %d cannot change it (the group count is fixed when a cluster is bootstrapped)", ErrInvalidConfig, want)
		}
		n = 1
	case has:
		if want != 0 && want != rec {
			return 0, fmt.Errorf("%w: this data directory holds a cluster of %d groups; --groups %d cannot change it (the group count is fixed when a cluster is bootstrapped)", ErrInvalidConfig, rec, want)
		}
		n = rec
	case n == 0 && recorded:
		n = rec // a server that never held state keeps what it was told
	case n == 0:
		n = def
	}
	if !recorded || rec != n {
		if err := writeGroups(dataDir, n); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readGroups(dataDir string) (int, bool, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, groupsFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the group count: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || seqd.ValidGroups(n) != nil {
		return 0, false, fmt.Errorf("%w: the file %s is damaged (%q): it must hold the cluster's group count", ErrInvalidConfig, filepath.Join(dataDir, groupsFile), b)
	}
	return n, true, nil
}

// writeGroups records n durably (written, synced and renamed into place).
func writeGroups(dataDir string, n int) error {
	if err := writeSynced(dataDir, groupsFile, fmt.Appendf(nil, "%d\n", n)); err != nil {
		return fmt.Errorf("recording the group count: %w", err)
	}
	return nil
}

// writeSynced writes data to the file name in dir durably: to a temporary
// file, synced, renamed into place, and the directory synced.
func writeSynced(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkGroupState refuses a data directory whose groups disagree: group 0
// holds raft state (has0) but another group's raft.db does not exist
// (existed, per group). That directory was deleted or lost: its votes and
// acknowledged entries are gone, and letting it take part could elect two
// leaders in a term or lose committed marks. It runs before any group is
// opened (opening creates the files), so the refusal holds on every start.
// A directory that exists without state is a group this server had not
// been added to yet (a server that joined and stopped before every group's
// leader added it), and a group with state while group 0 has none is a
// bootstrap cut short (groups are bootstrapped before group 0): both are
// fine.
func checkGroupState(has0 bool, existed []bool) error {
	if !has0 {
		return nil
	}
	for i := 1; i < len(existed); i++ {
		if !existed[i] {
			return fmt.Errorf("%w: group %d's directory is missing while group 0's holds raft state: it was deleted or lost. Remove this server from the cluster, delete its whole data directory, and start it again to join as a new server", ErrInvalidConfig, i)
		}
	}
	return nil
}

// checkLogKept refuses a group directory whose raft log and stable store
// (raft.db) is gone while its snapshots are still there (hadLog: raft.db
// existed when the server started): the snapshots would pass for raft
// state, but the term and the vote the server cast in it are lost, so it
// could vote twice in a term. It is a wiped directory, and is treated as
// one: remove the server, delete its data directory, start it again.
func checkLogKept(dir string, g int, hadLog bool) error {
	if hadLog {
		return nil
	}
	snaps, _ := os.ReadDir(filepath.Join(dir, "snapshots"))
	for _, e := range snaps {
		if e.IsDir() {
			return fmt.Errorf("%w: group %d's raft log and vote (%s) are missing while its snapshots are there: the votes this server cast are lost. "+
				"Remove this server from the cluster (seqd node remove), delete its whole data directory and start it again",
				ErrInvalidConfig, g, filepath.Join(dir, "raft.db"))
		}
	}
	return nil
}

// ownsFunc returns group g's ownership test among n groups (nil for one
// group, which owns everything).
func ownsFunc(g, n int) func(space string, section uint64) bool {
	if n == 1 {
		return nil
	}
	return func(space string, section uint64) bool {
		return seqd.SlotGroup(seqd.SlotOf(space, section), n) == g
	}
}
