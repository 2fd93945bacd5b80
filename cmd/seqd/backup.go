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
	fs := cli.NewFlagSet("restore", "seqd restore --values-since V --terms-since T [--max-step S] [--margin M] [--from-cluster ID] [--groups N] [--id ID] [--data-dir D] [--raft-addr A] FILE",
		"Builds the data directory of the first node of a NEW cluster from a backup taken with seqd\n"+
			"backup. Values handed out after the backup was taken are not in it, so every section's\n"+
			"high-water mark is raised by a margin, and every section of every space, including spaces\n"+
			"created after the backup, starts above the margin. The new cluster runs as many raft groups\n"+
			"as the backed-up one (--groups, when given, must be that count).\n\n"+
			"Guarantee: the restored cluster never hands out a value the old cluster handed out, as long as\n"+
			"the bounds below hold for what happened between the backup and the loss of the old cluster:\n"+
			"  --values-since V  the most values any one section's keys took after the backup, including values\n"+
			"                    skipped by calls that failed (the increase of the old cluster's\n"+
			"                    seqd_values_taken_total, summed over its servers, bounds it)\n"+
			"  --terms-since T   the leader terms after the backup, counting the one serving when it was taken\n"+
			"                    (the increase of the raft term, plus 1; or, only if every server ran with\n"+
			"                    --lease-handoff=false, 1 + the seconds since the backup divided by the shortest\n"+
			"                    --lease any server used: a new leader then waits a lease. With the handoff, on by\n"+
			"                    default, a transfer, drain or graceful shutdown starts a term without that wait.)\n"+
			"                    With several raft groups, each group counts its own terms from its own part of\n"+
			"                    the backup: T is the largest, over the groups, of the increase of the group's\n"+
			"                    term (seqd_group_raft_term{group=\"g\"}, highest on any server) since the term\n"+
			"                    its part records (printed below and by seqd backup), plus 1\n"+
			"  --max-step S      the largest step of any space, including spaces created after the backup\n"+
			"                    (default: the largest in the backup)\n"+
			"The minimum margin is V + T x (1,000,000 + 2 x S); the proof is in DESIGN.md. --margin may\n"+
			"give a larger one (a larger margin only makes the values jump further).\n\n"+
			"Stop every server of the old cluster that still runs before starting the restored node.\n\n"+
			"Refused, with exit status 2 and nothing written: a data directory that holds state, a file that\n"+
			"is not a seqd backup or was written by a newer seqd, a backup of another slot count than this\n"+
			"build's, a --groups other than the backup's group count, a backup from another cluster than\n"+
			"--from-cluster, a margin below the minimum, a backup with flake namespaces without a --flake-floor\n"+
			"after its highest grant.\n\n"+
			"Flake ids: --flake-floor T (RFC 3339) is the time under every flake namespace of the restored\n"+
			"cluster, including namespaces created after the backup: no worker's range starts below it. It\n"+
			"must be after any time the old cluster can have granted: the time its last server stopped plus\n"+
			"30 s (the length of a grant's range), or later. The default, the restore's own time plus one\n"+
			"minute, is right when the old cluster stopped before the restore and its clocks were right.\n\n"+
			"The restored cluster gets a new cluster ID: never restore into a member of a running cluster (it\n"+
			"would refuse to serve). Then start the node with seqd serve and the same --id, --data-dir and\n"+
			"addresses, and add more nodes with empty data directories and --join.")
	values := fs.Uint64("values-since", 0, "bound on the values any one section took after the backup, skipped ones included (required)")
	terms := fs.Uint64("terms-since", 0, "bound on the leader terms after the backup, the one serving at the backup included (required, at least 1)")
	maxStep := fs.Uint64("max-step", 0, "largest step of any space, also of spaces created after the backup (default: the backup's largest)")
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
	if !set["values-since"] || !set["terms-since"] {
		return cli.Usagef("restore needs --values-since and --terms-since: the margin that keeps values from repeating depends on what happened after the backup (see seqd restore --help)")
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
		Backup:       ops[0], ValuesSince: *values, TermsSince: *terms, MaxStep: *maxStep, Margin: *margin,
		FromCluster: *from, ID: *id, DataDir: *dataDir, RaftAdvertise: *advRaft, Groups: *groups,
	})
	if err != nil {
		for _, refused := range []error{cluster.ErrInvalidConfig, cluster.ErrHasState, cluster.ErrBadBackup, cluster.ErrMarginBelowMinimum, fsm.ErrWrongCluster, fsm.ErrFlakeFloor, fsm.ErrGroupCount} {
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
	if info.Groups != 0 {
		fmt.Printf("--terms-since must bound every group's terms since its part: the largest increase of any group's seqd_group_raft_term{group=\"g\"} since its term listed above, plus 1\n")
	}
	fmt.Printf("minimum margin for %d values and %d terms since the backup: %d; margin used: %d\n", *values, *terms, res.MinMargin, res.Margin)
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
