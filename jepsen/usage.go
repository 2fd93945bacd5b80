package main

// The text of --help around the list of faults and the flags.

const usageHead = `Usage: cd jepsen && go run . [flags]

(jepsen/ is a Go module of its own, like bench/: run it from there.)

seqd's chaos test. It builds seqd from this repository (or uses --seqd-bin),
starts --nodes real seqd processes and runs concurrent clients against them
while a nemesis injects faults on a schedule; then it heals every fault,
waits --recovery, reads every key, and checks the history:

  order         C1 no value twice per key, C2 per-key real-time order,
                C3 Current bounds (DESIGN.md §2), over successful calls
  linear        every key's successful calls linearizable under the model of
                C1-C3, by an independent checker (porcupine), bounded by
                --linear-timeout (then decided by the forced order, exact
                for this model) and --linear-budget: unreached is unknown
  shape         one value per key, values from 1, Reserve's count, and
                increasing values for a key listed twice in one Next
  restart       after a full-cluster restart (kill-all) every value is above
                every value acknowledged before it
  final-reads   Current of every key succeeds once all faults are healed
  crashes       no seqd process exited or panicked on its own
  availability  ok rate, longest gap without a successful call, outage per
                fault and time from healing to the first ok call (reported,
                never a failure)

With --workload segment, --segments client.Segments (Leaf-segment mode, each
in its own client) hand out values of --keys keys (2 by default) from ranges
they reserve, next to the sequence clients calling the same keys; the checks
add segments: S1, no value twice per key across every segment and call, and
S2, each segment's values increase (across segments values are only
trend-increasing, so C2 and C3 cover the sequence clients only).

With --workload flake the clients ask for flake ids instead (README "Flake
ids"): pinned clients call IdService/NextIds on one node each, smart clients
the Go client's NextIds, and --generators embedded generators
(client.NewGenerator) issue ids in the client process, all but the first
closed (releasing their workers) and recreated every --generator-life. The
namespace --namespace has only --worker-bits of worker (8 workers by
default), so new holders reuse workers others released or lost, and 1 ms
units with --sequence-bits of sequence, so holders borrow later units; a
second namespace with the default layout gets --second-share of the calls.
Every node runs with --unsafe-clock-offset-file (a file of the harness next
to its data directory), which the clock faults rewrite. The checks:

  G1            no id returned twice in a namespace
  G2            per worker: ids of a call that completed before another began
                are smaller; one response's ids strictly increase
  G3            an id's decoded time within 1s of its call (harness wall
                clock); only in runs without clock faults
  grants        per worker, the grants the holders logged have rising tokens
                and ranges that start at or above every earlier range's end
  final-ids     after healing, NextIds succeeds on every node
  crashes, availability  as above

As root with ip and iptables, every node runs in its own network namespace
on a bridge in a private "switch" namespace (10.77.X.0/24), and the clients
run in their own namespace (the harness re-executes itself there), so links
can be cut with iptables; nothing gets an address outside those namespaces.
Otherwise (or with --net loopback) the nodes run on 127.0.0.1 and only
process faults (kill, pause) and membership faults are possible. Missing tools:
apt-get install -y iproute2 iptables.

Clients: --smart-clients use the Go client (leader tracking, retries over all
nodes); --pinned-per-node clients call one node each with no retries, as
Jepsen's clients do, which exposes a deposed leader that still answers.
Every call is recorded as ok, fail (certainly no effect) or info (unknown,
e.g. a timeout; never counted as a failure).

Results: store/<test>/<time>/ (and store/latest): history.jsonl (every call
and nemesis action, times in ns on one monotonic clock), results.json,
latency.png, rate.png, anomaly-*.html (porcupine timelines), jepsen.log,
n*.log (node logs).

Exit status: 0 valid, 1 anomalies found, 2 bad command line, 3 unknown
(e.g. the cluster never recovered, or interrupted), 4 harness error.

Operator faults (group operator) are an operator's procedures and mistakes,
run with the operator's tools: the seqd binary (node remove, backup,
restore), stopping and starting servers with their usual flags, copying and
deleting data directories. A refused action (a clear error and non-zero
exit, or a server that logs why and stays out) is correct; a repeated value
or one that goes backwards is not. Each fault's outcome (refused, served,
exited, rejoined) is in results.json and the summary.

Faults (--nemesis, comma-separated; groups kill, pause, partition, loss, all
(these four), membership (member-*), operator (the five after member-*),
fencing (stop-new-leader, restore-source-returns, restart-then-crash),
transfer (transfer-storm, pause-mid-transfer), clock (clock-*), holder
(pause-holder, partition-holder); "none" for no faults; NAME*W, for a fault
or a group, makes its lane pick it W times as often, e.g.
stale-copy*3,kill,pause):
`

