package main

import (
	"fmt"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/internal/cli"
)

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
