package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/seqd/seqd"
	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/client"
	"github.com/seqd/seqd/internal/cli"
	"github.com/seqd/seqd/internal/floorfile"
)

// cmdFloor runs `seqd floor ...`: starting points for keys moved to seqd.
func cmdFloor(args []string) error {
	if len(args) == 0 {
		return cli.Usagef("floor needs a subcommand: set or import")
	}
	switch args[0] {
	case "set":
		return cmdFloorSet(args[1:])
	case "import":
		return cmdFloorImport(args[1:])
	}
	return cli.Usagef("unknown floor subcommand %q (want set or import)", args[0])
}

func cmdFloorSet(args []string) error {
	fs := cli.NewFlagSet("floor set", "seqd floor set [--space S] FLOOR KEY...",
		"Makes every value of each KEY from now on larger than FLOOR (0 to 2^63-1). A floor raises the high-water mark of the key's section: "+
			"the other keys of the section jump above FLOOR too, and a key already above FLOOR is not changed.")
	space := fs.String("space", seqd.DefaultSpaceName, "space name")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) < 2 {
		return cli.Usagef("floor set takes a FLOOR and at least one KEY")
	}
	floor, err := strconv.ParseUint(ops[0], 10, 64)
	if err != nil || floor > seqd.MaxValue {
		return cli.Usagef("FLOOR must be 0 to 2^63-1 (9223372036854775807), got %q", ops[0])
	}
	keys, err := parseKeys(ops[1:])
	if err != nil {
		return err
	}
	c, ctx, cancel, err := cf.dial()
	if err != nil {
		return err
	}
	defer cancel()
	if err := c.SetFloor(ctx, *space, floor, keys...); err != nil {
		return cli.CallError(err)
	}
	fmt.Printf("floor %d set for %d key(s) of space %s\n", floor, len(keys), *space)
	return nil
}

func cmdFloorImport(args []string) error {
	fs := cli.NewFlagSet("floor import", "seqd floor import [--space S] [--check] FILE|-",
		"Sets a floor per key from FILE (or standard input): lines of \"KEY FLOOR\" (decimal; blank lines and lines starting with # are skipped), "+
			"streamed, one raise per section of the space (to the largest floor of its keys), progress on standard error. "+
			"A malformed line stops the import, naming it: the floors of the lines before it are set, none from it on. "+
			"A floor more than 40,960,000,000 above its key's current value is set in steps of that, 10 s apart (the raise budget), at most an hour of them. "+
			"--check reads the whole file and sets nothing. Running an import again is safe: a floor never lowers anything.")
	space := fs.String("space", seqd.DefaultSpaceName, "space name")
	check := fs.Bool("check", false, "only check the file")
	every := fs.Duration("progress", time.Second, "how often to report progress (0: never)")
	cf := addClientFlags(fs)
	ops, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 {
		return cli.Usagef("floor import takes one FILE (- for standard input)")
	}
	in := io.Reader(os.Stdin)
	if ops[0] != "-" {
		f, err := os.Open(ops[0])
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	imp := &floorImport{space: *space, every: *every, started: time.Now(), last: time.Now()}
	if !*check {
		opts, err := cf.options()
		if err != nil {
			return err
		}
		if imp.c, err = cf.newClient(opts); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), *cf.timeout)
		sp, err := spaceSettings(ctx, imp.c, *space)
		cancel()
		if err != nil {
			return err
		}
		imp.sectionSize, imp.timeout = sp.GetSectionSize(), *cf.timeout
	}
	err = floorfile.Scan(in, imp.add)
	var le *floorfile.LineError
	if err == nil || errors.As(err, &le) {
		// The lines before a malformed one are set, none after it.
		if ferr := imp.flush(); ferr != nil {
			err = ferr
		}
	}
	imp.report(true)
	if errors.As(err, &le) {
		what := "every floor before it was set"
		if imp.c == nil {
			what = "--check: nothing was set"
		}
		return fmt.Errorf("%s: %w (%s, none from line %d on)", ops[0], err, what, le.Line)
	}
	if err != nil {
		return cli.CallError(err)
	}
	return nil
}

