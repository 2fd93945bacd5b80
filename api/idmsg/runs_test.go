package idmsg

import (
	"math"
	"testing"

	seqv1 "github.com/seqd/seqd/api/gen/seq/v1"
	"github.com/seqd/seqd/flake"
)

// TestRuns checks how a NextIds answer is read a NextIds answer in either form:
// runs are taken as they are only when they are positive, strictly
// increasing, free of overflow and add up to the count asked for; ids one by
// one are merged into runs where consecutive and must be positive.
func TestRuns(t *testing.T) {
	run := func(first int64, count uint32) *seqv1.IdRun { return &seqv1.IdRun{First: first, Count: count} }
	good := []struct {
		name  string
		resp  *seqv1.NextIdsResponse
		count uint32
		want  []flake.Run
	}{
		{"runs", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(100, 3), run(200, 2)}}, 5, []flake.Run{{First: 100, Count: 3}, {First: 200, Count: 2}}},
		{"ids merged", &seqv1.NextIdsResponse{Ids: []int64{7, 8, 9, 20, 21, 5}}, 6, []flake.Run{{First: 7, Count: 3}, {First: 20, Count: 2}, {First: 5, Count: 1}}},
		{"runs win over ids", &seqv1.NextIdsResponse{Ids: []int64{1}, Runs: []*seqv1.IdRun{run(10, 2)}}, 2, []flake.Run{{First: 10, Count: 2}}},
		{"the last id", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(math.MaxInt64-1, 2)}}, 2, []flake.Run{{First: math.MaxInt64 - 1, Count: 2}}},
	}
	for _, c := range good {
		got, err := Runs(c.resp, c.count)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: %v, want %v", c.name, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	}
	bad := []struct {
		name  string
		resp  *seqv1.NextIdsResponse
		count uint32
	}{
		{"too few", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(100, 3)}}, 4},
		{"too many", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(100, 3), run(200, 3)}}, 4},
		{"overlapping", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(100, 5), run(100, 5)}}, 10},
		{"decreasing", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(200, 1), run(100, 1)}}, 2},
		{"touching the previous run's last", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(100, 5), run(104, 1)}}, 6},
		{"empty run", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(100, 0), run(200, 2)}}, 2},
		{"zero first", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(0, 2)}}, 2},
		{"negative first", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(-5, 2)}}, 2},
		{"past 2^63-1", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(math.MaxInt64-1, 3)}}, 3},
		{"huge count", &seqv1.NextIdsResponse{Runs: []*seqv1.IdRun{run(1, math.MaxUint32)}}, 10},
		{"no ids", &seqv1.NextIdsResponse{}, 1},
		{"zero id", &seqv1.NextIdsResponse{Ids: []int64{5, 0}}, 2},
		{"ids too few", &seqv1.NextIdsResponse{Ids: []int64{5}}, 2},
	}
	for _, c := range bad {
		if got, err := Runs(c.resp, c.count); err == nil {
			t.Fatalf("%s: %v accepted", c.name, got)
		}
	}
}
