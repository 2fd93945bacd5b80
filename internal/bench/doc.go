// Package bench is seqd's load tool and the bare baseline server it is
// measured against: the code behind cmd/seqbench (and the deprecated alias
// seqd bench). The load tool drives a running cluster through package client
// with internal/loadgen's workload and reports throughput, latency
// percentiles, raft entries per id and the client's coalescing; the baseline
// server answers SequenceService from an atomic counter on seqd's HTTP
// server settings, the RPC ceiling of the machine.
//
// It talks to a cluster only as a client does; it never starts a server of
// seqd's own.
package bench
