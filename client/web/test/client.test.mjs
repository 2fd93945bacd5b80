// The browser client's routing by raft group (src/index.ts) against fake
// nodes behind a fake fetch (fake.mjs), as client/groups_test.go checks the
// Go client.

import assert from "node:assert/strict";
import { test } from "node:test";
import { load } from "./bundle.mjs";
import { V1, fakeCluster, keyOfGroup, status, until } from "./fake.mjs";

const { createSeqdClient, Code } = await load("src/index.ts");

const leaders = (cl) => cl.routing().groups.map((g) => [g.leader, g.term]);

test("the per-group table follows the Go client's rules", async () => {
  const c = fakeCluster(["a:1", "b:1", "c:1"]);
  c.status = status(V1, "a:1", [["a:1", 5], ["b:1", 5], ["", 5]]);
  const cl = createSeqdClient("http://a:1", { fetch: c.fetch, retryForMs: 1000 });
  const [A, B, C] = ["http://a:1", "http://b:1", "http://c:1"];
  const want = (what, rows) => assert.deepEqual(leaders(cl), rows.map(([u, t]) => [u, BigInt(t)]), what);
  const k0 = keyOfGroup(0, 1n), k1 = keyOfGroup(1, 1n), k2 = keyOfGroup(2, 1n);
  const k1b = keyOfGroup(1, k1 + 100n); // another section of group 1

  // Before the first refresh: one call, whole, to the given node.
  await cl.next("", [k0, k1, k2]);
  assert.deepEqual(c.take("a:1").map((r) => r.keys), [[k0, k1, k2]]);
  await until("a refresh", () => cl.routing().refreshes > 0);
  want("after the refresh", [[A, 5], [B, 5], ["", 5]]);

  // Split: groups 0 and 2 (leader unknown) to a, group 1 to b, values in the keys' order.
  const keys = [k1, k0, k1b, k2, k1];
  const vals = await cl.next("", keys);
  keys.forEach((k, i) => assert.equal(vals[i] / 1000n, k, `values ${vals} for keys ${keys}`));
  assert.ok(vals[4] > vals[0], "a key listed twice gets increasing values");
  assert.deepEqual(c.take("a:1").map((r) => r.keys).sort((x, y) => Number(x[0] - y[0])), [[k0], [k2]]);
  assert.deepEqual(c.take("b:1").map((r) => r.keys), [[k1, k1b, k1]]);
  // current is split the same way.
  const cur = await cl.current("default", [k2, k1]);
  assert.deepEqual(cur, [vals[3], vals[4]]);
  assert.deepEqual([c.take("a:1").length, c.take("b:1").length], [1, 1]);

  // Answers: a lower term teaches nothing; a higher one from b makes b leader at it.
  c.set("b:1", { group: "1 4" });
  await cl.next("", [k1]);
  want("after a lower term", [[A, 5], [B, 5], ["", 5]]);
  c.set("b:1", { group: "1 6" });
  await cl.next("", [k1]);
  want("after a higher term", [[A, 5], [B, 6], ["", 5]]);
  // b forwards at the same term: the hinted c leads.
  c.set("b:1", { group: "1 6", hint: "c:1" });
  await cl.next("", [k1]);
  want("after the held leader forwarded", [[A, 5], [C, 6], ["", 5]]);
  c.set("c:1", { group: "1 5" });
  await cl.next("", [k1]);
  assert.equal(c.take("c:1").length, 1, "group 1's call went to its new leader");
  assert.equal(c.take("b:1").length, 3);
  want("after an older answer", [[A, 5], [C, 6], ["", 5]]);
  // Group 2's leader unknown at term 5: a's forwarded answer at term 5 names it.
  c.set("a:1", { group: "2 5", hint: "b:1" });
  await cl.next("", [k2]);
  want("after a hint for an unknown leader", [[A, 5], [C, 6], [B, 5]]);
  c.set("a:1", { group: "", hint: "" });
  assert.ok(cl.routing().forwarded >= 2, "forwarded answers are counted");

  // A refresh (new routing version): a lower-term row keeps the leader held,
  // a higher one replaces it, even naming no leader.
  const V2 = (5n << 32n) | 2n;
  const refreshes = cl.routing().refreshes;
  c.status = status(V2, "a:1", [["a:1", 5], ["b:1", 5], ["", 7]]);
  c.set("a:1", { version: String(V2) });
  await cl.next("", [k0]);
  await until("a second refresh", () => cl.routing().refreshes > refreshes);
  want("after the second refresh", [[A, 5], [C, 6], ["", 7]]);
  assert.equal(cl.routing().tableVersion, V2);

  // Group 1's leader fails: the retry goes to the given node at once, and the
  // table forgets c (keeping term 6); a's answer at term 6 makes a the leader.
  for (const h of ["a:1", "b:1", "c:1"]) c.take(h);
  c.set("c:1", { fail: [503, "unavailable"] });
  c.set("a:1", { group: "1 6" });
  await cl.next("", [k1]);
  assert.deepEqual([c.take("c:1").length, c.take("a:1").length], [1, 1]);
  want("after group 1's leader failed", [[A, 5], [A, 6], ["", 7]]);
  // ... and so does an unreachable leader (a network error).
  c.set("a:1", { group: "2 8", hint: "c:1" });
  await cl.next("", [k2]);
  want("c leads group 2", [[A, 5], [A, 6], [C, 8]]);
  c.set("c:1", { down: true });
  c.set("a:1", { group: "", hint: "" });
  await cl.next("", [k2]);
  want("after c went down", [[A, 5], [A, 6], ["", 8]]);
  c.set("c:1", { down: false });

  // reserve goes to its key's group's leader.
  c.set("a:1", { group: "2 9", hint: "b:1" });
  await cl.next("", [k2]);
  c.set("a:1", { group: "", hint: "" });
  for (const h of ["a:1", "b:1"]) c.take(h);
  await cl.reserve("", k2, 10);
  assert.deepEqual(c.take("b:1").map((r) => [r.method, r.keys]), [["Reserve", [k2]]]);

  // A share that fails for good fails the whole call.
  c.set("b:1", { fail: [400, "failed_precondition"] });
  await assert.rejects(cl.next("", [k0, k2, k1]), (e) => e.code === Code.FailedPrecondition);

  // A space the table does not know: the call goes whole, then a refresh learns it.
  for (const h of ["a:1", "b:1"]) c.take(h);
  const before = c.statusCalls;
  await cl.next("other", [k1, k2]);
  assert.deepEqual(c.take("a:1").map((r) => r.keys), [[k1, k2]]);
  await until("a refresh for the new space", () => c.statusCalls > before);
});