// spaceSettings finds a space's settings (its section size, for batching
// by section).
func spaceSettings(ctx context.Context, c *client.Client, name string) (*seqv1.Space, error) {
	spaces, err := c.ListSpaces(ctx)
	if err != nil {
		return nil, cli.CallError(err)
	}
	for _, s := range spaces {
		if s.GetName() == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("space %q does not exist: create it first (seqd space create)", name)
}

// floorImport batches a floor file's floors by section: one key per
// section, with the largest floor of the section's keys (a floor raises the
// whole section), seqd.MaxKeys sections per call.
type floorImport struct {
	c           *client.Client // nil: --check
	space       string
	sectionSize uint64
	timeout     time.Duration

	batch    map[uint64][2]uint64 // section -> key, floor
	lines    int
	sections int // raised, batch after batch (a section in two batches counts twice)

	every         time.Duration
	started, last time.Time
}

func (imp *floorImport) add(_ int, key, floor uint64) error {
	imp.lines++
	if imp.c != nil {
		if imp.batch == nil {
			imp.batch = map[uint64][2]uint64{}
		}
		sec := key / imp.sectionSize
		if old, ok := imp.batch[sec]; !ok || floor > old[1] {
			imp.batch[sec] = [2]uint64{key, floor}
		}
		if len(imp.batch) == seqd.MaxKeys {
			if err := imp.flush(); err != nil {
				return err
			}
		}
	}
	imp.report(false)
	return nil
}

// flush sets the batch's floors. A floor more than seqd.MaxFloorRise above
// its key's current value is set in steps of MaxFloorRise,
// seqd.FloorRiseInterval apart (the raise budget a step spends): step k is
// at most k*MaxFloorRise above the key's value, so it is never more than
// MaxFloorRise above its section's mark, which the step before reached.
// A batch that would take longer than maxFloorSteps steps is refused
// before anything of it is set.
func (imp *floorImport) flush() error {
	if len(imp.batch) == 0 {
		return nil
	}
	keys, floors := make([]uint64, 0, len(imp.batch)), make([]uint64, 0, len(imp.batch))
	for _, kf := range imp.batch {
		keys, floors = append(keys, kf[0]), append(floors, kf[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), imp.timeout)
	cur, err := imp.c.Current(ctx, imp.space, keys...)
	cancel()
	if err != nil {
		return err
	}
	steps, far := floorSteps(floors, cur)
	if steps > maxFloorSteps {
		k := keys[far]
		return fmt.Errorf("%w: the floor %d of key %d is %d above its current value %d: a section rises by at most %d every %v, so this floor takes %d steps (%v); seqd takes at most %d steps (%v) for one batch of up to 10,000 sections",
			seqd.ErrInvalidArgument, floors[far], k, floors[far]-cur[far], cur[far], uint64(seqd.MaxFloorRise), seqd.FloorRiseInterval,
			steps, time.Duration(steps-1)*seqd.FloorRiseInterval, maxFloorSteps, time.Duration(maxFloorSteps-1)*seqd.FloorRiseInterval)
	}
	step := make([]uint64, len(floors))
	for k := uint64(1); k <= steps; k++ {
		if k > 1 {
			fmt.Fprintf(os.Stderr, "floor import: step %d of %d in %v (floors above %d set in steps of it, %v apart)\n",
				k, steps, seqd.FloorRiseInterval, uint64(seqd.MaxFloorRise), seqd.FloorRiseInterval)
			time.Sleep(seqd.FloorRiseInterval)
		}
		for i, f := range floors {
			step[i] = f
			if f > cur[i] && f-cur[i] > k*seqd.MaxFloorRise {
				step[i] = cur[i] + k*seqd.MaxFloorRise
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), imp.timeout)
		err := imp.c.SetFloors(ctx, imp.space, keys, step)
		cancel()
		if err != nil {
			return err
		}
	}
	imp.sections += len(keys)
	clear(imp.batch)
	return nil
}

// maxFloorSteps bounds the steps of one batch of floors: an hour of
// seqd.FloorRiseInterval.
const maxFloorSteps = 361

// floorSteps returns how many steps of seqd.MaxFloorRise the floors take
// above their keys' current values cur (1 when every one fits in one), and the
// index of a floor that takes that many.
func floorSteps(floors, cur []uint64) (steps uint64, far int) {
	steps = 1
	for i, f := range floors {
		if f <= cur[i] {
			continue
		}
		if n := (f - cur[i] + seqd.MaxFloorRise - 1) / seqd.MaxFloorRise; n > steps {
			steps, far = n, i
		}
	}
	return steps, far
}

// report writes the progress to standard error, at most every imp.every
// (and at the end, when final is set).
func (imp *floorImport) report(final bool) {
	now := time.Now()
	if !final && (imp.every <= 0 || now.Sub(imp.last) < imp.every) {
		return
	}
	imp.last = now
	rate := float64(imp.lines) / max(now.Sub(imp.started).Seconds(), 1e-3)
	if imp.c == nil {
		fmt.Fprintf(os.Stderr, "floor import --check: %d floors read (%.0f lines/s)\n", imp.lines, rate)
		return
	}
	fmt.Fprintf(os.Stderr, "floor import: %d floors read, %d section floors set (%.0f lines/s)\n", imp.lines, imp.sections, rate)
}
