package main

import (
	"fmt"
	"strings"

	"github.com/seqd/seqd/internal/cli"
)

func cmdNode(args []string) error {
	if err := cli.Subcommand(args, "seqd node remove|drain", "Changes a server's place in the cluster.",
		"remove ID          remove a server from every raft group's configuration",
		"drain [--undo] ID  move every raft group ID leads to other servers"); err != nil {
		return err
	}
	if args[0] == "drain" {
		return cmdNodeDrain(args[1:])
	}
	fs := cli.NewFlagSet("node remove", "seqd node remove ID",
		"Removes server ID from the raft configuration. It stops voting, and the leader never adds it\n"+
			"back while it keeps its data: to bring the machine back, stop it, delete its data directory\n"+
			"and start it again (it joins as a non-voter and is promoted once caught up).")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(ops) != 1 || ops[0] == "" {
		return cli.Usagef("node remove takes one ID")
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	if err := c.RemoveNode(ctx, ops[0]); err != nil {
		return cli.CallError(err)
	}
	fmt.Printf("removed %s\n", ops[0])
	return nil
}

func cmdNodeDrain(args []string) error {
	fs := cli.NewFlagSet("node drain", "seqd node drain [--undo] ID | --self",
		"Makes server ID hand every raft group it leads to other voters and stop being preferred for\n"+
			"any, and waits until it leads none (at most --timeout). Drain before maintenance;\n"+
			"it lasts until --undo or until the server restarts. Exits 1 if groups are still led there.\n"+
			"--self drains the server --addr names (a container's preStop hook: --addr 127.0.0.1:7700).")
	undo := fs.Bool("undo", false, "end the drain: the server may lead groups again")
	self := fs.Bool("self", false, "drain the server at --addr (its ID asked from it) instead of naming an ID")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if *self != (len(ops) == 0) || len(ops) > 1 || len(ops) == 1 && ops[0] == "" {
		return cli.Usagef("node drain takes one ID, or --self")
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	if *self {
		if strings.Contains(*cf.addr, ",") {
			return cli.Usagef("node drain --self needs one --addr: the server to drain")
		}
		st, err := c.ClusterStatus(ctx)
		if err != nil {
			return cli.CallError(err)
		}
		ops = []string{st.GetNodeId()}
	}
	led, err := c.DrainNode(ctx, ops[0], *undo)
	if err != nil {
		return cli.CallError(err)
	}
	if *undo {
		fmt.Printf("%s undrained (leads %d groups)\n", ops[0], led)
	} else {
		fmt.Printf("%s drained: leads no group\n", ops[0])
	}
	return nil
}
