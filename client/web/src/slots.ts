// Slots place sections on raft groups, exactly as slots.go in the repository
// root computes them (a wire contract): the slot of section s of space p is
// FNV-1a (64 bit) over the UTF-8 bytes of p, one zero byte and s as 8 bytes
// big-endian, modulo SLOT_COUNT; with n groups, group g owns the slots i with
// floor(i*n/SLOT_COUNT) == g. test/slots.test.mjs checks the values slots_test.go pins.

/** seqd.SlotCount: the number of slots. */
export const SLOT_COUNT = 4096;
/** seqd.SlotMapVersion: the version of the slot map this client computes. */
export const SLOT_MAP_VERSION = 1n;
/** seqd.MaxGroups: the most raft groups a cluster may have. */
export const MAX_GROUPS = 256;
/** seqd.DefaultSpaceName: the name servers know the space "" by. */
export const DEFAULT_SPACE = "default";

const utf8 = new TextEncoder();

/**
 * The slot of section `section` of space `space` (seqd.SlotOf). The 64-bit
 * FNV-1a state is kept in two 32-bit halves: the prime is 2^40 + 0x1b3, so
 * h*prime mod 2^64 is h*0x1b3 plus the low half shifted into the high half
 * by 8 bits; every intermediate stays below 2^53, so doubles are exact.
 */
export function slotOf(space: string, section: bigint): number {
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  const step = (b: number): void => {
    lo ^= b;
    const l = (lo >>> 0) * 0x1b3;
    const carry = Math.floor(l / 0x100000000);
    hi = (hi * 0x1b3 + carry + (lo & 0xffffff) * 0x100) >>> 0;
    lo = l >>> 0;
  };
  for (const b of utf8.encode(space)) step(b);
  step(0);
  const s = BigInt.asUintN(64, section);
  for (const half of [Number(s >> 32n), Number(s & 0xffffffffn)]) {
    for (let shift = 24; shift >= 0; shift -= 8) step((half >>> shift) & 0xff);
  }
  return lo % SLOT_COUNT; // SLOT_COUNT divides 2^32
}

/** The group owning slot among `groups` groups (seqd.SlotGroup). */
export function slotGroup(slot: number, groups: number): number {
  return Math.floor((slot * groups) / SLOT_COUNT);
}

/** The group owning key of a space whose sections hold sectionSize keys (seqd.GroupOfKey). */
export function groupOfKey(space: string, sectionSize: bigint, key: bigint, groups: number): number {
  if (groups <= 1) return 0;
  return slotGroup(slotOf(space, key / sectionSize), groups);
}