test("no table: another slot map, one group, or routing disabled", async () => {
  for (const [what, st, opts] of [
    ["slot map version 2", status(V1, "a:1", [["a:1", 5], ["b:1", 5], ["b:1", 5]], { slotMapVersion: "2" }), {}],
    ["one group", status(V1, "a:1", [["b:1", 5]]), {}],
    ["routing disabled", status(V1, "a:1", [["a:1", 5], ["b:1", 5], ["b:1", 5]]), { disableRouting: true }],
  ]) {
    const c = fakeCluster(["a:1", "b:1"]);
    c.status = st;
    const cl = createSeqdClient("http://a:1", { fetch: c.fetch, ...opts });
    await cl.next("", [1n]);
    if (!opts.disableRouting) await until(`${what}: a refresh`, () => cl.routing().refreshes > 0);
    const keys = [keyOfGroup(0, 1n), keyOfGroup(1, 1n), keyOfGroup(2, 1n)];
    await cl.next("", keys);
    await cl.reserve("", keys[1], 5);
    assert.deepEqual(cl.routing().groups, [], what);
    assert.equal(c.take("b:1").length, 0, `${what}: nothing sent to b`);
    assert.deepEqual(c.take("a:1").map((r) => r.keys), [[1n], keys, [keys[1]]], `${what}: every call whole to a`);
    if (opts.disableRouting) assert.equal(c.statusCalls, 0, "no ClusterStatus with routing disabled");
  }
});

test("leaders' addresses take the scheme of the given URL", async () => {
  const c = fakeCluster(["a:1", "b:1"]);
  c.status = status(V1, "a:1", [["a:1", 5], ["b:1", 5], ["b:1", 5]]);
  const cl = createSeqdClient(["https://a:1/"], { fetch: c.fetch });
  await cl.next("", [1n]);
  await until("a refresh", () => cl.routing().refreshes > 0);
  assert.deepEqual(leaders(cl), [["https://a:1", 5n], ["https://b:1", 5n], ["https://b:1", 5n]]);
});

test("several given nodes: a node that cannot be reached is skipped", async () => {
  const c = fakeCluster(["a:1", "b:1"]);
  c.set("a:1", { down: true });
  const cl = createSeqdClient(["http://a:1", "http://b:1"], { fetch: c.fetch, disableRouting: true });
  assert.equal((await cl.next("", [7n]))[0], 7001n);
  assert.equal(cl.routing().node, "http://b:1");
  // With one node given, a network error fails the call at once, as before.
  const one = createSeqdClient("http://a:1", { fetch: c.fetch, disableRouting: true });
  await assert.rejects(one.next("", [7n]), (e) => e.code === Code.Unknown);
});
