// Coalescing of concurrent next and current calls (group commit on the
// client), with the rules of the Go client (client/coalesce.go).
//
// A call that finds no request of its batcher in flight is sent at once, on
// its own (no added latency when idle). Calls that arrive while requests are
// in flight queue up and go together in the next multi-key request, in the
// order they arrived, so that a call that completed before another began
// still gets the smaller value for a key, and each call gets exactly the
// values of its own keys. A queued request is sent when no request is in
// flight; or when fewer than maxInFlight are, and the last request left at
// least a round trip / maxInFlight ago (round trips measured as a moving
// average), which spreads the requests in flight over a round trip; or once
// it has waited maxBatchWaitMs (then at most MAX_OVER_LIMIT requests over
// maxInFlight). A request holds at most maxBatchKeys keys.
//
// A request is retried as a whole by its send function (the client's retry
// loop), still counted in flight, so that a later call never joins a request
// already sent. It fails every call in it, except resource_exhausted (one
// key near 2^63), after which each of its calls is sent again on its own, so
// that the error reaches only the calls whose keys caused it. A call whose
// signal aborts leaves at once; a request all of whose calls left is not
// sent, or is aborted (no further attempt).

import { Code, ConnectError } from "@connectrpc/connect";

/** Coalescing defaults (the Go client's). */
export const DEFAULT_MAX_BATCH_KEYS = 1000;
export const DEFAULT_MAX_IN_FLIGHT = 4;
export const DEFAULT_MAX_BATCH_WAIT_MS = 5;
/** Bounds the requests sent over maxInFlight by the maxBatchWaitMs rule. */
const MAX_OVER_LIMIT = 3;

export interface CoalesceLimits {
  maxBatchKeys: number;
  maxInFlight: number;
  /** Negative: a queued request waits for a free slot. */
  maxBatchWaitMs: number;
}

/** Counts the coalesced calls of a client and the requests that carried them. */
export interface BatchStats {
  /** next and current calls (each group's share of one counts) that went through coalescing. */
  calls: number;
  /** Requests sent for them. */
  requests: number;
  /** Keys in those requests. */
  keys: number;
}

/** Sends one request's keys (with retries) and returns one value per key; signal aborts it. */
export type SendFn = (keys: bigint[], signal?: AbortSignal) => Promise<bigint[]>;

/** One call waiting in a batch. */
interface Waiter {
  off: number;
  n: number;
  signal?: AbortSignal;
  leave?: () => void; // listens to signal until settled
  settled: boolean;
  resolve: (vals: bigint[]) => void;
  reject: (err: unknown) => void;
}

/** One request: the concatenated keys of its calls. */
interface Batch {
  keys: bigint[];
  waiters: Waiter[];
  created: number;
  live: number; // calls still waiting
  stop: AbortController; // aborted once no call waits
}

const now = (): number => performance.now();

/** Coalesces the calls of one kind for one space (and raft group). */
export class Batcher {
  private inFlight = 0;
  private queue: Batch[] = []; // waiting to be sent, oldest first; only the last accepts more calls
  private lastSend = 0;
  private rtt = 0; // moving average of request round trips, ms
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = 0; // when the timer fires; 0: not armed

  constructor(
    private readonly limits: CoalesceLimits,
    private readonly stats: BatchStats,
    private readonly send: SendFn,
  ) {}

