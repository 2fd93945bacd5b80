// The per-group routing table of a cluster of several raft groups, with the
// rules of the Go client (client/routing.go): what a ClusterStatus answer and
// an answer's Seqd-Group header teach, and how a call's keys split by group.

import type { ClusterStatusResponse } from "./gen/seq/v1/seq_pb.js";
import { DEFAULT_SPACE, MAX_GROUPS, SLOT_COUNT, SLOT_MAP_VERSION, groupOfKey } from "./slots.js";

/** What the table holds of one group's leader. */
export interface GroupLeader {
  /** The leader's base URL; undefined: unknown. */
  url?: string;
  /** The highest term seen for the group. */
  term: bigint;
}

export interface GroupTable {
  /** Groups (more than one). */
  n: number;
  /** Section size by space name. */
  spaces: Map<string, bigint>;
  /** By group. */
  leaders: GroupLeader[];
}

/** The name servers know space by ("" is the default space). */
export function spaceName(space: string): string {
  return space === "" ? DEFAULT_SPACE : space;
}

/**
 * The table after a ClusterStatus answer: none for one group or a slot map
 * this client does not compute; else old's spaces and leaders (when the
 * group count is the same) with the answer's spaces added and each group
 * row weighed against the leader held: a lower term never replaces it, the
 * same term only when the row names a leader, a higher term always (even
 * naming none: an election is under way). urlOf turns an API address into
 * a base URL.
 */
export function applyGroups(
  old: GroupTable | undefined,
  st: ClusterStatusResponse,
  urlOf: (addr: string) => string,
): GroupTable | undefined {
  const rows = st.groups;
  if (rows.length <= 1 || rows.length > MAX_GROUPS || st.slotCount !== SLOT_COUNT || st.slotMapVersion !== SLOT_MAP_VERSION) {
    return undefined;
  }
  const n = rows.length;
  const t: GroupTable = { n, spaces: new Map(), leaders: Array.from({ length: n }, () => ({ term: 0n })) };
  if (old && old.n === n) {
    t.spaces = new Map(old.spaces);
    t.leaders = old.leaders.map((l) => ({ ...l }));
  }
  // A section size, once learnt, stays: it never changes, not even across a
  // delete and a create under the same name (only the step may change).
  for (const sp of st.spaces) {
    if (sp.sectionSize > 0n) t.spaces.set(sp.name, sp.sectionSize);
  }
  for (const r of rows) {
    if (r.group >= n) continue;
    const l = t.leaders[r.group];
    const addr = r.leaderApiAddr;
    if (r.term < l.term || (r.term === l.term && addr === "")) continue; // older, or no news
    t.leaders[r.group] = addr === "" ? { term: r.term } : { url: urlOf(addr), term: r.term };
  }
  return t;
}

/**
 * Learns from an answer's Seqd-Group header (hdr, "<group> <term>") that the
 * node at url served the call, or forwarded it to hintUrl when given. A
 * higher term than the one held replaces the group's leader; the same term
 * does when no leader is held, or when the leader held is the node that
 * forwarded. Returns the group, or -1 without a valid header.
 */
export function learnGroup(t: GroupTable, url: string, hdr: string, hintUrl?: string): number {
  const m = /^(\d+) (\d+)$/.exec(hdr);
  if (!m) return -1;
  const g = Number(m[1]);
  const term = BigInt(m[2]);
  if (g >= t.n) return -1;
  const l = t.leaders[g];
  const forwarded = hintUrl !== undefined;
  if (term > l.term || (term === l.term && (l.url === undefined || (forwarded && l.url === url)))) {
    t.leaders[g] = { url: forwarded ? hintUrl : url, term };
  }
  return g;
}

/** One group's share of a call: its keys and their positions in the call. */
export interface KeyShare {
  group: number;
  pos: number[];
  keys: bigint[];
}

/** Splits keys by group, in order of first appearance (a group's keys keep their order). */
export function splitShares(space: string, sectionSize: bigint, groups: number, keys: bigint[]): KeyShare[] {
  const shares: KeyShare[] = [];
  let lastSec = -1n;
  let sh: KeyShare | undefined;
  keys.forEach((k, p) => {
    const sec = k / sectionSize;
    if (sec !== lastSec || !sh) {
      const g = groupOfKey(space, sectionSize, k, groups);
      lastSec = sec;
      sh = shares.find((s) => s.group === g);
      if (!sh) {
        sh = { group: g, pos: [], keys: [] };
        shares.push(sh);
      }
    }
    sh.pos.push(p);
    sh.keys.push(k);
  });
  return shares;
}
