// Coalescing of concurrent next and current calls in the browser client
// (src/coalesce.ts), against fake nodes (fake.mjs), as client/coalesce_test.go
// checks the Go client's.

import assert from "node:assert/strict";
import { test } from "node:test";
import { load } from "./bundle.mjs";
import { V1, fakeCluster, keyOfGroup, status, until } from "./fake.mjs";

const { createSeqdClient, Code } = await load("src/index.ts");

/** A client of node a of fake cluster c; one coalesced request in flight at a time, none sent past it. */
function oneAtATime(c, opts = {}) {
  return createSeqdClient("http://a:1", { fetch: c.fetch, disableRouting: true, maxInFlight: 1, maxBatchWaitMs: -1, retryForMs: 1000, ...opts });
}
const keysOf = (reqs) => reqs.map((r) => r.keys);
const arrived = (c, h, n) => until(`${n} requests at ${h}`, () => c.nodes.get(h).reqs.length >= n);
const vals = (...xs) => xs.map(BigInt);

test("an idle call is sent at once, on its own", async () => {
  const c = fakeCluster(["a:1"]);
  const cl = createSeqdClient("http://a:1", { fetch: c.fetch, disableRouting: true });
  for (let i = 1n; i <= 5n; i++) assert.deepEqual(await cl.next("s", [7n, 8n]), [7000n + i, 8000n + i]);
  assert.deepEqual(keysOf(c.take("a:1")), Array(5).fill([7n, 8n]));
  assert.deepEqual(cl.batchStats(), { calls: 5, requests: 5, keys: 10 });
});

test("calls made while a request is in flight go together, in the order they were made", async () => {
  const c = fakeCluster(["a:1"]);
  const cl = oneAtATime(c);
  c.hold("a:1");
  const p1 = cl.next("s", [5n]);
  await arrived(c, "a:1", 1);
  const ps = [cl.next("s", [5n]), cl.next("s", [5n, 6n, 5n]), cl.next("s", [7n]), cl.next("s", [5n])];
  assert.deepEqual(cl.batchStats(), { calls: 5, requests: 1, keys: 1 }, "queued behind the held request");
  c.release("a:1");
  assert.deepEqual(await p1, [5001n]);
  assert.deepEqual(await Promise.all(ps), [[5002n], [5003n, 6001n, 5004n], [7001n], [5005n]]);
  assert.deepEqual(keysOf(c.take("a:1")), [[5n], vals(5, 5, 6, 5, 7, 5)]);
  assert.deepEqual(cl.batchStats(), { calls: 5, requests: 2, keys: 7 });

  // Current is coalesced too, apart from Next; and so are spaces.
  c.hold("a:1");
  const q1 = cl.current("s", [5n]);
  const n1 = cl.next("s", [6n]);
  const o1 = cl.next("t", [8n]);
  await arrived(c, "a:1", 3);
  const qs = [cl.current("s", [7n]), cl.current("s", [5n]), cl.next("t", [8n]), cl.next("s", [6n]), cl.next("t", [9n])];
  c.release("a:1");
  assert.deepEqual(await Promise.all([q1, n1, o1, ...qs]), [[5005n], [6002n], [8001n], [7001n], [5005n], [8002n], [6003n], [9001n]]);
  const reqs = c.take("a:1").map((r) => [r.method, r.space, r.keys]);
  assert.deepEqual(reqs.slice(0, 3), [["Current", "s", [5n]], ["Next", "s", [6n]], ["Next", "t", [8n]]]);
  assert.deepEqual(reqs.slice(3).sort(), [["Current", "s", [7n, 5n]], ["Next", "s", [6n]], ["Next", "t", [8n, 9n]]].sort());
  assert.deepEqual(cl.batchStats(), { calls: 13, requests: 8, keys: 15 });
});

test("a burst of concurrent calls takes fewer requests than calls, each call its own values", async () => {
  const c = fakeCluster(["a:1"]);
  const cl = createSeqdClient("http://a:1", { fetch: c.fetch, disableRouting: true });
  const got = await Promise.all(Array.from({ length: 100 }, (_, i) => cl.next("", [1n, BigInt(i + 100)])));
  got.forEach(([a, b], i) => {
    assert.equal(a / 1000n, 1n);
    assert.equal(b, BigInt(i + 100) * 1000n + 1n, `call ${i}'s own key`);
  });
  assert.equal(new Set(got.map(([a]) => a)).size, 100, "no value twice");
  const { calls, requests } = cl.batchStats();
  assert.equal(calls, 100);
  assert.ok(requests <= 10, `${requests} requests for 100 concurrent calls`);
  assert.equal(c.take("a:1").length, requests);
});

