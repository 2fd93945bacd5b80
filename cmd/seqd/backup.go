package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seqd/seqd/cluster"
)

func cmdBackup(args []string) error {
	fs := newFlagSet("backup", "seqd backup [--addr A] FILE",
		"Writes a consistent copy of the cluster's replicated state (spaces and high-water marks),\n"+
			"taken from the leader, to FILE. Restore it with seqd restore.")
	cf := addClientFlags(fs)
	ops, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 {
		return usageErr("backup takes one FILE")
	}
	if _, err := os.Stat(ops[0]); err == nil {
		return usageErr("%s exists; choose a new file", ops[0])
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
		return callErr(err)
	}
	if err := os.Rename(tmp, ops[0]); err != nil {
		return err
	}
	fmt.Printf("wrote %d bytes to %s\n", n, ops[0])
	return nil
}

func cmdRestore(args []string) error {
	host, _ := os.Hostname()
	fs := newFlagSet("restore", "seqd restore --margin N [--id ID] [--data-dir D] [--raft-addr A] FILE",
		"Builds the data directory of the first node of a NEW cluster from a backup. Values issued\n"+
			"after the backup was taken are not in it, so every high-water mark is raised by --margin\n"+
			"(required): choose it above the number of values any one section may have handed out since\n"+
			"the backup (at least the spaces' step; e.g. 100 × the largest step is generous). Then start\n"+
			"the node with seqd serve and the same --id, --data-dir and addresses; add more nodes with\n"+
			"empty data directories and --join.")
	margin := fs.Uint64("margin", 0, "added to every high-water mark (required)")
	id := fs.String("id", host, "the new node's ID (as for serve)")
	dataDir := fs.String("data-dir", "./seqd-data", "the new node's data directory; must not hold state")
	raftAddr := fs.String("raft-addr", "127.0.0.1:7701", "the new node's raft address (as for serve)")
	advRaft := fs.String("advertise-raft", "", "the new node's advertised raft address (default --raft-addr)")
	ops, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 {
		return usageErr("restore takes one backup FILE")
	}
	if *margin == 0 {
		return usageErr("restore refuses to run without --margin: values issued after the backup would be issued again")
	}
	if err := advertise("raft", *raftAddr, advRaft); err != nil {
		return err
	}
	sum, err := cluster.PrepareRestore(cluster.RestoreConfig{Backup: ops[0], Margin: *margin, ID: *id, DataDir: *dataDir, RaftAdvertise: *advRaft})
	if err != nil {
		if errors.Is(err, cluster.ErrInvalidConfig) || errors.Is(err, cluster.ErrHasState) {
			return usageErr("%v", err)
		}
		return err
	}
	abs, _ := filepath.Abs(*dataDir)
	fmt.Printf("restored %d spaces, %d sections into %s; highest mark %d → %d (margin %d)\n",
		sum.Spaces, sum.Sections, abs, sum.HighestBefore, sum.HighestAfter, *margin)
	fmt.Printf("next: seqd serve --id %s --data-dir %s --raft-addr %s [other flags as before]\n", *id, *dataDir, *raftAddr)
	return nil
}
