// What the status page says about a node that refuses raft traffic.

import type { Node } from "../index.js";

/**
 * The pill text for a node that refuses raft traffic, or undefined when it
 * takes raft traffic: "fenced" once a restore replaced its cluster; else
 * "refusing raft: <kind>" when every group refuses it for one reason (the
 * admission verdict's kind, DESIGN.md §6; no kind from a server that does
 * not report it, or reports no groups), "refusing raft (group 1: stale,
 * group 2: quorum-wait)" when only some groups do or for several reasons,
 * as `seqd status` says.
 */
export function raftRefusal(n: Pick<Node, "raftOpen" | "groups"> & Partial<Pick<Node, "fenced">>): string | undefined {
  if (n.fenced) return "fenced";
  if (n.raftOpen) return undefined;
  const shut = n.groups.filter((g) => !g.raftOpen);
  const kinds = new Set(shut.map((g) => g.admission ?? ""));
  const suffix = (k: string | undefined): string => (k ? `: ${k}` : "");
  if (shut.length === 0 || (shut.length === n.groups.length && kinds.size === 1)) {
    return "refusing raft" + suffix(shut[0]?.admission);
  }
  return `refusing raft (${shut.map((g) => `group ${g.group}${suffix(g.admission)}`).join(", ")})`;
}