test("coalescing is per space and group: each request goes to one group's leader", async () => {
  const c = fakeCluster(["a:1", "b:1", "c:1"]);
  c.status = status(V1, "a:1", [["a:1", 5], ["b:1", 5], ["c:1", 5]]);
  const cl = createSeqdClient("http://a:1", { fetch: c.fetch, maxInFlight: 1, maxBatchWaitMs: -1 });
  await cl.next("", [1n]);
  await until("a refresh", () => cl.routing().refreshes > 0);
  for (const h of ["a:1", "b:1", "c:1"]) c.take(h);
  const k0 = keyOfGroup(0, 1n), k0b = keyOfGroup(0, k0 + 100n), k1 = keyOfGroup(1, 1n), k1b = keyOfGroup(1, k1 + 100n);
  const s0 = cl.batchStats();

  c.hold("a:1");
  c.hold("b:1");
  const p1 = cl.next("", [k0]);
  const p2 = cl.next("", [k1]);
  await arrived(c, "a:1", 1);
  await arrived(c, "b:1", 1);
  // Shares join their groups' queues; group 2 (c) is idle.
  const p3 = cl.next("", [k0b, k1b]);
  const p4 = cl.next("", [k1, k0]);
  const p5 = cl.next("", [keyOfGroup(2, 1n)]);
  c.release("a:1");
  c.release("b:1");
  const k = (key, n) => key * 1000n + n;
  assert.deepEqual(await Promise.all([p1, p2, p3, p4]), [[k(k0, 1n)], [k(k1, 1n)], [k(k0b, 1n), k(k1b, 1n)], [k(k1, 2n), k(k0, 2n)]]);
  await p5;
  assert.deepEqual(keysOf(c.take("a:1")), [[k0], [k0b, k0]]);
  assert.deepEqual(keysOf(c.take("b:1")), [[k1], [k1b, k1]]);
  assert.deepEqual(keysOf(c.take("c:1")), [[keyOfGroup(2, 1n)]]);
  const s = cl.batchStats();
  assert.deepEqual([s.calls - s0.calls, s.requests - s0.requests], [7, 5], "a share counts as a call");
});

test("maxBatchKeys bounds a request; a larger call goes on its own", async () => {
  const c = fakeCluster(["a:1"]);
  const cl = oneAtATime(c, { maxBatchKeys: 3 });
  c.hold("a:1");
  const ps = [cl.next("", [1n])];
  await arrived(c, "a:1", 1);
  ps.push(cl.next("", vals(2, 3)), cl.next("", vals(4, 5)), cl.next("", [6n]), cl.next("", vals(7, 8, 9, 10)));
  await arrived(c, "a:1", 2); // the large call, at once
  c.release("a:1");
  assert.deepEqual(await Promise.all(ps), [[1001n], [2001n, 3001n], [4001n, 5001n], [6001n], [7001n, 8001n, 9001n, 10001n]]);
  assert.deepEqual(keysOf(c.take("a:1")), [[1n], vals(7, 8, 9, 10), vals(2, 3), vals(4, 5, 6)]);
  assert.deepEqual(cl.batchStats(), { calls: 4, requests: 3, keys: 6 });
});

test("a queued call is sent past a slow request after maxBatchWaitMs", async () => {
  const c = fakeCluster(["a:1"]);
  const cl = oneAtATime(c, { maxBatchWaitMs: 20 });
  c.hold("a:1");
  const p1 = cl.next("", [1n]);
  await arrived(c, "a:1", 1);
  const p2 = cl.next("", [2n]);
  await arrived(c, "a:1", 2); // while the first is still held
  c.release("a:1");
  assert.deepEqual([await p1, await p2], [[1001n], [2001n]]);
});

test("a failing request fails every call in it; unavailable retries it whole", async () => {
  const c = fakeCluster(["a:1"]);
  const cl = oneAtATime(c);
  let unavailable = 1;
  c.set("a:1", {
    failIf: (keys) =>
      keys.includes(99n) ? [400, "failed_precondition"] : keys.includes(50n) && unavailable-- > 0 ? [503, "unavailable"] : undefined,
  });
  const batch = async (...calls) => {
    c.hold("a:1");
    const p1 = cl.next("", [1n]);
    await arrived(c, "a:1", 1);
    const ps = calls.map((keys) => cl.next("", keys).then((v) => v, (e) => e));
    c.release("a:1");
    await p1;
    return Promise.all(ps);
  };
  const failed = await batch([2n], [99n], vals(3, 4));
  for (const e of failed) assert.equal(e.code, Code.FailedPrecondition, String(e));
  assert.deepEqual(keysOf(c.take("a:1")), [[1n], vals(2, 99, 3, 4)]);
  assert.deepEqual(await cl.next("", [2n]), [2001n], "the failed request took no value");
  c.take("a:1");

  assert.deepEqual(await batch([2n], [50n]), [[2002n], [50001n]]);
  assert.deepEqual(keysOf(c.take("a:1")), [[1n], vals(2, 50), vals(2, 50)], "retried as a whole");
});

test("resource_exhausted reaches only the calls whose keys caused it", async () => {
  const c = fakeCluster(["a:1"]);
  const cl = oneAtATime(c);
  c.set("a:1", { failIf: (keys) => (keys.includes(98n) ? [429, "resource_exhausted"] : undefined) });
  c.hold("a:1");
  const p1 = cl.next("", [1n]);
  await arrived(c, "a:1", 1);
  const p2 = cl.next("", [98n]).then((v) => v, (e) => e);
  const p3 = cl.next("", [3n]);
  c.release("a:1");
  await p1;
  assert.equal((await p2).code, Code.ResourceExhausted);
  assert.deepEqual(await p3, [3001n]);
  assert.deepEqual(keysOf(c.take("a:1")), [[1n], vals(98, 3), [98n], [3n]]);
});

