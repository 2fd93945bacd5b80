// The browser client's segments (src/segment.ts) against a fake Reserve: the
// sizing rule, the prefetch, riding out an unreachable cluster, concurrent
// callers and many segments of one key, as client/segment_test.go checks the
// Go client's.

import assert from "node:assert/strict";
import { test } from "node:test";
import { load } from "./bundle.mjs";
import { until } from "./fake.mjs";

const { createSegment, nextSize, segmentDefaults } = await load("src/segment.ts");
const { Code } = await load("src/index.ts");

/** A key's Reserve: ranges taken from one counter, so that segments share it; down makes it fail. */
function fakeKey() {
  const k = { next: 1n, calls: 0, down: false, sizes: [] };
  k.reserve = async (count) => {
    k.calls++;
    await new Promise((r) => setTimeout(r, 1));
    if (k.down) throw new Error("unreachable");
    k.sizes.push(count);
    const first = k.next;
    k.next += BigInt(count);
    return first;
  };
  return k;
}

test("the sizing rule is Leaf's dynamic step, within min and max", () => {
  const o = segmentDefaults({ min: 100, max: 1000, targetMs: 60000 });
  for (const [size, d, want] of [[200, 30000, 400], [200, 59999, 400], [200, 60000, 200], [200, 119999, 200], [200, 120000, 100], [150, 3.6e6, 100], [600, 1, 1000], [1000, 1, 1000]]) {
    assert.equal(nextSize(size, d, o), want, `nextSize(${size}, ${d})`);
  }
  const d = segmentDefaults();
  assert.deepEqual([d.initial, d.min, d.max, d.targetMs, d.prefetch], [1000, 1, 1000000, 900000, 0.1]);
});

test("ranges double while they last less than the target, halve past twice it", async () => {
  const k = fakeKey();
  let now = 1e12;
  const s = createSegment(k.reserve, { initial: 10, min: 5, max: 80, targetMs: 60000, prefetch: 0.5 }, () => now);
  let last = 0n;
  const reserveAfter = async (d) => {
    now += d;
    const before = s.stats().reservations;
    while (s.stats().reservations === before) {
      const v = await s.next();
      assert.ok(v > last, `${v} after ${last}`);
      last = v;
      await new Promise((r) => setTimeout(r, 2));
    }
    return s.stats().nextSize;
  };
  await s.next();
  const got = [];
  for (const d of [1000, 1000, 1000, 1000, 90000, 120000, 180000, 3.6e6, 3.6e6, 3.6e6]) got.push(await reserveAfter(d));
  assert.deepEqual(got, [20, 40, 80, 80, 80, 40, 20, 10, 5, 5]);
  assert.deepEqual(k.sizes, [10, ...got]);
  s.close();
});

test("a segment rides out an unreachable cluster on the values in hand, fails unavailable, and resumes", async () => {
  const k = fakeKey();
  const s = createSegment(k.reserve, { initial: 100, min: 100, max: 100, retryEveryMs: 5 });
  const vals = [];
  while (!s.stats().prefetched) {
    vals.push(await s.next());
    await new Promise((r) => setTimeout(r, 1)); // the prefetch runs in the background
  }
  k.down = true;
  const inHand = s.stats().inHand;
  assert.ok(inHand > 100, `${inHand} values in hand: the rest of the range in use and the prefetched one`);
  for (let i = 0; i < inHand; i++) vals.push(await s.next());
  const unavailable = (err) => err.code === Code.Unavailable;
  // The first call past the values in hand waits for the reservation in
  // flight, which fails; then calls fail at once.
  await assert.rejects(s.next(), unavailable);
  const t0 = Date.now();
  await assert.rejects(s.next(), unavailable);
  assert.ok(Date.now() - t0 < 50, "a call with both ranges spent fails at once");
  assert.ok(s.stats().unreachable);
  k.down = false;
  await until("a reservation after the outage", () => s.stats().unreachable === undefined);
  vals.push(await s.next());
  for (let i = 1; i < vals.length; i++) assert.ok(vals[i] > vals[i - 1], `${vals[i]} after ${vals[i - 1]}`);
  s.close();
  await assert.rejects(s.next());
});

test("concurrent callers of one segment, and many segments of one key, never get a value twice", async () => {
  const k = fakeKey();
  const segs = Array.from({ length: 8 }, () => createSegment(k.reserve, { initial: 7, min: 7, max: 30, prefetch: 0.5 }));
  const seen = new Set();
  await Promise.all(
    segs.flatMap((s, i) =>
      Array.from({ length: 8 }, async () => {
        let last = 0n;
        for (let n = 0; n < 200; n++) {
          const vs = n % 5 === 0 ? await s.nextN(3) : [await s.next()];
          for (const v of vs) {
            assert.ok(v > last, `segment ${i}: ${v} after ${last}`);
            assert.ok(!seen.has(v), `value ${v} twice`);
            seen.add(v);
            last = v;
          }
        }
      }),
    ),
  );
  assert.equal(seen.size, 8 * 8 * (160 + 40 * 3));
  segs.forEach((s) => s.close());
});
