package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/seqd/seqd/jepsen/checker"
	"github.com/seqd/seqd/jepsen/plot"
	"github.com/seqd/seqd/jepsen/record"
)

// results is results.json.
type results struct {
	Valid        checker.Validity           `json:"valid"`
	Meta         *meta                      `json:"meta"`
	Ops          checker.Counts             `json:"ops"`
	Checkers     map[string]*checker.Result `json:"checkers"`
	Availability checker.Availability       `json:"availability"`
	Files        map[string]string          `json:"files"`
	Nemesis      map[string]int             `json:"faults_by_kind"`
	Flake        *checker.FlakeStats        `json:"flake,omitempty"`
	// Groups is each raft group's availability (runs with --groups above
	// 1): its keys, ok calls and outage windows.
	Groups    []groupAvail                `json:"groups,omitempty"`
	Timelines map[string]checker.Validity `json:"-"`
}

func (r *results) exitCode() int {
	switch r.Valid {
	case checker.Valid:
		return exitValid
	case checker.Invalid:
		return exitInvalid
	}
	return exitUnknown
}

// maxTimelines bounds the porcupine timelines rendered per run.
const maxTimelines = 6

// analyzeOps checks a history with opt (the grants and the clock trust
// come from dir and m), renders the plots and timelines into dir and writes
// results.json.
func analyzeOps(ops []record.Op, dir string, opt checker.Options, m *meta) *results {
	opt.Grants, opt.TrustClock = loggedGrants(dir), m.TrustClock
	res := checker.Check(ops, opt)
	r := &results{Meta: m, Ops: res.Ops, Checkers: res.Checkers, Availability: res.Availability,
		Files: map[string]string{}, Nemesis: map[string]int{}, Flake: res.Flake}
	crash := &checker.Result{Valid: checker.Valid}
	for _, c := range append(append([]string(nil), m.Crashes...), m.Panics...) {
		crash.Valid = checker.Invalid
		crash.Notes = append(crash.Notes, c)
	}
	r.Checkers["crashes"] = crash
	verdicts := []checker.Validity{res.Valid, crash.Valid}
	if len(m.Errors) > 0 || m.Interrupt != "" {
		verdicts = append(verdicts, checker.Unknown)
	}
	r.Valid = checker.Merge(verdicts...)

	end := record.End(ops)
	windows := record.Windows(ops, end)
	for _, w := range windows {
		r.Nemesis[w.Fault]++
	}
	// Timelines of the anomalies that a per-key counter model can show.
	n := 0
	for _, name := range []string{"order", "linear", "restart"} {
		if r.Checkers[name] == nil {
			continue // a flake run
		}
		for i := range r.Checkers[name].Anomalies {
			a := &r.Checkers[name].Anomalies[i]
			if n >= maxTimelines {
				break
			}
			file := fmt.Sprintf("anomaly-%d-%s-key%d.html", n+1, a.Rule, a.Key)
			if _, err := checker.Visualize(filepath.Join(dir, file), *a, ops, windows); err != nil {
				m.Errors = append(m.Errors, "timeline: "+err.Error())
				continue
			}
			a.HTML = file
			n++
		}
	}
	title := fmt.Sprintf("%s - %d nodes, seed %d", m.Test, m.Nodes, m.Seed)
	if err := plot.Latency(filepath.Join(dir, "latency.png"), "latency: "+title, ops, windows); err != nil {
		m.Errors = append(m.Errors, "latency plot: "+err.Error())
	} else {
		r.Files["latency"] = "latency.png"
	}
	if err := plot.Rate(filepath.Join(dir, "rate.png"), "throughput: "+title, ops, windows); err != nil {
		m.Errors = append(m.Errors, "rate plot: "+err.Error())
	} else {
		r.Files["rate"] = "rate.png"
	}
	if m.WorkloadKind != "flake" {
		r.Groups = groupOutages(ops, m.Space, m.SectionSize, m.Groups, minGroupOutage, windows)
	}
	if len(r.Groups) > 0 {
		if err := plot.Groups(filepath.Join(dir, "groups.png"), "raft groups: "+title, groupRows(r.Groups), end, windows); err != nil {
			m.Errors = append(m.Errors, "groups plot: "+err.Error())
		} else {
			r.Files["groups"] = "groups.png"
		}
	}
	r.Files["history"] = "history.jsonl"
	b, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: writing results.json: %v\n", err)
	}
	r.Files["results"] = "results.json"
	return r
}

