// What the status page says about a node that refuses raft traffic.

import type { Node } from "../index.js";

/**
 * The pill text for a node that refuses raft traffic because it has not been
 * vouched for (DESIGN.md §6), or undefined when it takes raft traffic.
 * "refusing raft" when every group refuses it (or the node reports no
 * groups), "refusing raft (groups 1, 2)" when only some groups do, as
 * `seqd status` says.
 */
export function raftRefusal(n: Pick<Node, "raftOpen" | "groups">): string | undefined {
  if (n.raftOpen) return undefined;
  const shut = n.groups.filter((g) => !g.raftOpen).map((g) => g.group);
  return shut.length && shut.length < n.groups.length ? `refusing raft (groups ${shut.join(", ")})` : "refusing raft";
}
