package seqd

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// Slots place sections on groups. A cluster runs a fixed number of raft
// groups, chosen when it is bootstrapped; each group owns a share of the
// sections of every space. Between sections and groups sits a fixed layer
// of SlotCount slots, so that a share can later move from one group to
// another by whole slots without rehashing any key:
//
//   - the slot of section s of space p is FNV-1a (64 bit) over the bytes of
//     p, one zero byte and s as 8 bytes big-endian, modulo SlotCount (see
//     SlotOf); every key of a section lies in the same slot;
//   - with n groups, slots are assigned in contiguous blocks: group g owns
//     the slots i with i*n/SlotCount == g (see SlotGroup), so block sizes
//     differ by at most one slot.
//
// The function and the constants are part of the wire contract: a server
// checks ownership with them and clients route with them. They never change
// for an existing cluster; the slot map carries a version so that a later
// move of slots can be told apart.

// SlotCount is the number of slots.
const SlotCount = 4096

// MaxGroups is the largest number of raft groups a cluster may have.
const MaxGroups = 256

// SlotMapVersion is the version of the slot map this build computes (the
// block assignment above). It rises when slots move between groups.
const SlotMapVersion = 1

// SlotOf returns the slot of section section of space space.
func SlotOf(space string, section uint64) uint32 {
	h := fnv.New64a()
	var b [9]byte
	_, _ = h.Write([]byte(space))
	binary.BigEndian.PutUint64(b[1:], section)
	_, _ = h.Write(b[:])
	return uint32(h.Sum64() % SlotCount)
}

// SlotGroup returns the group owning slot among groups groups (1 <= groups
// <= MaxGroups).
func SlotGroup(slot uint32, groups int) int {
	return int(uint64(slot) * uint64(groups) / SlotCount)
}

// SlotRange returns the slots [first, end) that group g owns among groups
// groups.
func SlotRange(g, groups int) (first, end uint32) {
	return slotStart(g, groups), slotStart(g+1, groups)
}

// slotStart is the first slot i with i*groups/SlotCount >= g.
func slotStart(g, groups int) uint32 {
	return uint32((uint64(g)*SlotCount + uint64(groups) - 1) / uint64(groups))
}

// GroupOfKey returns the group owning key of a space whose sections hold
// sectionSize keys, among groups groups.
func GroupOfKey(space string, sectionSize, key uint64, groups int) int {
	if groups <= 1 {
		return 0
	}
	return SlotGroup(SlotOf(space, key/sectionSize), groups)
}

// ValidGroups returns nil if a cluster may have n groups, and otherwise an
// error wrapping ErrInvalidArgument.
func ValidGroups(n int) error {
	if n < 1 || n > MaxGroups {
		return fmt.Errorf("%w: %d groups, want 1 to %d", ErrInvalidArgument, n, MaxGroups)
	}
	return nil
}
