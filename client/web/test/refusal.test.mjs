// The status page's "refusing raft" pill (src/page/refusal.ts) against the
// node rows ClusterStatus answers: every group refused, some, none.

import assert from "node:assert/strict";
import { test } from "node:test";
import { load } from "./bundle.mjs";

const { raftRefusal } = await load("src/page/refusal.ts");

const node = (open, ...groups) => ({ raftOpen: open, groups: groups.map(([group, raftOpen]) => ({ group, raftOpen })) });

test("a node taking raft traffic has no pill", () => {
  assert.equal(raftRefusal(node(true, [0, true], [1, true], [2, true])), undefined);
  assert.equal(raftRefusal(node(true)), undefined);
});

test("a node refused in every group, or reporting no groups, is refusing raft", () => {
  assert.equal(raftRefusal(node(false, [0, false], [1, false], [2, false])), "refusing raft");
  assert.equal(raftRefusal(node(false)), "refusing raft");
  assert.equal(raftRefusal(node(false, [0, false])), "refusing raft");
});

test("a node refused in some groups names them", () => {
  assert.equal(raftRefusal(node(false, [0, true], [1, false], [2, true])), "refusing raft (groups 1)");
  assert.equal(raftRefusal(node(false, [0, false], [1, true], [2, false])), "refusing raft (groups 0, 2)");
});
