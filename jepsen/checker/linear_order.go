package checker

import (
	"slices"
	"sort"

	"github.com/seqd/seqd/internal/history"
)

// forcedOrder decides a segment's linearizability under CounterModel
// exactly, in O(n log n), without a search: porcupine's search is
// exponential in the number of concurrent calls whose order the model
// cannot tell apart (a pause that piles up dozens of Currents reading one
// value), and Linear falls back on this when porcupine does not decide a
// segment in time.
//
// Why the order is forced: a take's first value exceeds every value taken
// before it, so takes are linearized in the order of their values, and
// their ranges must be disjoint and increasing. A Current that read v must
// come after every take whose first value is at most v (a take after it
// must exceed v) and before every take whose last value exceeds v (it
// reads at least everything taken before it): so it sits in the one gap
// between the takes below and above v, or nowhere (a range straddling v).
// Currents in one gap can be ordered in any way (the model checks a read
// against the takes only), so any order of them that respects real time
// will do, and one exists. The segment is linearizable if and only if
// these positions respect real time: no call that completed before
// another began has a later position.
//
// It returns whether the segment is linearizable, and if not two calls
// (indexes into s.ops) that show it: a call that cannot be placed (i == j),
// or a call i that completed before call j began but must come after it.
func forcedOrder(s segment) (ok bool, i, j int) {
	ops := s.ops
	var takes []int
	for x, o := range ops {
		if o.Kind == history.Take {
			takes = append(takes, x)
		}
	}
	slices.SortFunc(takes, func(a, b int) int {
		switch {
		case ops[a].First < ops[b].First:
			return -1
		case ops[a].First > ops[b].First:
			return 1
		}
		return 0
	})
	pos := make([]int, len(ops))
	for r, x := range takes {
		o := ops[x]
		if o.First <= s.init.Last || o.First <= s.init.Bound {
			return false, x, x
		}
		if r > 0 && o.First <= ops[takes[r-1]].Last {
			return false, takes[r-1], x // overlapping ranges, or a value taken twice
		}
		pos[x] = 2*r + 1
	}
	for x, o := range ops {
		if o.Kind == history.Take {
			continue
		}
		v := o.Last
		if v < s.init.Last {
			return false, x, x
		}
		// g: the takes whose first value is at most v, which precede it.
		g := sort.Search(len(takes), func(r int) bool { return ops[takes[r]].First > v })
		if g > 0 && ops[takes[g-1]].Last > v {
			return false, x, x // a range straddles the value read
		}
		pos[x] = 2 * g
	}
	// Real time: sweeping calls by start, every call that completed before
	// one began must have a position no later than its.
	byEnd := make([]int, len(ops))
	byStart := make([]int, len(ops))
	for x := range ops {
		byEnd[x], byStart[x] = x, x
	}
	sort.Slice(byEnd, func(a, b int) bool { return ops[byEnd[a]].End < ops[byEnd[b]].End })
	sort.Slice(byStart, func(a, b int) bool { return ops[byStart[a]].Start < ops[byStart[b]].Start })
	e, maxAt := 0, -1
	for _, y := range byStart {
		for e < len(byEnd) && ops[byEnd[e]].End < ops[y].Start {
			if x := byEnd[e]; maxAt < 0 || pos[x] > pos[maxAt] {
				maxAt = x
			}
			e++
		}
		if maxAt >= 0 && pos[maxAt] > pos[y] {
			return false, maxAt, y
		}
	}
	return true, -1, -1
}
