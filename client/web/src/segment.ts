// Segments: Leaf-segment mode, with the Go client's rules (client/segment.go,
// docs/segments.md). A segment hands out one key's values from memory, out of
// ranges it reserves ahead of need: the range in use and a prefetched next
// one. So it keeps issuing while the cluster is unreachable, for as long as
// the values in hand last, and says how long that is (stats()).
//
//   - The first next() reserves the first range, of `initial` values, and waits.
//   - When the share `prefetch` of the range in use is taken, the next range
//     is reserved in the background. Its size follows consumption: the time
//     since the previous reservation is how long a range lasted; below
//     `targetMs` the size doubles, at or above twice `targetMs` it halves,
//     within `min` and `max` (Leaf's dynamic step).
//   - When the range in use is spent, the prefetched one takes over. When both
//     are spent, next() waits for the reservation in flight, or fails at once
//     with `unavailable` while the last attempt failed; the reservation is
//     tried again every `retryEveryMs`, and next() succeeds again once one does.
//   - Values are unique across every client of the key (each comes from a
//     Reserve) and increase per segment; across clients they are only
//     trend-increasing. Values in hand at close() are skipped.

import { Code, ConnectError } from "@connectrpc/connect";

export interface SegmentOptions {
  /** The first range's size (default 1000, within min and max). */
  initial?: number;
  /** Bounds of a range's size (defaults 1 and 1,000,000, the most one Reserve takes). */
  min?: number;
  max?: number;
  /** How long one range should last, in ms (default 15 minutes, as in Leaf). */
  targetMs?: number;
  /** The share of the range in use taken when the next is reserved (default 0.1, as in Leaf). */
  prefetch?: number;
  /** Bound of one reservation, in ms (default 3000); pause between failed ones (default 250). */
  fetchTimeoutMs?: number;
  retryEveryMs?: number;
}

export interface SegmentStats {
  /** Values handed out. */
  issued: number;
  /** Values left in the range in use and the prefetched one; whether the latter is in hand. */
  inHand: number;
  prefetched: boolean;
  /** The size of the next reservation. */
  nextSize: number;
  /** Values handed out per second lately, and how long inHand lasts at that rate, in ms (0: no rate). */
  rate: number;
  lastsMs: number;
  /** Reserve calls made, failed ones, and the last one's error while it failed. */
  reservations: number;
  failures: number;
  unreachable?: string;
}

export interface Segment {
  /** The segment's next value. */
  next(): Promise<bigint>;
  /** n increasing values (consecutive within a range; they may span two). */
  nextN(n: number): Promise<bigint[]>;
  stats(): SegmentStats;
  /** Stops the reservations; values in hand are skipped, next() fails. */
  close(): void;
}

/** Reserves count values of the segment's key within timeoutMs: the first of them. */
export type Reserver = (count: number, timeoutMs: number) => Promise<bigint>;

const MAX_RESERVE = 1_000_000;

interface Range {
  first: bigint;
  size: number;
  taken: number;
  prefetchAt: number;
  asked: boolean;
}

/** Leaf's dynamic step: the next range's size after one that lasted d ms. */
export function nextSize(size: number, d: number, o: Required<SegmentOptions>): number {
  if (d < o.targetMs) size = Math.min(2 * size, o.max);
  else if (d >= 2 * o.targetMs) size = Math.floor(size / 2);
  return Math.min(Math.max(size, o.min), o.max);
}

export function segmentDefaults(o: SegmentOptions = {}): Required<SegmentOptions> {
  const min = o.min && o.min > 0 ? Math.floor(o.min) : 1;
  const max = Math.max(o.max && o.max > 0 && o.max <= MAX_RESERVE ? Math.floor(o.max) : MAX_RESERVE, min);
  return {
    min,
    max,
    initial: Math.min(Math.max(o.initial && o.initial > 0 ? Math.floor(o.initial) : 1000, min), max),
    targetMs: o.targetMs && o.targetMs > 0 ? o.targetMs : 15 * 60 * 1000,
    prefetch: o.prefetch && o.prefetch > 0 && o.prefetch <= 1 ? o.prefetch : 0.1,
    fetchTimeoutMs: o.fetchTimeoutMs && o.fetchTimeoutMs > 0 ? o.fetchTimeoutMs : 3000,
    retryEveryMs: o.retryEveryMs && o.retryEveryMs > 0 ? o.retryEveryMs : 250,
  };
}

