package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/jepsen/checker"
	"github.com/seqd/seqd/jepsen/record"
	"github.com/seqd/seqd/jepsen/workload"
)

func TestParseDefaults(t *testing.T) {
	cfg, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Nodes != 3 || cfg.durMin != 5*time.Second || cfg.durMax != 5*time.Second || cfg.Test != "kill-leader+pause-leader+partition-leader" {
		t.Errorf("%+v", cfg)
	}
}

func TestParse(t *testing.T) {
	cfg, err := parse(strings.Fields("--nemesis-duration 3s..5s --nemesis partition-slow-leader --slow-node n2 --slow-factor 4 --unsafe-disable-lease --node-arg n1=--log-level=debug"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.durMin != 3*time.Second || cfg.durMax != 5*time.Second {
		t.Errorf("range %v..%v", cfg.durMin, cfg.durMax)
	}
	if cfg.Test != "partition-slow-leader-unsafe" {
		t.Errorf("test name %q", cfg.Test)
	}
	want := []string{"--raft-heartbeat-timeout=1.2s", "--raft-election-timeout=1.2s", "--raft-leader-lease-timeout=1.2s"}
	if !slices.Equal(cfg.nodeArgs["n2"], want) || !slices.Equal(cfg.nodeArgs["n1"], []string{"--log-level=debug"}) {
		t.Errorf("node args %v", cfg.nodeArgs)
	}
	for _, bad := range []string{
		"--nodes 0", "--nemesis-duration 5s..3s", "--nemesis-duration x", "--mix next=0", "--net wifi",
		"--nemesis member-remove --nodes 2", "--nemesis bogus", "--nemesis partition-slow-leader", "--slow-node n4",
		"--node-arg n1", "--node-arg n9=--x", "--loss 0", "--keys 0", "extra",
		"--pinned-per-node 0 --smart-clients 0", "--groups 0", "--groups 257",
		"--nemesis transfer-storm --seqd-arg=--lease-handoff=false", "--nemesis pause-mid-transfer --seqd-arg=--lease-handoff=false",
		"--nemesis transfer-storm --seqd-arg=--lease-handoff --seqd-arg=--lease-handoff=0",
	} {
		if _, err := parse(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

func TestParseFencing(t *testing.T) {
	cfg, err := parse(strings.Fields("--nemesis fencing,kill-leader --failover-target 7s"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.spare || cfg.FailoverTarget != 7*time.Second {
		t.Errorf("spare %v, failover target %v", cfg.spare, cfg.FailoverTarget)
	}
	if cfg, _ := parse(strings.Fields("--nemesis restart-then-crash,stop-new-leader"), io.Discard); cfg.spare || cfg.FailoverTarget != 10*time.Second {
		t.Errorf("spare %v without restore-source-returns, failover target %v", cfg.spare, cfg.FailoverTarget)
	}
	if _, err := parse(strings.Fields("--failover-target 0s"), io.Discard); err == nil {
		t.Error("--failover-target 0s accepted")
	}
}

func TestParseGroups(t *testing.T) {
	cfg, err := parse(strings.Fields("--groups 6"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Groups != 6 || cfg.SectionSize != 2 || cfg.Smart != 128 || cfg.PinnedPerNode != 16 {
		t.Errorf("groups %d section size %d", cfg.Groups, cfg.SectionSize)
	}
	if cfg, err = parse(strings.Fields("--groups 6 --section-size 8"), io.Discard); err != nil || cfg.SectionSize != 8 {
		t.Errorf("explicit section size: %v %+v", err, cfg)
	}
	for _, ok := range []string{"--groups 6 --nemesis transfer,kill-leader --seqd-arg=--lease-handoff", "--groups 6 --nemesis transfer,kill-leader"} {
		if _, err = parse(strings.Fields(ok), io.Discard); err != nil {
			t.Errorf("transfer faults with the lease handoff (%s): %v", ok, err)
		}
	}
	if cfg, err = parse(nil, io.Discard); err != nil || cfg.Groups != 1 || cfg.SectionSize != 8 {
		t.Errorf("defaults: %v %+v", err, cfg)
	}
}

func TestParseMembership(t *testing.T) {
	cfg, err := parse(strings.Fields("--nemesis membership --nodes 5"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Test != "membership" {
		t.Errorf("test name %q", cfg.Test)
	}
	if _, err := parse(strings.Fields("--nemesis kill-leader,member-wipe"), io.Discard); err != nil {
		t.Error(err)
	}
}

func TestParseOperator(t *testing.T) {
	cfg, err := parse(strings.Fields("--nemesis operator,kill-leader"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// stale-copy makes n1 found the cluster alone; disk-full gives every
	// node a small disk.
	if !cfg.bootstrapSingle || len(cfg.smallDisk) != 3 || cfg.diskSize != 32<<20 || cfg.Test != "operator+kill-leader" {
		t.Errorf("%+v", cfg)
	}
	cfg, err = parse(strings.Fields("--nemesis lease-change --bootstrap all --small-disk n2 --small-disk-size 64m --small-disk-fs ext4"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.bootstrapSingle || !cfg.smallDisk["n2"] || len(cfg.smallDisk) != 1 || cfg.diskSize != 64<<20 {
		t.Errorf("%+v", cfg)
	}
	if cfg, _ := parse(strings.Fields("--nemesis kill-leader"), io.Discard); cfg.bootstrapSingle || len(cfg.smallDisk) != 0 {
		t.Errorf("no operator faults: single %v, disks %v", cfg.bootstrapSingle, cfg.smallDisk)
	}
	for _, bad := range []string{
		"--bootstrap sometimes", "--small-disk n7", "--small-disk-size 12q", "--small-disk-size 100k", "--small-disk-fs zfs",
		"--nemesis lease-change --lease-change-to 500ms", "--bootstrap single --nodes 1", "--bootstrap-alone -1s",
	} {
		if _, err := parse(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"32m": 32 << 20, "1G": 1 << 30, "512k": 512 << 10, "4096": 4096} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "m", "-1m", "1.5m", "99999999999g"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var b strings.Builder
	fs := newFlags(&config{}, &b)
	fs.Usage()
	out := b.String()
	for _, want := range []string{"--nemesis", "-time-limit", "-unsafe-disable-lease", "partition-ring", "membership", "member-remove", "member-return", "member-wipe", "Exit status", "-cleanup",
		"operator", "stale-copy", "wipe-restart", "restore-mistake", "lease-change", "disk-full", "-bootstrap", "-small-disk", "-lease-change-to", "-linear-timeout", "-linear-budget",
		"stop-new-leader", "restore-source-returns", "restart-then-crash", "fencing", "-failover-target"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// writeHistory stores a synthetic test directory.
func writeHistory(t *testing.T, ops []record.Op) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store", "synthetic", "20260101T000000")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := record.NewRecorder(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		r.Add(o)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func synthetic(stale bool, final bool) []record.Op {
	var ops []record.Op
	for i := range 200 {
		node := []string{"n1", "n2", "n3"}[i%3]
		ops = append(ops, record.Op{Client: "s0", Node: node, F: record.Next, Keys: []uint64{uint64(i % 4)}, Type: record.OK,
			Values: []uint64{uint64(100 + i)}, Invoke: ms(10 * i), Complete: ms(10*i + 2)})
	}
	ops = append(ops,
		record.Op{Client: record.NemesisClient, F: record.FaultStart, Fault: "partition-leader", FaultID: 1, Class: "network", Targets: []string{"n1", "|n2+n3"}, Type: record.Info, Invoke: ms(500), Complete: ms(501)},
		record.Op{Client: record.NemesisClient, F: record.FaultHeal, Fault: "partition-leader", FaultID: 1, Class: "network", Targets: []string{"n1", "|n2+n3"}, Type: record.Info, Invoke: ms(1200), Complete: ms(1201)})
	if stale {
		// A deposed leader answers after the new one served more.
		ops = append(ops, record.Op{Client: "p-n1-0", Node: "n1", F: record.Next, Keys: []uint64{1}, Type: record.OK, Values: []uint64{50}, Invoke: ms(800), Complete: ms(801)})
	}
	if final {
		ops = append(ops, record.Op{Client: "final", F: record.Current, Keys: []uint64{0, 1, 2, 3}, Type: record.OK, Values: []uint64{400, 400, 400, 400}, Invoke: ms(3000), Complete: ms(3001)})
	}
	return ops
}

func TestAnalyze(t *testing.T) {
	cases := []struct {
		name         string
		stale, final bool
		code         int
		valid        string
	}{
		{"valid", false, true, exitValid, "true"},
		{"anomaly", true, true, exitInvalid, "false"},
		{"no final reads", false, false, exitUnknown, `"unknown"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeHistory(t, synthetic(c.stale, c.final))
			stdout := os.Stdout
			devnull, _ := os.Open(os.DevNull)
			os.Stdout = devnull
			code := mainExit([]string{"--analyze", dir})
			os.Stdout = stdout
			devnull.Close()
			if code != c.code {
				t.Fatalf("exit %d, want %d", code, c.code)
			}
			b, err := os.ReadFile(filepath.Join(dir, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			var res map[string]json.RawMessage
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			if string(res["valid"]) != c.valid {
				t.Errorf("results.json valid %s, want %s", res["valid"], c.valid)
			}
			for _, f := range []string{"latency.png", "rate.png"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
			htmls, _ := filepath.Glob(filepath.Join(dir, "anomaly-*-C2-key1.html"))
			if c.stale != (len(htmls) > 0) {
				t.Errorf("timelines %v", htmls)
			}
		})
	}
}

func TestSummaryMentionsVerdict(t *testing.T) {
	dir := writeHistory(t, synthetic(true, true))
	r := analyzeOps(synthetic(true, true), dir, checker.Options{Limit: 5}, &meta{Test: "synthetic", Dir: dir, Nodes: 3})
	var b strings.Builder
	printSummary(&b, r)
	for _, want := range []string{"INVALID", "C2 1", "anomaly:      C2 key 1", "exit status:  1", "timeline:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSummaryListsOperatorOutcomes(t *testing.T) {
	ops := append(synthetic(false, true),
		record.Op{Client: record.NemesisClient, F: record.FaultStart, Fault: "stale-copy", FaultID: 2, Class: "operator", Targets: []string{"n1 back on its copy"}, Type: record.Info, Invoke: ms(1300), Complete: ms(1400)},
		record.Op{Client: record.NemesisClient, F: record.FaultHeal, Fault: "stale-copy", FaultID: 2, Class: "operator", Targets: []string{"n1 back on its copy"}, Type: record.Info, Invoke: ms(1600), Complete: ms(1700),
			Outcome: []string{"n1 refused (logged: its data directory is an older copy)"}})
	dir := writeHistory(t, ops)
	r := analyzeOps(ops, dir, checker.Options{Limit: 5}, &meta{Test: "synthetic", Dir: dir, Nodes: 3, SmallDisks: []string{"n1: tmpfs 32m on /x"}})
	var b strings.Builder
	printSummary(&b, r)
	for _, want := range []string{"operator:     stale-copy", "n1 back on its copy", "→ n1 refused", "small disks:  n1: tmpfs", "VALID"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

func TestParseFlake(t *testing.T) {
	cfg, err := parse(strings.Fields("--workload flake --nemesis clock,holder,kill-leader --unsafe-flake-trust-clock --generator-life 1s..2s --holder-pause 11s"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Test != "flake-clock+holder+kill-leader-trust-clock" || cfg.genLife != [2]time.Duration{time.Second, 2 * time.Second} ||
		cfg.holderPause != [2]time.Duration{11 * time.Second, 11 * time.Second} || cfg.holderPartition[0] != 32*time.Second {
		t.Errorf("%+v", cfg)
	}
	if cfg, err := parse(nil, io.Discard); err != nil || cfg.Workload != "sequence" || cfg.Test != "kill-leader+pause-leader+partition-leader" {
		t.Errorf("the default workload: %+v %v", cfg, err)
	}
	for _, bad := range []string{"--workload ids", "--workload flake --worker-bits 0", "--workload flake --worker-bits 20 --sequence-bits 4",
		"--workload flake --max-ids 0", "--workload flake --second-share 2", "--workload flake --generator-life x", "--holder-partition 5s..1s",
		"--workload flake --pinned-per-node 0 --smart-clients 0 --generators 0", "--workload flake --second-namespace jepsen-ids"} {
		if _, err := parse(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

// TestAnalyzeFlake re-checks a flake history with a duplicate id: G1
// fails, the summary shows both calls, and the exit status is 1.
func TestAnalyzeFlake(t *testing.T) {
	l := workload.SmallLayout(3, 4)
	wall := l.EpochMs + 86_400_000
	id := func(ms int64, w uint64) uint64 { return uint64(l.Compose(l.Unit(wall+ms), w, 0)) }
	call := func(client, holder string, at int64, ids ...uint64) record.Op {
		return record.Op{Client: client, Node: "embedded", Holder: holder, F: record.IDs, Namespace: "ns", Count: uint32(len(ids)), Type: record.OK,
			Values: ids, Invoke: ms(int(at)), Complete: ms(int(at) + 1), WallMs: wall + at}
	}
	final := func(node string) record.Op {
		return record.Op{Client: "final-" + node, Node: node, Holder: node, F: record.IDs, Namespace: "ns", Count: 1, Type: record.OK,
			Values: []uint64{id(900, 5)}, Invoke: ms(900), Complete: ms(901), WallMs: wall + 900}
	}
	ops := []record.Op{
		{Client: record.HarnessClient, F: record.NamespaceInfo, Namespace: "ns", Layout: &l, Type: record.Info},
		call("g1", "g1.1", 10, id(10, 2)),
		call("g2", "g2.1", 500, id(10, 2)),
		final("n1"),
	}
	for i := range ops {
		ops[i].Index = int64(i)
	}
	dir := writeHistory(t, ops)
	r := analyzeOps(ops, dir, checker.Options{Limit: 5}, &meta{Test: "synthetic-flake", Dir: dir, Nodes: 1})
	var b strings.Builder
	printSummary(&b, r)
	for _, want := range []string{"G1 unique FAIL (1 duplicates)", "G2 worker order FAIL", "holder g2.1", "namespace:    ns", "w2 2/2/2", "exit status:  1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	if r.exitCode() != exitInvalid {
		t.Errorf("exit %d", r.exitCode())
	}
}
