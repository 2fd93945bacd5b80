package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/cli"
)

func parseKeys(ops []string) ([]uint64, error) {
	if len(ops) == 0 {
		return nil, cli.Usagef("at least one KEY is required")
	}
	keys := make([]uint64, len(ops))
	for i, s := range ops {
		k, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, cli.Usagef("KEY %q is not an unsigned 64-bit integer", s)
		}
		keys[i] = k
	}
	return keys, nil
}

func keysCommand(args []string, name, desc string, do func(*client.Client, context.Context, string, []uint64) ([]uint64, error)) error {
	fs := cli.NewFlagSet(name, "seqd "+name+" [--space S] KEY...", desc)
	space := fs.String("space", seqd.DefaultSpaceName, "space name")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	keys, err := parseKeys(ops)
	if err != nil {
		return err
	}
	if len(keys) > seqd.MaxKeys {
		return cli.Usagef("%s takes at most %d keys per call, got %d", name, seqd.MaxKeys, len(keys))
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	vals, err := do(c, ctx, *space, keys)
	if err != nil {
		return cli.CallError(err)
	}
	for _, v := range vals {
		fmt.Println(v)
	}
	return nil
}

func cmdNext(args []string) error {
	return keysCommand(args, "next", "Prints one new value per KEY, one per line, in order.",
		func(c *client.Client, ctx context.Context, space string, keys []uint64) ([]uint64, error) {
			return c.Next(ctx, space, keys...)
		})
}

func cmdCurrent(args []string) error {
	return keysCommand(args, "current", "Prints the current value of each KEY, one per line (0: none issued).",
		func(c *client.Client, ctx context.Context, space string, keys []uint64) ([]uint64, error) {
			return c.Current(ctx, space, keys...)
		})
}

func cmdReserve(args []string) error {
	fs := cli.NewFlagSet("reserve", "seqd reserve [--space S] KEY COUNT",
		"Reserves COUNT consecutive values for KEY and prints the first and the last, space-separated.")
	space := fs.String("space", seqd.DefaultSpaceName, "space name")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 2 {
		return cli.Usagef("reserve takes KEY COUNT")
	}
	keys, err := parseKeys(ops[:1])
	if err != nil {
		return err
	}
	count, err := strconv.ParseUint(ops[1], 10, 64)
	if err != nil || count == 0 || count > seqd.MaxReserveCount {
		return cli.Usagef("COUNT %q must be a whole number from 1 to %d", ops[1], seqd.MaxReserveCount)
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	first, err := c.Reserve(ctx, *space, keys[0], uint32(count))
	if err != nil {
		return cli.CallError(err)
	}
	fmt.Println(first, first+count-1)
	return nil
}
