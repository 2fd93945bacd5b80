package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/cli"
)

func cmdBackup(args []string) error {
	fs := cli.NewFlagSet("backup", "seqd backup [--addr A] FILE",
		"Writes a consistent copy of the cluster's replicated state (spaces and high-water marks),\n"+
			"taken from the leader, to FILE. With several raft groups, every group's part comes from that\n"+
			"group's leader, and FILE records the raft term each part was taken at. Restore it with seqd\n"+
			"restore.")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 {
		return cli.Usagef("backup takes one FILE")
	}
	if _, err := os.Stat(ops[0]); err == nil {
		return cli.Usagef("%s exists; choose a new file", ops[0])
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	tmp := ops[0] + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := c.Backup(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return cli.CallError(err)
	}
	// Read it back: a backup that does not open is no backup.
	sum, err := fsm.InspectBackup(tmp)
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("the backup received does not check out: %w", err)
	}
	if err := os.Rename(tmp, ops[0]); err != nil {
		return err
	}
	fmt.Printf("wrote %d bytes to %s: %d spaces, %d sections, highest mark %d; cluster %s, raft term %d, index %d, taken %s\n",
		n, ops[0], sum.Spaces, sum.Sections, sum.HighestBefore, orNone(sum.Info.ClusterID), sum.Info.Term, sum.Info.Index,
		sum.Info.Taken.Format(time.RFC3339))
	printParts(sum.Info)
	return nil
}

