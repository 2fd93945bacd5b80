// Command seqd runs a seqd server and talks to a seqd cluster.
//
//	seqd serve                          run a node (a single-node cluster on defaults)
//	seqd next [--space S] KEY...        one new value per key
//	seqd reserve [--space S] KEY COUNT  COUNT consecutive values for KEY
//	seqd current [--space S] KEY...     the current value of each key
//	seqd space create NAME [--step N] [--section-size N]
//	seqd space update NAME --step N
//	seqd space delete NAME
//	seqd space list
//	seqd floor set|import               floors: where keys moved from elsewhere continue
//	seqd id next|decode|namespace|workers  flake ids
//	seqd status                         the cluster's nodes, leader and term
//	seqd node remove ID                 remove a server from the raft configuration
//	seqd node drain [--undo] ID         move every raft group ID leads to other servers
//
// Exit status: 0 on success, 1 when the call or the server fails, 2 for a
// malformed command line.
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/seqd/seqd/internal/bench"
	"github.com/seqd/seqd/internal/cli"
)

const usage = `seqd: per-key monotonic 64-bit sequences and unique time-ordered ids from a Raft-replicated cluster.

Usage:
  seqd serve [flags]                         run a node (no flags: a single-node cluster)
  seqd next [--space S] KEY...               print one new value per key
  seqd reserve [--space S] KEY COUNT         print the first and last of COUNT new values
  seqd current [--space S] KEY...            print the current value of each key
  seqd space create NAME [--step N] [--section-size N]
  seqd space update NAME --step N            change a space's step
  seqd space delete NAME                     delete a space (its marks stay)
  seqd space list
  seqd floor set [--space S] FLOOR KEY...    every value of each key from now on above FLOOR
  seqd floor import [--space S] FILE         a floor per key from lines of "KEY FLOOR"
  seqd id next [--namespace N] [--shard N] [COUNT]  print COUNT new flake ids (unique, time-ordered)
  seqd id decode [--namespace N] ID...       print each flake id's time, worker and holder
  seqd id namespace create NAME [--layout L] [--obfuscation ff1|ff1-hour]
  seqd id namespace delete NAME
  seqd id namespace list
  seqd id workers [--namespace N] [--reclaim W]
  seqd status                                show nodes, leader, term and lease
  seqd bench [flags]                         deprecated: use seqbench (the same flags)
  seqd node remove ID                        remove a server from the raft configuration
  seqd node drain [--undo] ID                move every raft group ID leads to other servers
  seqd backup FILE                           save the cluster's high-water marks to FILE
  seqd restore --margin N [flags] FILE       build a new cluster's first node from a backup
  seqd health [--addr A]                     exit 0 if the node is SERVING (gRPC health)

Run "seqd COMMAND -h" for a command's flags. Client commands take --addr
(comma-separated node API addresses, default 127.0.0.1:7700, or SEQD_ADDR),
before or after the command: "seqd --addr A next 1" is "seqd next --addr A 1".
`

// commandPaths are the commands of usage, each as its words ("id",
// "namespace", "create"): the words of a usage line after "seqd" up to the
// first that is not a lower-case word (an argument, a flag). Read from the
// usage text, so that every command it lists takes flags before it.
var commandPaths = func() [][]string {
	var out [][]string
	for _, line := range strings.Split(usage, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "seqd" || !strings.HasPrefix(line, "  seqd ") {
			continue
		}
		var path []string
		for _, w := range f[1:] {
			if strings.ToLower(w) != w || strings.ContainsAny(w, "[]-.|") {
				break
			}
			path = append(path, w)
		}
		out = append(out, path)
	}
	return out
}()

// commandLen is how many words of args, from the first, name a command of
// commandPaths (or a prefix of one: "space" alone): 0 if none.
func commandLen(args []string) int {
	n := 0
	for _, path := range commandPaths {
		k := 0
		for k < len(path) && k < len(args) && args[k] == path[k] {
			k++
		}
		n = max(n, k)
	}
	return n
}

// flagsAfterCommand moves flags given before the command ("seqd --addr A
// next 1") to after it and its subcommands ("seqd next --addr A 1"), where
// each command's flag set reads them. Arguments that start with a command
// are returned as they are; flags followed by no command are a usage error
// that says where flags go.
func flagsAfterCommand(args []string) ([]string, error) {
	if !strings.HasPrefix(args[0], "-") || args[0] == "-h" || args[0] == "--help" {
		return args, nil
	}
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if n := commandLen(args[i:]); n > 0 {
			out := append(slices.Clone(args[i:i+n]), args[:i]...)
			return append(out, args[i+n:]...), nil
		}
	}
	return nil, cli.Usagef("%s: flags go after the command, as in \"seqd next --addr 127.0.0.1:7700 42\" (run \"seqd -h\" for the commands)", args[0])
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	args, err := flagsAfterCommand(args)
	if err != nil {
		return cli.Exit("seqd", err)
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		err = serve(rest)
	case "next":
		err = cmdNext(rest)
	case "reserve":
		err = cmdReserve(rest)
	case "current":
		err = cmdCurrent(rest)
	case "space":
		err = cmdSpace(rest)
	case "floor":
		err = cmdFloor(rest)
	case "status":
		err = cmdStatus(rest)
	case "id":
		err = cmdID(rest)
	case "bench":
		// Deprecated: the load tool is its own command now. The alias stays
		// for one release so that scripts keep working.
		fmt.Fprintln(os.Stderr, `seqd: "seqd bench" is deprecated and goes in the next release; use seqbench (go run ./cmd/seqbench), which takes the same flags`)
		err = bench.Run("seqd bench", rest)
	case "node":
		err = cmdNode(rest)
	case "health":
		err = cmdHealth(rest)
	case "backup":
		err = cmdBackup(rest)
	case "restore":
		err = cmdRestore(rest)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "seqd: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	return cli.Exit("seqd", err)
}
