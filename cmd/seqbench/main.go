// Command seqbench drives a load against a running seqd cluster and reports
// throughput and latency, and serves the bare baseline it is compared with.
//
//	seqbench [flags]                               load a cluster (seqbench -h for the flags)
//	seqbench baseline-server [--listen ADDR]       a SequenceService that only increments a counter
//
// Every flag can also be set as SEQD_<NAME> in the environment. Exit status:
// 0 on success, 1 when the load fails (no call succeeded, or the cluster
// refuses the calls), 2 for a malformed command line.
//
// The failover benchmarks (kill -9 of the leader of real seqd processes) are
// Go benchmarks of this package: go test -run '^$' -bench Failover ./cmd/seqbench.
package main

import (
	"os"

	"github.com/seqd/seqd/internal/bench"
	"github.com/seqd/seqd/internal/cli"
)

func main() {
	os.Exit(cli.Exit("seqbench", bench.Run("seqbench", os.Args[1:])))
}