// analyze re-checks a stored test directory.
func analyze(cfg *config) int {
	dir := cfg.Analyze
	ops, err := record.Load(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "jepsen: --analyze: %v\n", err)
		return exitHarness
	}
	m := &meta{Test: filepath.Base(filepath.Dir(dir)), Dir: dir}
	if b, err := os.ReadFile(filepath.Join(dir, "results.json")); err == nil {
		var old results
		if json.Unmarshal(b, &old) == nil && old.Meta != nil {
			m = old.Meta
			m.Errors = nil
		}
	}
	r := analyzeOps(ops, dir, cfg.checkOptions(), m)
	printSummary(os.Stdout, r)
	return r.exitCode()
}

func mark(v checker.Validity) string {
	switch v {
	case checker.Valid:
		return "ok"
	case checker.Invalid:
		return "FAIL"
	}
	return "unknown"
}

func pct(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

// printSummary prints a one-screen summary.
func printSummary(w io.Writer, r *results) {
	m := r.Meta
	fmt.Fprintf(w, "\n=== seqd chaos test %s: %d nodes, %s, seed %d", m.Test, m.Nodes, m.Net, m.Seed)
	if m.Groups > 1 {
		fmt.Fprintf(w, ", %d raft groups", m.Groups)
	}
	if m.Unsafe {
		fmt.Fprint(w, ", --unsafe-disable-lease")
	}
	if m.TrustClock {
		fmt.Fprint(w, ", --unsafe-flake-trust-clock")
	}
	fmt.Fprintln(w, " ===")
	fmt.Fprintf(w, "store:        %s\n", m.Dir)
	if m.NetNote != "" {
		fmt.Fprintf(w, "note:         %s\n", m.NetNote)
	}
	var kinds []string
	for k, n := range r.Nemesis {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "faults:       %d injected (%s); %s\n", m.Injected, strings.Join(kinds, ", "), m.Schedule)
	if len(m.Skipped) > 0 {
		fmt.Fprintf(w, "skipped:      %s\n", strings.Join(m.Skipped, ", "))
	}
	o := r.Ops
	fmt.Fprintf(w, "calls:        %d in %.0fs: ok %d (%s), fail %d, info %d\n", o.Total, m.Elapsed, o.OK, pct(o.OK, o.Total), o.Fail, o.Info)
	var fs []string
	for f, byType := range o.ByF {
		fs = append(fs, fmt.Sprintf("%s %d/%d", f, byType["ok"], byType["ok"]+byType["fail"]+byType["info"]))
	}
	sort.Strings(fs)
	fmt.Fprintf(w, "              ok/total by call: %s\n", strings.Join(fs, ", "))
	c := r.Checkers
	final := "final-reads"
	if r.Flake != nil {
		final = "final-ids"
		printFlake(w, r)
	} else {
		fmt.Fprintf(w, "checkers:     order %s (C1 %d, C2 %d, C3 %d) · %s · shape %s (%d) · restart %s (%s) · final-reads %s · crashes %s · %s\n",
			mark(c["order"].Valid), c["order"].Counts["C1"], c["order"].Counts["C2"], c["order"].Counts["C3"], linearSummary(c["linear"]),
			mark(c["shape"].Valid), c["shape"].Counts["shape"]+c["shape"].Counts["repeat-order"],
			mark(c["restart"].Valid), strings.Join(append([]string{fmt.Sprintf("R1 %d", c["restart"].Counts["R1"])}, c["restart"].Notes...), ", "),
			mark(c["final-reads"].Valid), mark(c["crashes"].Valid), findingsSummary(c["findings"]))
		if sg := c["segments"]; sg != nil {
			fmt.Fprintf(w, "              segments %s (S1 %d, S2 %d): %s\n", mark(sg.Valid), sg.Counts["S1"], sg.Counts["S2"], strings.Join(sg.Notes, "; "))
		}
	}
	a := r.Availability
	fmt.Fprintf(w, "availability: ok rate %.1f%%; longest gap without an ok call %v (from %.1fs)\n", 100*a.OKRate, a.LongestGap, time.Duration(a.LongestGapStart).Seconds())
	if a.Outage.N > 0 {
		fmt.Fprintf(w, "              outage per fault: median %v, worst %v; first ok after healing: median %v, worst %v (%d faults)\n",
			a.Outage.Median, a.Outage.Worst, a.AfterHeal.Median, a.AfterHeal.Worst, a.Outage.N)
	}
	for i, g := range r.Groups {
		head := "              "
		if i == 0 {
			head = "per group:    "
		}
		fmt.Fprintf(w, "%s%s\n", head, groupSummary(g, 6))
	}
	if m.Groups > 1 && len(r.Groups) < m.Groups && r.Flake == nil {
		fmt.Fprintf(w, "              (%d of %d groups own none of the keys)\n", m.Groups-len(r.Groups), m.Groups)
	}
	var notes []string
	for _, name := range []string{final, "crashes", "linear"} {
		if c[name] == nil {
			continue
		}
		if c[name].Valid != checker.Valid {
			notes = append(notes, c[name].Notes...)
		}
	}
	notes = append(notes, m.Errors...)
	if m.Interrupt != "" {
		notes = append(notes, "interrupted by "+m.Interrupt)
	}
	for _, wn := range m.Warnings {
		fmt.Fprintf(w, "warning:      %s\n", wn)
	}
	for i, n := range notes {
		if i == 6 {
			fmt.Fprintf(w, "              ... (%d more in results.json)\n", len(notes)-i)
			break
		}
		fmt.Fprintf(w, "problem:      %s\n", n)
	}
	// What the cluster did under each operator fault.
	nop := 0
	for _, f := range r.Availability.Faults {
		if f.Class != "operator" || (len(f.Outcome) == 0 && f.Fault != "bootstrap-single") {
			continue
		}
		if nop == 12 {
			fmt.Fprintf(w, "              ... (more in results.json)\n")
			break
		}
		nop++
		fmt.Fprintf(w, "operator:     %-15s at %6.1fs %s\n", f.Fault, time.Duration(f.Start).Seconds(), strings.Join(f.Targets, "; "))
		for _, o := range f.Outcome {
			fmt.Fprintf(w, "                → %s\n", o)
		}
	}
	if len(m.SmallDisks) > 0 {
		fmt.Fprintf(w, "small disks:  %s\n", strings.Join(m.SmallDisks, ", "))
	}
	shown := 0
	for _, name := range []string{"order", "linear", "restart", "shape", "segments", "findings", "G1", "G2", "G3", "grants"} {
		if c[name] == nil {
			continue
		}
		for _, an := range c[name].Anomalies {
			if shown == 3 {
				break
			}
			shown++
			fmt.Fprintf(w, "anomaly:      %s %s\n", an.Rule, an.Msg)
			for _, op := range an.Ops {
				if op.F == record.IDs {
					fmt.Fprintf(w, "                #%d %-9s on %-8s holder %-6s %s of %d → %s  [%.4fs .. %.4fs]\n", op.Index, op.Client, op.Node, op.Holder,
						op.Namespace, op.Count, shortList(op.Values, 6), op.Invoke.Seconds(), op.Complete.Seconds())
					continue
				}
				fmt.Fprintf(w, "                #%d %-9s on %-3s %s %v → %v  [%.4fs .. %.4fs]\n", op.Index, op.Client, op.Node, op.F, op.Keys, op.Values,
					op.Invoke.Seconds(), op.Complete.Seconds())
			}
			if an.HTML != "" {
				fmt.Fprintf(w, "                timeline: %s\n", filepath.Join(m.Dir, an.HTML))
			}
		}
	}
	files := "history.jsonl results.json latency.png rate.png"
	if r.Files["groups"] != "" {
		files += " groups.png"
	}
	fmt.Fprintf(w, "files:        %s jepsen.log n*.log\n", files)
	switch r.Valid {
	case checker.Valid:
		fmt.Fprintln(w, "verdict:      VALID — everything looks good! ヽ(‘ー`)ノ")
	case checker.Invalid:
		fmt.Fprintln(w, "verdict:      INVALID — analysis found anomalies (ﾉಥ益ಥ）ﾉ ┻━┻")
	default:
		fmt.Fprintln(w, "verdict:      UNKNOWN — no anomaly found, but the run was incomplete (see problems) ಠ~ಠ")
	}
	// `go run` turns every non-zero status into 1: say which it is.
	fmt.Fprintf(w, "exit status:  %d\n", r.exitCode())
}

// loggedGrants reads the worker grants that the holders of a flake run
// logged: the nodes' (n*.log) and the embedded generators' (jepsen.log).
// It answers nil when there are none (a sequence run).
func loggedGrants(dir string) []checker.Grant {
	logs, _ := filepath.Glob(filepath.Join(dir, "n*.log"))
	var out []checker.Grant
	for _, p := range append(logs, filepath.Join(dir, "jepsen.log")) {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		gs, _ := checker.ParseGrants(f, filepath.Base(p))
		f.Close()
		out = append(out, gs...)
	}
	return out
}

// shortList prints up to n values.
func shortList(vs []uint64, n int) string {
	if len(vs) <= n {
		return fmt.Sprint(vs)
	}
	return fmt.Sprintf("%v ... (%d ids)", vs[:n], len(vs))
}

// printFlake prints a flake run's checkers, ids and workers.
func printFlake(w io.Writer, r *results) {
	c, f := r.Checkers, r.Flake
	g3 := fmt.Sprintf("%s (%d)", mark(c["G3"].Valid), c["G3"].Counts["G3"])
	if notes := c["G3"].Notes; len(notes) > 1 && strings.HasPrefix(notes[0], "not checked") {
		g3 = notes[0] + "; " + notes[1]
	}
	grants := "not checked"
	if g := c["grants"]; g != nil {
		grants = fmt.Sprintf("%s (token %d, overlap %d)", mark(g.Valid), g.Counts["token"], g.Counts["overlap"])
	}
	fmt.Fprintf(w, "checkers:     G1 unique %s (%d duplicates) · G2 worker order %s (%d, within a response %d) · G3 time %s · grants %s · final-ids %s · crashes %s · %s\n",
		mark(c["G1"].Valid), c["G1"].Counts["G1"], mark(c["G2"].Valid), c["G2"].Counts["G2"], c["G2"].Counts["G2-response"],
		g3, grants, mark(c["final-ids"].Valid), mark(c["crashes"].Valid), findingsSummary(c["findings"]))
	fmt.Fprintf(w, "ids:          %d ids from %d ok calls of %d (final calls included)", f.IDs, f.OKCalls, f.Calls)
	if r.Meta.GeneratorRestarts > 0 {
		fmt.Fprintf(w, "; embedded generators recreated %d times", r.Meta.GeneratorRestarts)
	}
	fmt.Fprintln(w)
	for _, ns := range f.Namespaces {
		var ws []string
		for _, wk := range ns.Workers {
			ws = append(ws, fmt.Sprintf("w%d %d/%d/%d", wk.Worker, wk.IDs, wk.Calls, wk.Holders))
		}
		if len(ws) > 12 {
			ws = append(ws[:12], fmt.Sprintf("... (%d workers)", len(ns.Workers)))
		}
		fmt.Fprintf(w, "namespace:    %s (%s): %d ids; per worker ids/calls/holders: %s\n", ns.Name, ns.Layout, ns.IDs, strings.Join(ws, ", "))
	}
}

// linearSummary is the linearizability checker's part of the summary's
// checkers line ("linear ok (32 keys)"; undecided segments are unknown).
func linearSummary(l *checker.Result) string {
	if l == nil {
		return "linear not checked"
	}
	s := fmt.Sprintf("linear %s (L %d", mark(l.Valid), l.Counts["L"])
	if u := l.Counts["unknown"]; u > 0 {
		s += fmt.Sprintf(", %d segments UNKNOWN", u)
	}
	return s + ")"
}

// findingsSummary is the faults' findings' part of the checkers line
// ("findings ok (0)", or the count by rule).
func findingsSummary(f *checker.Result) string {
	if f == nil {
		return "findings not checked"
	}
	var rules []string
	total := 0
	for r, n := range f.Counts {
		rules = append(rules, fmt.Sprintf("%s %d", r, n))
		total += n
	}
	sort.Strings(rules)
	if total == 0 {
		return "findings ok (0)"
	}
	return fmt.Sprintf("findings %s (%s)", mark(f.Valid), strings.Join(rules, ", "))
}
