package main

import (
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/api/idmsg"
	"github.com/seqd/seqd/flake"
	"github.com/seqd/seqd/internal/cli"
)

// cmdID runs `seqd id ...`: flake ids.
func cmdID(args []string) error {
	if err := cli.Subcommand(args, "seqd id next|decode|namespace|workers", "Flake ids: unique, time-ordered 64-bit ids.",
		"next [--namespace N] [COUNT]    print COUNT (default 1) new ids",
		"decode [--namespace N] ID...    print each id's time, worker, sequence and holder",
		"namespace create|list           create and list namespaces (id layouts)",
		"workers [--namespace N]         list a namespace's workers"); err != nil {
		return err
	}
	switch args[0] {
	case "next":
		return cmdIDNext(args[1:])
	case "decode":
		return cmdIDDecode(args[1:])
	case "namespace":
		return cmdIDNamespace(args[1:])
	case "workers":
		return cmdIDWorkers(args[1:])
	}
	return nil // cli.Subcommand refused any other
}

func cmdIDNext(args []string) error {
	fs := cli.NewFlagSet("id next", "seqd id next [--namespace N] [--shard N] [COUNT]",
		"Prints COUNT (default 1, at most 10000) new flake ids, one per line, strictly increasing.")
	ns := fs.String("namespace", "", `flake namespace (default "default")`)
	shard := fs.Uint64("shard", 0, "value of the layout's shard field in every id (a layout without one takes 0 only)")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	count := uint64(1)
	switch {
	case len(ops) > 1:
		return cli.Usagef("id next takes at most one COUNT")
	case len(ops) == 1:
		if count, err = strconv.ParseUint(ops[0], 10, 32); err != nil || count < 1 || count > 10000 {
			return cli.Usagef("COUNT must be 1 to 10000, got %q", ops[0])
		}
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	var ids []int64
	if *shard != 0 {
		ids, err = c.NextShardIds(ctx, *ns, uint32(count), *shard)
	} else {
		ids, err = c.NextIds(ctx, *ns, uint32(count))
	}
	if err != nil {
		return cli.CallError(err)
	}
	for _, id := range ids {
		fmt.Println(id)
	}
	return nil
}

func cmdIDDecode(args []string) error {
	fs := cli.NewFlagSet("id decode", "seqd id decode [--namespace N] ID...",
		"Prints each id's time, worker, sequence and the holder that issued it. Ids of an obfuscated namespace need the admin token.")
	ns := fs.String("namespace", "", `flake namespace (default "default")`)
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		return cli.Usagef("id decode needs at least one ID")
	}
	ids := make([]int64, len(ops))
	for i, op := range ops {
		if ids[i], err = strconv.ParseInt(op, 10, 64); err != nil || ids[i] <= 0 {
			return cli.Usagef("ID must be a positive 64-bit integer, got %q", op)
		}
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tCLUSTER\tSHARD\tWORKER\tSEQUENCE\tHOLDER")
	var warnings []string
	for _, id := range ids {
		d, err := c.Decode(ctx, *ns, id)
		if err != nil {
			return cli.CallError(err)
		}
		holder := d.GetHolderLabel()
		if w := d.GetWarning(); w != "" {
			holder = "(impossible: see below)"
			warnings = append(warnings, fmt.Sprintf("seqd: warning: id %d cannot have been issued: %s", id, w))
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%s\n", id, seqd.Date(d.GetUnixMs()), d.GetCluster(), d.GetShard(), d.GetWorker(), d.GetSequence(), holder)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, w)
	}
	return nil
}

func cmdIDNamespace(args []string) error {
	if err := cli.Subcommand(args, "seqd id namespace create|delete|list", "Creates, deletes and lists flake namespaces.",
		"create NAME [--layout L | --time-bits T --worker-bits W --sequence-bits S [--unit-ms U] [--epoch-ms E]] [--obfuscation ff1|ff1-hour]",
		"delete NAME", "list"); err != nil {
		return err
	}
	switch args[0] {
	case "delete":
		return cmdIDNamespaceDelete(args[1:])
	case "create":
		fs := cli.NewFlagSet("id namespace create", "seqd id namespace create NAME [--layout L | --time-bits T [--cluster-bits C --cluster V] [--shard-bits H] --worker-bits W --sequence-bits S [--sequence-first] [--unit-ms U] [--epoch-ms E]] [--obfuscation ff1|ff1-hour]",
			fmt.Sprintf("Creates a flake namespace. Its layout is fixed for life: a new layout is a new namespace. Presets: %v (default %s). "+
				"An id is, from the top bit down: time, cluster, shard, worker, sequence (sequence above worker with --sequence-first).", flake.PresetNames(), flake.DefaultLayoutName))
		layout := fs.String("layout", "", "preset layout")
		tb := fs.Uint("time-bits", 0, "custom layout: bits of time units")
		wb := fs.Uint("worker-bits", 0, "custom layout: bits of worker")
		sb := fs.Uint("sequence-bits", 0, "custom layout: bits of sequence")
		hb := fs.Uint("shard-bits", 0, "custom layout: bits of the shard each call gives (seqd id next --shard)")
		cb := fs.Uint("cluster-bits", 0, "custom layout: bits of the cluster field")
		cv := fs.Uint64("cluster", 0, "custom layout: the cluster field's value, fixed for the namespace (one per cluster or datacenter)")
		seqFirst := fs.Bool("sequence-first", false, "custom layout: the sequence above the worker (sonyflake's order)")
		unit := fs.Uint("unit-ms", 0, "custom layout: the time unit in ms (default 1)")
		epoch := fs.Int64("epoch-ms", 0, "custom layout: the epoch in Unix ms (default 2026-01-01T00:00:00Z)")
		obf := fs.String("obfuscation", "", "ff1 (ids reveal neither time, worker nor volume) or ff1-hour (the hour stays in the clear); needs the servers' --cluster-secret-file")
		cf := addClientFlags(fs)
		ops, err := cli.ParseFlags(fs, args[1:])
		if err != nil {
			return err
		}
		if len(ops) != 1 {
			return cli.Usagef("id namespace create takes one NAME")
		}
		if max(*tb, *wb, *sb, *hb, *cb) > 64 || *unit > 1<<32-1 {
			return cli.Usagef("bit widths must be at most 64 and --unit-ms at most 2^32-1")
		}
		c, ctx, cancel, err := cf.dial()
		if err != nil {
			return err
		}
		defer cancel()
		resp, err := c.CreateNamespace(ctx, &seqv1.CreateNamespaceRequest{Name: ops[0], Layout: *layout, TimeBits: uint32(*tb),
			WorkerBits: uint32(*wb), SequenceBits: uint32(*sb), UnitMs: uint32(*unit), EpochUnixMs: *epoch, Obfuscation: *obf,
			ShardBits: uint32(*hb), ClusterBits: uint32(*cb), Cluster: *cv, SequenceFirst: *seqFirst})
		if err != nil {
			return cli.CallError(err)
		}
		verb := "created"
		if !resp.GetCreated() {
			verb = "exists"
		}
		fmt.Printf("%s namespace %s\n", verb, describeNamespace(resp.GetNamespace()))
		return nil
	case "list":
		fs := cli.NewFlagSet("id namespace list", "seqd id namespace list", "Lists every flake namespace with its layout.")
		cf := addClientFlags(fs)
		ops, err := cli.ParseFlags(fs, args[1:])
		if err != nil {
			return err
		}
		if len(ops) != 0 {
			return cli.Usagef("id namespace list takes no arguments")
		}
		c, ctx, cancel, err := cf.dial()
		if err != nil {
			return err
		}
		defer cancel()
		nss, err := c.ListNamespaces(ctx)
		if err != nil {
			return cli.CallError(err)
		}
		for _, n := range nss {
			fmt.Println(describeNamespace(n))
		}
		return nil
	}
	return nil // cli.Subcommand refused any other
}

func describeNamespace(n *seqv1.Namespace) string {
	l := n.GetLayout()
	obf, fields := l.GetObfuscation(), ""
	if obf == idmsg.ObfuscationFields {
		obf = ""
		if l.GetClusterBits() > 0 {
			fields += fmt.Sprintf(" cluster_bits=%d cluster=%d", l.GetClusterBits(), l.GetCluster())
		}
		if l.GetShardBits() > 0 {
			fields += fmt.Sprintf(" shard_bits=%d", l.GetShardBits())
		}
		if l.GetSequenceFirst() {
			fields += " sequence_first=true"
		}
	}
	if obf == flake.ObfuscateNone {
		obf = "none"
	}
	return fmt.Sprintf("%s time_bits=%d%s worker_bits=%d sequence_bits=%d unit_ms=%d epoch=%s end=%s obfuscation=%s",
		n.GetName(), l.GetTimeBits(), fields, l.GetWorkerBits(), l.GetSequenceBits(), l.GetUnitMs(),
		time.UnixMilli(l.GetEpochUnixMs()).UTC().Format(time.RFC3339), time.UnixMilli(n.GetEndUnixMs()).UTC().Format(time.RFC3339), obf)
}

func cmdIDNamespaceDelete(args []string) error {
	fs := cli.NewFlagSet("id namespace delete", "seqd id namespace delete NAME",
		"Deletes a flake namespace: calls for it fail (not_found), its holders are fenced. Its time floor and workers' marks stay: "+
			"a namespace created again under its name (with its layout) issues ids above every id it ever issued.")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 {
		return cli.Usagef("id namespace delete takes one NAME")
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	if err := c.DeleteNamespace(ctx, ops[0]); err != nil {
		return cli.CallError(err)
	}
	fmt.Printf("deleted namespace %s\n", ops[0])
	return nil
}

func cmdIDWorkers(args []string) error {
	fs := cli.NewFlagSet("id workers", "seqd id workers [--namespace N] [--reclaim W]",
		"Lists a namespace's workers ever used: holder, fencing token, time range and last renewal. --reclaim fences worker W's holder now; the worker is handed out again two leases later.")
	ns := fs.String("namespace", "", `flake namespace (default "default")`)
	reclaim := fs.Int("reclaim", -1, "worker to take back from its holder (fencing it)")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 0 {
		return cli.Usagef("id workers takes no arguments")
	}
	if *reclaim < -1 || *reclaim > 1<<24 {
		return cli.Usagef("--reclaim must be a worker id")
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	if *reclaim >= 0 {
		if err := c.ReclaimWorker(ctx, *ns, uint32(*reclaim)); err != nil {
			return cli.CallError(err)
		}
		fmt.Printf("reclaimed worker %d\n", *reclaim)
	}
	ws, err := c.ListWorkers(ctx, *ns)
	if err != nil {
		return cli.CallError(err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tHELD\tLABEL\tTOKEN\tHWM\tRENEWED")
	for _, w := range ws {
		fmt.Fprintf(tw, "%d\t%v\t%s\t%d\t%d\t%s\n", w.GetId(), w.GetHeld(), w.GetLabel(), w.GetToken(), w.GetHwm(),
			time.UnixMilli(w.GetRenewedUnixMs()).UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	return tw.Flush()
}