// printParts prints, for a backup of several raft groups, the counts and
// the raft term and index each group's part was taken at.
func printParts(info fsm.BackupInfo) {
	if info.Groups == 0 {
		return
	}
	fmt.Printf("%d raft groups over %d slots; each group's part taken at:\n", info.Groups, info.Slots)
	for g, p := range info.Parts {
		fmt.Printf("  group %d: raft term %d, index %d, taken %s\n", g, p.Term, p.Index, p.Taken.Format(time.RFC3339Nano))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func cmdRestore(args []string) error {
	host, _ := os.Hostname()
	fs := cli.NewFlagSet("restore", "seqd restore [--id ID] [--data-dir D] [--raft-addr A] [--clock-error 10m] [--flake-floor T] [--from-cluster ID] [--groups N] FILE",
		"Builds the data directory of the first server of a cluster that replaces a lost one, from a\n"+
			"backup taken with seqd backup. The old cluster went on handing out values after the backup;\n"+
			"every section's high-water mark is therefore raised by a margin that follows from the backup\n"+
			"and the time alone: every server held each section's mark to rise at most about 4.1e9 values a\n"+
			"second (the raise budget, DESIGN.md §5), so the restored cluster starts above every value the old\n"+
			"one can have handed out, with nothing to count. The restored cluster runs as many raft groups as\n"+
			"the backed-up one (--groups, when given, must be that count).\n\n"+
			"The procedure:\n"+
			"  1. Stop every server of the old cluster that still runs (the restored server refuses to start\n"+
			"     while one of them is admitted: source-running).\n"+
			"  2. seqd restore FILE --id ID --data-dir D --raft-addr A (an empty data directory).\n"+
			"  3. seqd serve with the same --id, --data-dir and addresses, and a --join that names the old\n"+
			"     servers' gossip addresses: a server of the old cluster that comes back later is then told of\n"+
			"     the restore at once and stops for good (its cluster is an older generation of the same lineage).\n"+
			"  4. Add servers with empty data directories and --join.\n\n"+
			"It assumes every wall clock involved (the old cluster's leaders', this machine's) was within\n"+
			"--clock-error of true time. A backup taken before the old cluster's upgrade to protocol 5 was\n"+
			"finished needs the counts of the earlier procedure instead (docs/operations.md): --values-since V\n"+
			"--terms-since T [--max-step S]; for later backups they may only raise the margin.\n\n"+
			"Refused, with exit status 2 and nothing written: a data directory that holds state (or a fence\n"+
			"record of a newer generation), a file that is not a seqd backup, is damaged or was written by a\n"+
			"newer seqd, a backup of another slot count than this build's, a --groups other than the backup's,\n"+
			"a backup from another cluster than --from-cluster, a margin below the minimum, a clock that reads\n"+
			"before the backup was taken, a backup with flake namespaces without a --flake-floor after its\n"+
			"highest grant.\n\n"+
			"Flake ids: --flake-floor T (RFC 3339) is the time under every flake namespace of the restored\n"+
			"cluster, including namespaces created after the backup: no worker's range starts below it. It\n"+
			"must be after any time the old cluster can have granted: the time its last server stopped plus\n"+
			"30 s (the length of a grant's range), or later. The default, the restore's own time plus one\n"+
			"minute, is right when the old cluster stopped before the restore and its clocks were right.")
	clockErr := fs.Duration("clock-error", fsm.DefaultClockError, "how far any wall clock involved (the old leaders', this machine's) may have been from true time")
	values := fs.Uint64("values-since", 0, "backups taken before protocol 5 only: bound on the values any one section took after the backup, skipped ones included")
	terms := fs.Uint64("terms-since", 0, "backups taken before protocol 5 only: bound on the leader terms after the backup, the one serving at the backup included (at least 1)")
	maxStep := fs.Uint64("max-step", 0, "backups taken before protocol 5 only: largest step of any space, also of spaces created after the backup (default: the backup's largest)")
	margin := fs.Uint64("margin", 0, "margin to use instead of the minimum (must not be below it)")
	from := fs.String("from-cluster", "", "refuse unless the backup was taken from this cluster ID")
	groups := fs.Int("groups", 0, "refuse unless the backup is of a cluster of this many raft groups (default: the backup's count)")
	flakeFloor := fs.String("flake-floor", "", "RFC 3339 time under every flake namespace: after the old cluster's last server stopped, plus 30 s (default: now plus one minute)")
	id := fs.String("id", host, "the new node's ID (as for serve)")
	dataDir := fs.String("data-dir", "./seqd-data", "the new node's data directory; must not hold state")
	raftAddr := fs.String("raft-addr", "127.0.0.1:7701", "the new node's raft address (as for serve)")
	advRaft := fs.String("advertise-raft", "", "the new node's advertised raft address (default --raft-addr)")
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 {
		return cli.Usagef("restore takes one backup FILE")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["values-since"] != set["terms-since"] {
		return cli.Usagef("--values-since and --terms-since go together (backups taken before protocol 5; see seqd restore --help)")
	}
	if set["terms-since"] && *terms == 0 {
		return cli.Usagef("--terms-since counts the term that was serving when the backup was taken: at least 1")
	}
	if *clockErr <= 0 {
		return cli.Usagef("--clock-error must be positive")
	}
	if err := advertise("raft", *raftAddr, advRaft); err != nil {
		return err
	}
	floorMs := time.Now().Add(time.Minute).UnixMilli()
	if *flakeFloor != "" {
		ft, err := time.Parse(time.RFC3339, *flakeFloor)
		if err != nil {
			return cli.Usagef("--flake-floor: %v", err)
		}
		floorMs = ft.UnixMilli()
	}
	res, err := cluster.PrepareRestore(cluster.RestoreConfig{
		FlakeFloorMs: floorMs,
		Backup:       ops[0], ValuesSince: *values, TermsSince: *terms, MaxStep: *maxStep, Margin: *margin, ClockError: *clockErr,
		FromCluster: *from, ID: *id, DataDir: *dataDir, RaftAdvertise: *advRaft, Groups: *groups,
	})
	if err != nil {
		for _, refused := range []error{cluster.ErrInvalidConfig, cluster.ErrHasState, cluster.ErrBadBackup, cluster.ErrMarginBelowMinimum,
			cluster.ErrNeedsCounts, cluster.ErrOlderGeneration, fsm.ErrWrongCluster, fsm.ErrFlakeFloor, fsm.ErrGroupCount} {
			if errors.Is(err, refused) {
				return cli.Usagef("%v", err)
			}
		}
		return err
	}
	abs, _ := filepath.Abs(*dataDir)
	info := res.Info
	fmt.Printf("backup: cluster %s, raft term %d, index %d, taken %s; %d spaces, %d sections, largest step %d\n",
		orNone(info.ClusterID), info.Term, info.Index, info.Taken.Format(time.RFC3339), res.Spaces, res.Sections, res.MaxStep)
	printParts(info)
	if res.Budgeted() {
		fmt.Printf("minimum margin for %s since the backup (clock error %v): %d; margin used: %d\n",
			time.Since(res.Earliest()).Round(time.Second), *clockErr, res.MinMargin, res.Margin)
	} else {
		fmt.Printf("minimum margin for %d values and %d terms since the backup: %d; margin used: %d\n", *values, *terms, res.MinMargin, res.Margin)
		if info.Groups > 1 {
			fmt.Printf("--terms-since must bound every group's terms since its part: the largest increase of any group's seqd_group_raft_term{group=\"g\"} since its term listed above, plus 1\n")
		}
	}
	fmt.Printf("generation: %s (lineage %s, number %d): servers of the old cluster that come back stop when they learn of it\n",
		res.Generation, res.Generation.Lineage, res.Generation.Number)
	groupsNote := "one raft group"
	if n := info.GroupCount(); n > 1 {
		groupsNote = fmt.Sprintf("%d raft groups", n)
	}
	fmt.Printf("restored into %s as new cluster %s (%s); highest mark %d -> %d\n", abs, res.ClusterID, groupsNote, res.HighestBefore, res.HighestAfter)
	fmt.Printf("flake: %d namespaces, highest grant ends %s; time floor %s\n", res.FlakeNamespaces,
		time.UnixMilli(res.FlakeHighestMs).UTC().Format(time.RFC3339Nano), time.UnixMilli(floorMs).UTC().Format(time.RFC3339Nano))
	fmt.Printf("next: seqd serve --id %s --data-dir %s --raft-addr %s [other flags as before]\n", *id, *dataDir, *raftAddr)
	return nil
}
