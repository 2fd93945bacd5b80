package checker

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/seqd/seqd/jepsen/record"
)

// Availability summarises how available the cluster was.
type Availability struct {
	OKRate float64 `json:"ok_rate"`
	// LongestGap is the longest time without a successful call completing,
	// between the first client call and the last.
	LongestGap      Dur           `json:"longest_gap"`
	LongestGapStart Dur           `json:"longest_gap_start"`
	Faults          []FaultStat   `json:"faults"`
	Outage          Stats         `json:"outage"`              // per fault
	AfterHeal       Stats         `json:"first_ok_after_heal"` // per fault
	PerSecond       []SecondStats `json:"per_second"`
}

// FaultStat is one fault's effect.
type FaultStat struct {
	record.Window
	// Outage is the longest time without a successful call overlapping the
	// fault (from its start to the end of its healing plus the quiet time
	// before the next fault), counted from the fault's start at the earliest.
	Outage Dur `json:"outage"`
	// AfterHeal is the time from the end of healing to the completion of the
	// first successful call invoked after it (-1: none).
	AfterHeal Dur `json:"first_ok_after_heal"`
}

// Stats are the median and worst of some durations.
type Stats struct {
	N      int `json:"n"`
	Median Dur `json:"median"`
	Worst  Dur `json:"worst"`
}

// SecondStats counts calls completed in one second of the test.
type SecondStats struct {
	T    int `json:"t"`
	OK   int `json:"ok"`
	Fail int `json:"fail"`
	Info int `json:"info"`
}

// Dur is a duration that marshals as seconds.
type Dur time.Duration

// MarshalJSON writes seconds.
func (d Dur) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Seconds())
}

// UnmarshalJSON reads seconds.
func (d *Dur) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*d = Dur(s * float64(time.Second))
	return nil
}

func (d Dur) String() string { return time.Duration(d).Round(time.Millisecond).String() }

func stats(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	slices.Sort(ds)
	return Stats{N: len(ds), Median: Dur(ds[len(ds)/2]), Worst: Dur(ds[len(ds)-1])}
}

// Avail computes the availability figures.
func Avail(ops []record.Op, windows []record.Window) Availability {
	var a Availability
	var okEnds []time.Duration
	var first, last time.Duration = -1, 0
	total, ok := 0, 0
	for _, o := range ops {
		if !o.IsCall() || isFinal(o) {
			continue
		}
		total++
		if first < 0 || o.Invoke < first {
			first = o.Invoke
		}
		last = max(last, o.Complete)
		sec := int(o.Complete / time.Second)
		for len(a.PerSecond) <= sec {
			a.PerSecond = append(a.PerSecond, SecondStats{T: len(a.PerSecond)})
		}
		switch o.Type {
		case record.OK:
			ok++
			okEnds = append(okEnds, o.Complete)
			a.PerSecond[sec].OK++
		case record.Fail:
			a.PerSecond[sec].Fail++
		default:
			a.PerSecond[sec].Info++
		}
	}
	if total == 0 {
		return a
	}
	a.OKRate = float64(ok) / float64(total)
	slices.Sort(okEnds)
	// Gaps between successive successes, bounded by the first call and the
	// last completion.
	points := append([]time.Duration{first}, okEnds...)
	points = append(points, last)
	for i := 1; i < len(points); i++ {
		if g := points[i] - points[i-1]; Dur(g) > a.LongestGap {
			a.LongestGap, a.LongestGapStart = Dur(g), Dur(points[i-1])
		}
	}
	var outages, heals []time.Duration
	for i, w := range windows {
		until := last
		if i+1 < len(windows) {
			until = max(w.End, windows[i+1].Start)
		}
		fs := FaultStat{Window: w, AfterHeal: -1}
		for j := 1; j < len(points); j++ {
			lo, hi := points[j-1], points[j]
			if hi < w.Start || lo > until {
				continue
			}
			if g := hi - max(lo, w.Start); Dur(g) > fs.Outage {
				fs.Outage = Dur(g)
			}
		}
		var firstOK time.Duration = -1
		for _, o := range ops {
			if o.IsCall() && !isFinal(o) && o.Type == record.OK && o.Invoke >= w.End && (firstOK < 0 || o.Complete < firstOK) {
				firstOK = o.Complete
			}
		}
		if firstOK >= 0 {
			fs.AfterHeal = Dur(firstOK - w.End)
			heals = append(heals, firstOK-w.End)
		}
		outages = append(outages, time.Duration(fs.Outage))
		a.Faults = append(a.Faults, fs)
	}
	a.Outage, a.AfterHeal = stats(outages), stats(heals)
	return a
}