  /** Runs one call through the batcher. */
  do(keys: bigint[], signal?: AbortSignal): Promise<bigint[]> {
    if (signal?.aborted) return Promise.reject(canceled());
    return new Promise<bigint[]>((resolve, reject) => {
      const t = now();
      let bt = this.queue[this.queue.length - 1];
      // A queued request whose calls all left is aborted (its signal stays
      // aborted): a new call does not join it, or it would fail canceled.
      if (!bt || bt.stop.signal.aborted || bt.keys.length + keys.length > this.limits.maxBatchKeys) {
        bt = { keys: [], waiters: [], created: t, live: 0, stop: new AbortController() };
        this.queue.push(bt);
      }
      const w: Waiter = { off: bt.keys.length, n: keys.length, signal, settled: false, resolve, reject };
      bt.keys.push(...keys);
      bt.waiters.push(w);
      bt.live++;
      this.stats.calls++;
      if (signal) {
        const batch = bt;
        w.leave = () => {
          // Give up. When nobody waits any more, the request is not sent,
          // or is aborted.
          settle(w, undefined, canceled());
          if (--batch.live === 0) batch.stop.abort();
        };
        signal.addEventListener("abort", w.leave, { once: true });
      }
      if (this.inFlight === 0 && this.queue.length === 1 && bt.waiters.length === 1) {
        // Idle: this call is the whole batch. Send it now.
        this.queue = [];
        this.inFlight++;
        this.lastSend = t;
        void this.run(bt);
      } else {
        this.dispatch(t);
      }
    });
  }

  // dispatch sends the oldest queued batch if the dispatch rule says it goes
  // now, else arms the timer for the next time the rule may say so.
  private dispatch(t: number): void {
    if (this.queue.length === 0) return;
    const k = this.limits.maxInFlight;
    let slotAt = 0; // when the spacing rule lets the next request go
    if (this.inFlight < k) {
      slotAt = this.lastSend + this.rtt / k;
      if (this.inFlight === 0 || t >= slotAt) return this.pop(t);
    }
    let waitAt = 0;
    if (this.limits.maxBatchWaitMs >= 0 && this.inFlight < k + MAX_OVER_LIMIT) {
      waitAt = this.queue[0].created + this.limits.maxBatchWaitMs;
      if (t >= waitAt) return this.pop(t); // waited long enough: over the limit
    }
    let at = waitAt;
    if (slotAt !== 0 && (at === 0 || slotAt < at)) at = slotAt;
    if (at !== 0 && (this.timerAt === 0 || at < this.timerAt)) {
      this.timerAt = at;
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.timerAt = 0;
        this.dispatch(now());
      }, Math.max(0, at - t));
    }
  }

  // pop sends the oldest queued batch, counted in flight.
  private pop(t: number): void {
    const bt = this.queue.shift()!;
    this.inFlight++;
    this.lastSend = t;
    void this.run(bt);
  }

  // run sends the request of bt, lets the next queued batch go, and
  // delivers the results.
  private async run(bt: Batch): Promise<void> {
    const start = now();
    let vals: bigint[] | undefined;
    let err: unknown;
    if (bt.live > 0) {
      this.stats.requests++;
      this.stats.keys += bt.keys.length;
      try {
        vals = await this.send(bt.keys, bt.stop.signal);
      } catch (e) {
        err = e;
      }
    } else {
      err = canceled(); // every caller gave up before it was sent
    }
    const t = now();
    this.inFlight--;
    if (vals) this.rtt = this.rtt === 0 ? t - start : this.rtt + (t - start - this.rtt) / 8;
    this.dispatch(t);

    if (!vals && bt.waiters.length > 1 && ConnectError.from(err).code === Code.ResourceExhausted) {
      // The error belongs to some keys only: send each call on its own.
      await Promise.all(
        bt.waiters
          .filter((w) => !w.settled)
          .map((w) =>
            this.send(bt.keys.slice(w.off, w.off + w.n), w.signal).then(
              (v) => settle(w, v),
              (e) => settle(w, undefined, e),
            ),
          ),
      );
      return;
    }
    for (const w of bt.waiters) settle(w, vals?.slice(w.off, w.off + w.n), err);
  }
}

function settle(w: Waiter, vals: bigint[] | undefined, err?: unknown): void {
  if (w.settled) return;
  w.settled = true;
  if (w.leave) w.signal?.removeEventListener("abort", w.leave);
  if (vals) w.resolve(vals);
  else w.reject(err);
}

function canceled(): ConnectError {
  return new ConnectError("call canceled", Code.Canceled);
}