/** A segment over reserve (see above); clock reads ms (tests move it). */
export function createSegment(reserve: Reserver, options: SegmentOptions = {}, clock: () => number = Date.now): Segment {
  const o = segmentDefaults(options);
  let cur: Range | undefined;
  let nxt: Range | undefined;
  let size = o.initial;
  let lastFetch = 0; // 0: none yet
  let fetching = false;
  let failing: unknown;
  let closed = false;
  let issued = 0, reservations = 0, failures = 0;
  let waiters: (() => void)[] = [];
  const rate = { at: clock(), count: 0, last: 0 };

  const wakeAll = () => {
    const w = waiters;
    waiters = [];
    w.forEach((f) => f());
  };

  // fetch reserves the next range unless one is in hand, trying again every
  // retryEveryMs until one comes back or the segment closes.
  function fetch(): void {
    if (fetching || closed || nxt) return;
    fetching = true;
    if (lastFetch !== 0) size = nextSize(size, clock() - lastFetch, o);
    const want = size;
    void (async () => {
      while (!closed) {
        reservations++;
        try {
          const first = await reserve(want, o.fetchTimeoutMs);
          const r: Range = { first, size: want, taken: 0, prefetchAt: Math.max(1, Math.floor(want * o.prefetch)), asked: false };
          failing = undefined;
          lastFetch = clock();
          if (!closed) {
            if (cur === undefined) cur = r;
            else nxt = r;
          }
          break;
        } catch (err) {
          failures++;
          failing = err;
          wakeAll();
          await new Promise((res) => setTimeout(res, o.retryEveryMs));
        }
      }
      fetching = false;
      wakeAll();
    })();
  }

  // claim takes up to want values from the range in use: their first and count.
  function claim(want: number): [bigint, number] {
    const r = cur;
    if (!r || r.taken >= r.size) return [0n, 0];
    const got = Math.min(want, r.size - r.taken);
    const first = r.first + BigInt(r.taken);
    r.taken += got;
    issued += got;
    if (r.taken >= r.prefetchAt && !r.asked) {
      r.asked = true;
      fetch();
    }
    return [first, got];
  }

  // refill moves on once the range in use is spent (see above).
  async function refill(): Promise<void> {
    for (;;) {
      if (closed) throw new ConnectError("segment closed", Code.Canceled);
      if (cur && cur.taken < cur.size) return;
      if (nxt) {
        cur = nxt;
        nxt = undefined;
        return;
      }
      if (failing !== undefined) {
        throw new ConnectError(`segment: both ranges are spent and reserving the next failed (${ConnectError.from(failing).rawMessage}); retrying in the background`, Code.Unavailable);
      }
      fetch();
      await new Promise<void>((res) => waiters.push(res));
    }
  }

  return {
    async next() {
      for (;;) {
        if (closed) throw new ConnectError("segment closed", Code.Canceled);
        const [v, got] = claim(1);
        if (got === 1) return v;
        await refill();
      }
    },
    async nextN(n) {
      if (!Number.isInteger(n) || n < 1 || n > MAX_RESERVE) throw new RangeError(`nextN: ${n} values, want 1 to ${MAX_RESERVE}`);
      const out: bigint[] = [];
      while (out.length < n) {
        if (closed) throw new ConnectError("segment closed", Code.Canceled);
        const [v, got] = claim(n - out.length);
        for (let i = 0; i < got; i++) out.push(v + BigInt(i));
        if (out.length < n) await refill();
      }
      return out;
    },
    stats() {
      const inHand = (cur ? cur.size - Math.min(cur.taken, cur.size) : 0) + (nxt ? nxt.size : 0);
      const now = clock();
      const d = now - rate.at;
      if (d >= 1000) rate.last = ((issued - rate.count) * 1000) / d;
      if (d >= 10000) Object.assign(rate, { at: now, count: issued });
      return {
        issued,
        inHand,
        prefetched: nxt !== undefined,
        nextSize: size,
        rate: rate.last,
        lastsMs: rate.last > 0 ? (inHand / rate.last) * 1000 : 0,
        reservations,
        failures,
        unreachable: failing === undefined ? undefined : ConnectError.from(failing).rawMessage,
      };
    },
    close() {
      closed = true;
      wakeAll();
    },
  };
}