const usageTail = `
Examples (in jepsen/):
  # CI: 3 nodes, about a minute, kill + pause + partition; fails on any anomaly
  go run . --net netns --nodes 3 --time-limit 45s --nemesis kill-leader,pause-leader,partition-leader \
      --nemesis-interval 3s --nemesis-duration 2s..4s --recovery 5s --quiet
  # the leader cut off 5s on / 5s off for 5 minutes
  go run . --time-limit 5m --nemesis partition-leader --nemesis-interval 5s --nemesis-duration 5s
  # 20 full-cluster restarts
  go run . --nemesis kill-all --nemesis-faults 20 --time-limit 30m
  # proof that it can fail (expect anomalies and exit status 1): no seqd lease, and a leader
  # whose raft timeouts are 5x the others' cut off; the same without the flag must pass
  go run . --unsafe-disable-lease --nemesis partition-slow-leader --slow-node n1 --slow-factor 5 \
      --nemesis-interval 5s --nemesis-duration 4s --op-timeout 300ms --time-limit 3m
  # membership changes by seqd's own operator procedures (seqd node remove, wipe, rejoin)
  go run . --nemesis membership --nemesis-interval 4s --nemesis-duration 2s..4s --time-limit 90s
  # operator faults (stale copies, a wipe during a full restart, a misplaced restore, mixed
  # leases, a full disk), mixed with kill, pause and partition on two lanes
  go run . --nemesis operator,kill-leader,pause-leader,partition-leader --nemesis-overlap --time-limit 5m
  # flake ids under clock faults (the clock group) and holder faults
  go run . --workload flake --nemesis clock,pause-holder,kill-leader --time-limit 5m
  # proof that it can fail (expect duplicate ids, G1, and exit status 1): a naive Snowflake
  go run . --workload flake --unsafe-flake-trust-clock --nemesis clock-all,clock-leader --time-limit 2m
  # 6 raft groups with the lease handoff (seqd's default): leader faults hit one group's
  # leader, planned leadership moves (drains) in storms and with the old leader paused
  # mid-handoff, one group's raft traffic cut on its leader (the CI line; per-group outages
  # in the summary)
  go run . --nodes 3 --groups 6 --time-limit 45s \
      --nemesis kill-leader,pause-leader,transfer-storm,pause-mid-transfer,group-isolation \
      --nemesis-interval 3s --nemesis-duration 2s..4s --recovery 5s --quiet
  # fencing and admission (docs/jepsen-fencing.md): a new leader stopped before it serves while
  # the old one is cut off (a lease longer than an election, slower raft timers on n1), a restored
  # cluster's source coming back, a crash that meets a restart
  go run . --nemesis stop-new-leader,kill-leader,pause-leader,partition-leader --nemesis-overlap \
      --slow-node n1 --lease 3s --op-timeout 300ms --time-limit 5m
  go run . --nemesis restore-source-returns,restart-then-crash,kill-leader,pause-leader,partition-leader \
      --nemesis-overlap --time-limit 5m
  # remove namespaces and processes left by a killed harness
  go run . --cleanup
`
