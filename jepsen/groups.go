package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/seqd/seqd"
	"github.com/seqd/seqd/jepsen/plot"
	"github.com/seqd/seqd/jepsen/record"
)

// minGroupOutage is the shortest stretch without a successful call of a
// group that the report lists as an outage window of that group.
const minGroupOutage = 200 * time.Millisecond

// groupOutage is one stretch of a run with no successful call on one raft
// group's keys.
type groupOutage struct {
	Start  time.Duration `json:"start_ns"`
	Length time.Duration `json:"length_ns"`
	// Faults names the fault windows it overlaps ("kill-leader#3 [n2 (group
	// 1 leader)]").
	Faults []string `json:"faults,omitempty"`
}

// groupAvail is one raft group's availability in a run of several groups.
type groupAvail struct {
	Group   int `json:"group"`
	okTimes []time.Duration
	Keys    []uint64      `json:"keys"`
	OKCalls int           `json:"ok_calls"` // successful calls touching at least one of its keys
	Longest time.Duration `json:"longest_gap_ns"`
	Windows []groupOutage `json:"outages"` // stretches longer than minGroupOutage, in order
}

// groupOutages maps each successful call's keys to their raft groups
// (seqd.GroupOfKey) and finds, per group, the stretches longer than min
// without a successful call on the group's keys, from the first call's
// invocation to the last call's completion. A call on keys of several
// groups counts for each. Groups without a key are left out.
func groupOutages(ops []record.Op, space string, sectionSize uint64, groups int, min time.Duration, windows []record.Window) []groupAvail {
	if groups <= 1 || sectionSize == 0 {
		return nil
	}
	byGroup := make([]groupAvail, groups)
	oks := make([][]time.Duration, groups)
	keySeen := map[uint64]bool{}
	first, last := time.Duration(-1), time.Duration(0)
	for _, o := range ops {
		if !o.IsCall() || len(o.Keys) == 0 {
			continue
		}
		if first < 0 || o.Invoke < first {
			first = o.Invoke
		}
		last = max(last, o.Complete)
		seen := map[int]bool{}
		for _, k := range o.Keys {
			g := seqd.GroupOfKey(space, sectionSize, k, groups)
			if !keySeen[k] {
				keySeen[k] = true
				byGroup[g].Keys = append(byGroup[g].Keys, k)
			}
			if o.Type != record.OK || seen[g] {
				continue
			}
			seen[g] = true
			oks[g] = append(oks[g], o.Complete)
			byGroup[g].OKCalls++
		}
	}
	var out []groupAvail
	for g := range byGroup {
		a := byGroup[g]
		a.Group = g
		if len(a.Keys) == 0 {
			continue
		}
		sort.Slice(a.Keys, func(i, j int) bool { return a.Keys[i] < a.Keys[j] })
		ts := oks[g]
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		a.okTimes = ts
		prev := first
		for _, t := range append(ts, last) {
			if gap := t - prev; gap > 0 {
				a.Longest = max(a.Longest, gap)
				if gap > min {
					a.Windows = append(a.Windows, groupOutage{Start: prev, Length: gap, Faults: overlapping(windows, prev, t)})
				}
			}
			prev = max(prev, t)
		}
		out = append(out, a)
	}
	return out
}

// groupRows is the lanes of plot.Groups.
func groupRows(gs []groupAvail) []plot.GroupRow {
	var rows []plot.GroupRow
	for _, a := range gs {
		r := plot.GroupRow{Name: fmt.Sprintf("g%d", a.Group), OK: a.okTimes}
		for _, w := range a.Windows {
			r.Outages = append(r.Outages, [2]time.Duration{w.Start, w.Start + w.Length})
		}
		rows = append(rows, r)
	}
	return rows
}

// overlapping names the fault windows that overlap [from, to].
func overlapping(windows []record.Window, from, to time.Duration) []string {
	var out []string
	for _, w := range windows {
		if w.Start <= to && w.End >= from {
			out = append(out, fmt.Sprintf("%s#%d %v", w.Fault, w.ID, w.Targets))
		}
	}
	return out
}

// groupSummary is a one-line description of a group's outage windows for
// the summary: count, longest, and the first few as start+length.
func groupSummary(a groupAvail, show int) string {
	var ws []string
	for i, w := range a.Windows {
		if i == show {
			ws = append(ws, fmt.Sprintf("... (%d more)", len(a.Windows)-i))
			break
		}
		ws = append(ws, fmt.Sprintf("%.1fs+%.2fs", w.Start.Seconds(), w.Length.Seconds()))
	}
	s := fmt.Sprintf("group %d (%d keys): %d ok calls, longest gap %v, %d outages > %v", a.Group, len(a.Keys), a.OKCalls,
		a.Longest.Round(time.Millisecond), len(a.Windows), minGroupOutage)
	if len(ws) > 0 {
		s += ": " + strings.Join(ws, " ")
	}
	return s
}
