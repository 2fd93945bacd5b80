// Command jepsen is seqd's chaos-testing harness, in the spirit of Jepsen.
//
// It builds seqd from this repository, starts N real `seqd serve` processes
// (each in its own network namespace on a private bridge when run as root
// with ip and iptables; on loopback otherwise), runs concurrent clients
// against them while a nemesis kills, pauses, partitions and degrades the
// nodes and changes the cluster's membership, heals everything, reads every key one last time, and checks the
// whole history for the contract's guarantees (C1-C3 of DESIGN.md §2,
// pairwise and, with porcupine, as linearizability of each key's history;
// a full-cluster restart never going backwards) and for availability. Results
// go to store/<test>/<time>/: history.jsonl, results.json, latency.png,
// rate.png, an HTML timeline per anomaly, and the node logs.
//
// It is a module of its own (like bench/): run `cd jepsen && go run . --help`
// for every option.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit statuses.
const (
	exitValid   = 0 // every checker passed
	exitInvalid = 1 // an anomaly was found
	exitUsage   = 2 // a malformed command line
	exitUnknown = 3 // the verdict is unknown (no final reads, interrupted, harness trouble during the run)
	exitHarness = 4 // the harness could not run the test (setup failed)
)

// runnerEnv carries the plan from the harness to itself re-executed in the
// client namespace.
const runnerEnv = "SQJ_RUNNER_PLAN"

func main() {
	os.Exit(mainExit(os.Args[1:]))
}

func mainExit(args []string) int {
	out := io.Writer(os.Stderr)
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			out = os.Stdout
		}
	}
	cfg, err := parse(args, out)
	if errors.Is(err, flag.ErrHelp) {
		return exitValid
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: %v (see --help)\n", err)
		return exitUsage
	}
	if p := os.Getenv(runnerEnv); p != "" {
		var plan plan
		if err := json.Unmarshal([]byte(p), &plan); err != nil {
			fmt.Fprintf(os.Stderr, "jepsen: bad %s: %v\n", runnerEnv, err)
			return exitHarness
		}
		return run(cfg, plan)
	}
	switch {
	case cfg.Cleanup:
		return cleanup(cfg.Force)
	case cfg.Analyze != "":
		return analyze(cfg)
	}
	return launch(cfg, args)
}
