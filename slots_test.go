package seqd

import "testing"

// The slot function is a wire contract: these values pin it, so that a
// change to it fails here before it splits a cluster's servers and clients.
func TestSlotOfIsPinned(t *testing.T) {
	for _, c := range []struct {
		space   string
		section uint64
		want    uint32
	}{
		{"default", 0, 1498}, {"default", 1, 1933}, {"users", 12345, 3310}, {"a", 1 << 40, 3229},
	} {
		if got := SlotOf(c.space, c.section); got != c.want {
			t.Errorf("SlotOf(%q, %d) = %d, want %d", c.space, c.section, got, c.want)
		}
	}
}

// Blocks are contiguous, cover every slot exactly once, agree with
// SlotGroup, and differ in size by at most one.
func TestSlotBlocks(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 6, 7, 64, 100, MaxGroups} {
		next := uint32(0)
		lo, hi := uint32(SlotCount), uint32(0)
		for g := 0; g < n; g++ {
			first, end := SlotRange(g, n)
			if first != next || end <= first {
				t.Fatalf("n=%d g=%d: range [%d,%d), want it to start at %d and be non-empty", n, g, first, end, next)
			}
			for s := first; s < end; s++ {
				if got := SlotGroup(s, n); got != g {
					t.Fatalf("n=%d: SlotGroup(%d) = %d, want %d", n, s, got, g)
				}
			}
			lo, hi = min(lo, end-first), max(hi, end-first)
			next = end
		}
		if next != SlotCount || hi-lo > 1 {
			t.Fatalf("n=%d: blocks end at %d, sizes %d..%d", n, next, lo, hi)
		}
	}
}

// Keys of one section share a group; sections spread over the groups.
func TestGroupOfKeySpreads(t *testing.T) {
	const groups, size = 6, 1000
	count := make([]int, groups)
	for sec := uint64(0); sec < 6000; sec++ {
		g := GroupOfKey("users", size, sec*size, groups)
		if g2 := GroupOfKey("users", size, sec*size+size-1, groups); g2 != g {
			t.Fatalf("section %d spans groups %d and %d", sec, g, g2)
		}
		count[g]++
	}
	for g, c := range count {
		if c < 800 || c > 1200 {
			t.Fatalf("group %d owns %d of 6000 sections: %v", g, c, count)
		}
	}
	if GroupOfKey("users", size, 123456, 1) != 0 {
		t.Fatal("one group must own every key")
	}
	if ValidGroups(0) == nil || ValidGroups(MaxGroups+1) == nil || ValidGroups(3) != nil {
		t.Fatal("ValidGroups bounds")
	}
}
