// The status page's "refusing raft" pill (src/page/refusal.ts) against the
// node rows ClusterStatus answers: every group refused, some, none, with
// and without the admission kind, and a fenced node.

import assert from "node:assert/strict";
import { test } from "node:test";
import { load } from "./bundle.mjs";

const { raftRefusal } = await load("src/page/refusal.ts");

const node = (open, ...groups) => ({
  raftOpen: open,
  groups: groups.map(([group, raftOpen, admission]) => ({ group, raftOpen, ...(admission ? { admission } : {}) })),
});

test("a node taking raft traffic has no pill", () => {
  assert.equal(raftRefusal(node(true, [0, true], [1, true], [2, true])), undefined);
  assert.equal(raftRefusal(node(true)), undefined);
});

test("a node refused in every group, or reporting no groups, is refusing raft", () => {
  assert.equal(raftRefusal(node(false, [0, false], [1, false], [2, false])), "refusing raft");
  assert.equal(raftRefusal(node(false)), "refusing raft");
  assert.equal(raftRefusal(node(false, [0, false])), "refusing raft");
});

test("the admission kind says why", () => {
  assert.equal(raftRefusal(node(false, [0, false, "stale"], [1, false, "stale"])), "refusing raft: stale");
  assert.equal(raftRefusal(node(false, [0, false, "quorum-wait"])), "refusing raft: quorum-wait");
});

test("a node refused in some groups, or for several reasons, names them", () => {
  assert.equal(raftRefusal(node(false, [0, true], [1, false], [2, true])), "refusing raft (group 1)");
  assert.equal(raftRefusal(node(false, [0, false], [1, true], [2, false])), "refusing raft (group 0, group 2)");
  assert.equal(raftRefusal(node(false, [0, true], [1, false, "stale"], [2, false, "wiped"])), "refusing raft (group 1: stale, group 2: wiped)");
  assert.equal(raftRefusal(node(false, [0, false, "stale"], [1, false, "quorum-wait"])), "refusing raft (group 0: stale, group 1: quorum-wait)");
});

test("a fenced node says so", () => {
  assert.equal(raftRefusal({ ...node(false, [0, false, "superseded"]), fenced: true }), "fenced");
  assert.equal(raftRefusal({ ...node(true, [0, true]), fenced: true }), "fenced");
});
