package cli

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"connectrpc.com/connect"
)

// ErrUsage marks errors in the command line; main exits 2 for them.
var ErrUsage = errors.New("usage")

// Usagef returns a command-line error with the formatted message.
func Usagef(format string, args ...any) error {
	return usageError(fmt.Sprintf(format, args...))
}

// usageError is a command-line error: its text is the message alone, and
// errors.Is(err, ErrUsage) holds.
type usageError string

func (e usageError) Error() string        { return string(e) }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Exit returns the exit status for a command's error and prints the error
// (as "prog: message") on stderr: 0 for none or a help request, 2 for a
// usage error, 1 for anything else (the call or the server failed).
func Exit(prog string, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		return 2
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		return 1
	}
}

// CallError formats a failed call as "code: message" (a Connect error), or
// returns err as it is.
func CallError(err error) error {
	if ce, ok := err.(*connect.Error); ok {
		return fmt.Errorf("%s: %s", ce.Code(), ce.Message())
	}
	return err
}

// Subcommand checks the first of args against a command's subcommands
// (each given as "NAME rest of its synopsis"): nil when it names one; for
// none, or an unknown one, a usage error listing them; for -h, --help or
// help, the list on stdout and flag.ErrHelp (exit status 0).
func Subcommand(args []string, synopsis, description string, subs ...string) error {
	list := "  " + strings.Join(subs, "\n  ")
	if len(args) > 0 {
		switch args[0] {
		case "-h", "--help", "help":
			fmt.Printf("Usage: %s\n\n%s\n\nSubcommands (each takes -h):\n%s\n", synopsis, description, list)
			return flag.ErrHelp
		}
		for _, s := range subs {
			if name, _, _ := strings.Cut(s, " "); name == args[0] {
				return nil
			}
		}
		return Usagef("unknown subcommand %q; usage: %s\n%s", args[0], synopsis, list)
	}
	return Usagef("a subcommand is needed; usage: %s\n%s", synopsis, list)
}

// LoadCA reads a CA bundle (PEM) named by a flag, such as --tls-ca; a file
// that cannot be read or holds no certificate is a usage error.
func LoadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, Usagef("CA bundle: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, Usagef("CA bundle %s holds no PEM certificate", path)
	}
	return pool, nil
}

// EnvName returns the environment variable that sets flag name.
func EnvName(name string) string {
	return "SEQD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// ParseFlags parses args with flags and operands interspersed, then fills
// every flag not given on the command line from SEQD_<NAME> in the
// environment. It returns the operands.
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var operands []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(os.Stdout)
				fs.Usage()
				return nil, err
			}
			return nil, Usagef("%v (see %s -h)", err, fs.Name())
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			operands = append(operands, args[1:]...)
			break
		}
		operands = append(operands, args[0])
		args = args[1:]
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = Usagef("invalid %s=%q: %v", EnvName(f.Name), v, e)
			}
		}
	})
	return operands, err
}

// NewFlagSet returns a flag set whose usage text lists the flags with their
// environment variables.
func NewFlagSet(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: %s\n\n%s\n\nFlags (each also settable as SEQD_<NAME>):\n", synopsis, description)
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(out, "  --%s\n      %s%s [%s]\n", f.Name, f.Usage, def, EnvName(f.Name))
		})
	}
	return fs
}
