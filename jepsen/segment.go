package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/seqd/seqd/jepsen/workload"
)

// The segment workload's flags (--workload segment): many client.Segments
// on a few keys (--keys, 2 by default here) next to the sequence clients.
type segmentFlags struct {
	Segments     int
	Rate         float64
	Min, Max     uint
	Target       time.Duration
	FetchTimeout time.Duration
	MaxN         int
}

func addSegmentFlags(fs *flag.FlagSet, s *segmentFlags) {
	fs.IntVar(&s.Segments, "segments", 24, "segment: client.Segments (Leaf-segment mode), each in its own client, on keys 0..keys-1 in turn")
	fs.Float64Var(&s.Rate, "segment-rate", 2000, "segment: calls per second of all segments together (not counted in --rate)")
	fs.UintVar(&s.Min, "segment-min", 20, "segment: a segment's smallest (and first) range")
	fs.UintVar(&s.Max, "segment-max", 400, "segment: a segment's largest range")
	fs.DurationVar(&s.Target, "segment-target", 2*time.Second, "segment: how long a range should last: ranges double while they last less, and halve past twice it")
	fs.DurationVar(&s.FetchTimeout, "segment-fetch-timeout", time.Second, "segment: bound of one reservation")
	fs.IntVar(&s.MaxN, "segment-max-n", 3, "segment: each call takes 1..max-n values")
}

// checkSegment checks the segment flags, and gives --keys its segment
// default (a few keys, each shared by many segments).
func checkSegment(cfg *config, set map[string]bool) error {
	s := cfg.seg
	if cfg.Workload != "segment" {
		return nil
	}
	if !set["keys"] {
		cfg.Keys = 2
	}
	switch {
	case s.Segments < 1:
		return errors.New("--segments must be at least 1")
	case s.Min < 1 || s.Max < s.Min || s.Max > 1_000_000:
		return errors.New("--segment-min and --segment-max must be 1 <= min <= max <= 1000000")
	case s.Target <= 0 || s.FetchTimeout <= 0 || s.Rate < 0:
		return errors.New("--segment-target and --segment-fetch-timeout must be positive, --segment-rate 0 or more")
	case s.MaxN < 1 || s.MaxN > 1000:
		return errors.New("--segment-max-n must be 1 to 1000")
	}
	return nil
}

func (s segmentFlags) config(cfg *config, seed uint64) workload.SegmentConfig {
	return workload.SegmentConfig{Space: cfg.Space, Keys: cfg.Keys, Segments: s.Segments, Rate: s.Rate, Min: uint32(s.Min), Max: uint32(s.Max),
		Target: s.Target, FetchTimeout: s.FetchTimeout, MaxN: s.MaxN, OpTimeout: cfg.SmartTimeout, Seed: seed}
}

// segmentDescription describes the segment workload for results.json.
func segmentDescription(cfg *config, sequence string) string {
	s := cfg.seg
	return fmt.Sprintf("segment: %d client.Segments on %d keys at %g calls/s together (1..%d values each), ranges of %d..%d values lasting about %v, reservations bounded by %v; with the sequence clients on the same keys: %s",
		s.Segments, cfg.Keys, s.Rate, s.MaxN, s.Min, s.Max, s.Target, s.FetchTimeout, sequence)
}
