package cli_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/seqd/seqd/internal/cli"
)

func TestEnvName(t *testing.T) {
	for name, want := range map[string]string{"addr": "SEQD_ADDR", "data-dir": "SEQD_DATA_DIR", "max-in-flight": "SEQD_MAX_IN_FLIGHT"} {
		if got := cli.EnvName(name); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestParseFlags: flags and operands in any order, "--" ends the flags, a
// flag not on the command line comes from SEQD_<NAME>, and the command line
// wins over the environment.
func TestParseFlags(t *testing.T) {
	fs := cli.NewFlagSet("next", "seqd next [--space S] KEY...", "Prints values.")
	space := fs.String("space", "default", "space name")
	addr := fs.String("addr", "127.0.0.1:7700", "addresses")
	timeout := fs.Duration("timeout", 0, "timeout")
	t.Setenv("SEQD_ADDR", "10.0.0.1:7700")
	t.Setenv("SEQD_SPACE", "from-env")
	t.Setenv("SEQD_TIMEOUT", "3s")
	ops, err := cli.ParseFlags(fs, []string{"1", "--space", "orders", "2", "--", "--3"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ops, []string{"1", "2", "--3"}) {
		t.Errorf("operands %q, want [1 2 --3]", ops)
	}
	if *space != "orders" || *addr != "10.0.0.1:7700" || timeout.String() != "3s" {
		t.Errorf("space %q addr %q timeout %v: want the command line's space and the environment's addr and timeout", *space, *addr, *timeout)
	}
}

// TestUsageErrors: an unknown flag, a malformed value and a malformed
// environment variable are usage errors (exit 2) that say what is wrong.
func TestUsageErrors(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := cli.NewFlagSet("reserve", "seqd reserve KEY COUNT", "Reserves.")
		fs.Int("count", 1, "count")
		return fs
	}
	for _, c := range []struct {
		env  string
		args []string
		msg  string
	}{
		{"", []string{"--bogus"}, "bogus"},
		{"", []string{"--count", "many"}, "see reserve -h"},
		{"SEQD_COUNT=many", nil, `invalid SEQD_COUNT="many"`},
	} {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		_, err := cli.ParseFlags(newFS(), c.args)
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %q: %v; want a usage error mentioning %q", c.env, c.args, err, c.msg)
		}
	}
	if err := cli.Usagef("KEY %q is not a number", "x"); !errors.Is(err, cli.ErrUsage) || err.Error() != `KEY "x" is not a number` {
		t.Errorf("Usagef: %v", err)
	}
}

// TestUsageText lists every flag with its environment variable and default.
func TestUsageText(t *testing.T) {
	fs := cli.NewFlagSet("serve", "seqd serve [flags]", "Runs a node.")
	fs.String("data-dir", "./seqd-data", "data directory")
	fs.Bool("verbose", false, "say more")
	var b strings.Builder
	fs.SetOutput(&b)
	fs.Usage()
	for _, want := range []string{"Usage: seqd serve [flags]", "Runs a node.", "--data-dir", "(default ./seqd-data) [SEQD_DATA_DIR]", "say more [SEQD_VERBOSE]"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("usage text lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "default false") {
		t.Errorf("usage text shows a false default:\n%s", b.String())
	}
}

// TestExit: 0 for success and -h, 2 for usage errors, 1 otherwise; errors
// go to stderr prefixed with the program's name.
func TestExit(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{fmt.Errorf("parsing: %w", cli.Usagef("COUNT must be at most 1000000")), 2, "seqd: parsing: COUNT must be at most 1000000\n"},
		{cli.CallError(connect.NewError(connect.CodeUnavailable, errors.New("no leader known"))), 1, "seqd: unavailable: no leader known\n"},
	} {
		var code int
		got := captureStderr(t, func() { code = cli.Exit("seqd", c.err) })
		if code != c.code || got != c.stderr {
			t.Errorf("Exit(%v) = %d, stderr %q; want %d, %q", c.err, code, got, c.code, c.stderr)
		}
	}
}

func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = old }()
	f()
	w.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}
