package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/internal/cli"
)

func cmdSpace(args []string) error {
	if err := cli.Subcommand(args, "seqd space create|update|delete|list", "Creates, changes, deletes and lists spaces (families of per-key sequences).",
		"create NAME [--step N] [--section-size N]", "update NAME --step N", "delete NAME", "list"); err != nil {
		return err
	}
	switch args[0] {
	case "update":
		return cmdSpaceUpdate(args[1:])
	case "delete":
		return cmdSpaceDelete(args[1:])
	case "create":
		fs := cli.NewFlagSet("space create", "seqd space create NAME [--step N] [--section-size N]",
			"Creates a space. Creating an existing space with the same settings succeeds.")
		step := fs.Uint64("step", 10000, "values the leader reserves per raise of a section's high-water mark")
		size := fs.Uint64("section-size", 100000, "keys per section (sharing one high-water mark)")
		cf := addClientFlags(fs)
		ops, err := cli.ParseFlags(fs, args[1:])
		if err != nil {
			return err
		}
		if len(ops) != 1 {
			return cli.Usagef("space create takes one NAME")
		}
		if *step == 0 || *size == 0 {
			return cli.Usagef("--step and --section-size must be at least 1")
		}
		c, ctx, cancel, err := cf.dial()
		if err != nil {
			return err
		}
		defer cancel()
		resp, err := c.CreateSpace(ctx, ops[0], *step, *size)
		if err != nil {
			return cli.CallError(err)
		}
		verb := "created"
		if !resp.GetCreated() {
			verb = "exists"
		}
		fmt.Printf("%s space %s step=%d section_size=%d\n", verb, resp.GetSpace().GetName(), resp.GetSpace().GetStep(), resp.GetSpace().GetSectionSize())
		return nil
	case "list":
		fs := cli.NewFlagSet("space list", "seqd space list", "Lists every space with its settings.")
		cf := addClientFlags(fs)
		ops, err := cli.ParseFlags(fs, args[1:])
		if err != nil {
			return err
		}
		if len(ops) != 0 {
			return cli.Usagef("space list takes no arguments")
		}
		c, ctx, cancel, err := cf.dial()
		if err != nil {
			return err
		}
		defer cancel()
		spaces, err := c.ListSpaces(ctx)
		if err != nil {
			return cli.CallError(err)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSTEP\tSECTION_SIZE")
		for _, s := range spaces {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", s.GetName(), s.GetStep(), s.GetSectionSize())
		}
		return tw.Flush()
	}
	return nil // cli.Subcommand refused any other
}

func cmdSpaceUpdate(args []string) error {
	fs := cli.NewFlagSet("space update", "seqd space update NAME --step N",
		"Changes a space's step (1 to 2^40). Its section size never changes.")
	step := fs.Uint64("step", 0, "values the leader reserves per raise of a section's high-water mark")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(ops) != 1:
		return cli.Usagef("space update takes one NAME")
	case *step < 1 || *step > seqd.MaxStep:
		return cli.Usagef("--step must be 1 to 2^40 (1099511627776), got %d", *step)
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	sp, err := c.UpdateSpace(ctx, ops[0], *step)
	if err != nil {
		return cli.CallError(err)
	}
	fmt.Printf("updated space %s step=%d section_size=%d\n", sp.GetName(), sp.GetStep(), sp.GetSectionSize())
	return nil
}

func cmdSpaceDelete(args []string) error {
	fs := cli.NewFlagSet("space delete", "seqd space delete NAME",
		"Deletes a space: calls for it fail (not_found) and it is no longer listed. Its high-water marks stay: "+
			"a space created again under its name (with its section size) continues above every value it ever issued.")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 {
		return cli.Usagef("space delete takes one NAME")
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	if err := c.DeleteSpace(ctx, ops[0]); err != nil {
		return cli.CallError(err)
	}
	fmt.Printf("deleted space %s\n", ops[0])
	return nil
}