test("a call whose share fails returns at once; the calls coalesced with it go on", async () => {
  const c = fakeCluster(["a:1", "b:1"]);
  c.status = status(V1, "a:1", [["a:1", 5], ["b:1", 5], ["a:1", 5]]);
  const cl = createSeqdClient("http://a:1", { fetch: c.fetch, maxInFlight: 1, maxBatchWaitMs: -1 });
  await cl.next("", [1n]);
  await until("a refresh", () => cl.routing().refreshes > 0);
  const k0 = keyOfGroup(0, 1n), k1 = keyOfGroup(1, 1n);
  c.take("b:1");
  c.set("a:1", { failIf: (keys) => (keys.includes(k0) ? [400, "failed_precondition"] : undefined) });
  c.hold("b:1");
  const p1 = cl.next("", [k1]);
  await arrived(c, "b:1", 1);
  const p2 = cl.next("", [k1]);
  await assert.rejects(cl.next("", [k0, k1]), (e) => e.code === Code.FailedPrecondition);
  c.release("b:1");
  assert.deepEqual([await p1, await p2], [[k1 * 1000n + 1n], [k1 * 1000n + 2n]]);
  assert.deepEqual(keysOf(c.take("b:1")), [[k1], [k1, k1]], "the failed call's share was sent for the other (a gap)");
});

test("a call joining a queued request that every earlier call left still gets its values", async () => {
  // The k1 share of a call whose k0 share fails is queued alone behind a
  // request in flight, and leaves: nobody waits for that queued request any
  // more. A later call of k1, which nobody cancels, joins it (the last
  // queued request still accepts calls): it must get its value, not a
  // cancellation it never asked for.
  const c = fakeCluster(["a:1", "b:1"]);
  c.status = status(V1, "a:1", [["a:1", 5], ["b:1", 5], ["a:1", 5]]);
  // fetch as browsers and node run it: an aborted signal rejects at once.
  const fetch = (url, init) => (init?.signal?.aborted ? Promise.reject(new DOMException("aborted", "AbortError")) : c.fetch(url, init));
  const cl = createSeqdClient("http://a:1", { fetch, maxInFlight: 1, maxBatchWaitMs: -1 });
  await cl.next("", [1n]);
  await until("a refresh", () => cl.routing().refreshes > 0);
  const k0 = keyOfGroup(0, 1n), k1 = keyOfGroup(1, 1n);
  c.take("b:1");
  c.set("a:1", { failIf: (keys) => (keys.includes(k0) ? [400, "failed_precondition"] : undefined) });
  c.hold("b:1");
  const p1 = cl.next("", [k1]);
  await arrived(c, "b:1", 1);
  await assert.rejects(cl.next("", [k0, k1]), (e) => e.code === Code.FailedPrecondition);
  const p2 = cl.next("", [k1]);
  c.release("b:1");
  assert.deepEqual(await p1, [k1 * 1000n + 1n]);
  const got = await p2.catch((e) => `rejected: ${e}`);
  assert.ok(Array.isArray(got) && got.length === 1 && got[0] > k1 * 1000n + 1n, `a call nobody canceled got ${got}`);
});

test("a call that returned before another began gets the smaller value", async () => {
  const c = fakeCluster(["a:1"]);
  c.set("a:1", { delay: () => Math.random() * 4 });
  const cl = createSeqdClient("http://a:1", { fetch: c.fetch, disableRouting: true });
  let clock = 0;
  const done = [];
  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; i < 15; i++) {
        const keys = i % 3 === 0 ? vals(1, 2, 1) : vals(1, 2);
        const start = clock++;
        const v = await cl.next("s", keys);
        done.push({ start, end: clock++, v, w });
        if (keys.length === 3) assert.ok(v[2] > v[0], "a key named twice gets increasing values");
      }
    }),
  );
  for (const p of [0, 1]) assert.equal(new Set(done.map((d) => d.v[p])).size, done.length, "no value twice");
  for (const a of done) {
    for (const b of done) {
      if (a.end < b.start) assert.ok(a.v[0] < b.v[0] && a.v[1] < b.v[1], `${a.v} returned before the call that got ${b.v} began`);
    }
  }
  const { calls, requests } = cl.batchStats();
  assert.equal(calls, 120);
  assert.ok(requests < calls, `${requests} requests for ${calls} calls`);
});

test("disableCoalescing sends every call as its own request", async () => {
  const c = fakeCluster(["a:1"]);
  const cl = createSeqdClient("http://a:1", { fetch: c.fetch, disableRouting: true, disableCoalescing: true });
  const got = await Promise.all(Array.from({ length: 20 }, () => cl.next("", [1n])));
  assert.equal(new Set(got.map(([v]) => v)).size, 20);
  assert.deepEqual(keysOf(c.take("a:1")), Array(20).fill([1n]));
  assert.deepEqual(cl.batchStats(), { calls: 0, requests: 0, keys: 0 });
});
