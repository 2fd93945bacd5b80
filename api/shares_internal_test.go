package api

import (
	"slices"
	"testing"
)

// A call's keys split into one share per group, groups in first-seen order,
// each share's keys in the call's order with their positions, whether the
// call spans one group, a few (found by a scan) or more than a scan suits.
func TestKeysSplitIntoOneShareAGroupInTheirOrder(t *testing.T) {
	for _, groups := range []int{1, 3, scanShares, scanShares + 1, 40} {
		groupOf := func(k uint64) int { return int(k*7919) % groups }
		keys := make([]uint64, 500)
		for i := range keys {
			keys[i] = uint64(i*31) % 97 // repeats, out of order
		}
		shares := groupShares(keys, groupOf)
		var order []int
		for _, k := range keys {
			if g := groupOf(k); !slices.Contains(order, g) {
				order = append(order, g)
			}
		}
		if len(shares) != len(order) {
			t.Fatalf("%d groups: %d shares, want %d", groups, len(shares), len(order))
		}
		seen := make([]bool, len(keys))
		for i, sh := range shares {
			if sh.group != order[i] {
				t.Fatalf("%d groups: share %d is group %d, want %d (first-seen order)", groups, i, sh.group, order[i])
			}
			if len(sh.pos) != len(sh.keys) {
				t.Fatalf("%d groups: share %d has %d positions for %d keys", groups, i, len(sh.pos), len(sh.keys))
			}
			for j, p := range sh.pos {
				if j > 0 && p <= sh.pos[j-1] {
					t.Fatalf("%d groups: share %d positions out of order: %v", groups, i, sh.pos)
				}
				if keys[p] != sh.keys[j] || groupOf(sh.keys[j]) != sh.group || seen[p] {
					t.Fatalf("%d groups: share %d key %d at %d is wrong or repeated", groups, i, sh.keys[j], p)
				}
				seen[p] = true
			}
		}
		if i := slices.Index(seen, false); i >= 0 {
			t.Fatalf("%d groups: key at %d is in no share", groups, i)
		}
	}
}
