"""Leaf's segment mode: values reserved in ranges, handed out from memory.

A Segment holds, for one (space, key), the range it hands values out of and,
once a share of that range is used (prefetch_at, Leaf's 10 %), a second range
fetched in the background (Leaf's double buffer). Ranges are taken with
Client.reserve, so they never overlap any other client's values. Their size
follows consumption (Leaf's dynamic step): when the last range lasted less
than target (Leaf: 15 minutes) the next one is twice as large, when it lasted
more than twice the target half as large, within min_size and max_size.

While the cluster cannot be reached, a Segment keeps issuing from what it
holds; stats() says how much that is and how long it is expected to last at
the recent rate. Only when both ranges are spent does next() wait for the
fetch in flight (at most the client's timeout) and then raise
UnavailableError.

Values are unique across all clients and increasing per Segment; across
Segments (other processes, other threads with their own Segment) they are
only trend-increasing: two Segments hand out values from two ranges at once.
Values still in memory at close() or a crash are skipped, never reissued: a
Segment trades gaps for availability.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import CanceledError, InvalidArgumentError, SeqdError, UnavailableError

if TYPE_CHECKING:
    from .client import Client

MAX_SIZE = 1000000  # the most one reserve takes


@dataclass(frozen=True)
class SegmentStats:
    """What a Segment holds and how long it should last."""

    remaining: int  # values left in memory (both ranges)
    current_left: int  # left in the range being used
    next_left: int  # in the prefetched range (0: none)
    size: int  # the size of the next fetch
    rate: float  # values/s recently handed out
    expected_seconds: float  # remaining / rate (inf at rate 0)
    fetching: bool  # a fetch is in flight
    fetches: int  # ranges fetched so far
    last_error: SeqdError | None  # of the last failed fetch, cleared by a success


class Segment:
    """See the module documentation."""

    def __init__(
        self,
        client: "Client",
        space: str | None,
        key: int,
        *,
        min_size: int = 1000,
        max_size: int = MAX_SIZE,
        initial_size: int | None = None,
        prefetch_at: float = 0.1,
        target: float = 900.0,
        retry_after: float = 1.0,
        clock=time.monotonic,
    ):
        if not 1 <= min_size <= max_size <= MAX_SIZE:
            raise InvalidArgumentError(f"want 1 <= min_size <= max_size <= {MAX_SIZE}, got {min_size}, {max_size}")
        if not 0 < prefetch_at <= 1:
            raise InvalidArgumentError(f"prefetch_at is a share of a range, in (0, 1], got {prefetch_at}")
        if target <= 0:
            raise InvalidArgumentError(f"target must be positive, got {target}")
        self._client, self._space, self._key = client, space, key
        self.min_size, self.max_size = min_size, max_size
        self.prefetch_at, self.target, self.retry_after = prefetch_at, target, retry_after
        self._clock = clock
        self._size = min(max(initial_size or min_size, min_size), max_size)
        self._cond = threading.Condition()
        self._lo = self._hi = 0  # current range: values lo..hi-1
        self._cur_len = 0
        self._next: range | None = None
        self._fetching = False
        self._fetches = 0
        self._last_fetch: float | None = None  # when the last fetch started
        self._failed_at: float | None = None
        self._last_error: SeqdError | None = None
        self._closed = False
        self._issued = 0
        self._rate_mark = (clock(), 0)  # (time, issued) at the start of the window
        self._rate = 0.0

    def next(self) -> int:
        """Returns the next value."""
        return self.next_n(1)[0]

    def next_n(self, n: int) -> list[int]:
        """Returns n values, increasing."""
        if not isinstance(n, int) or n < 1:
            raise InvalidArgumentError(f"n must be a positive int, got {n!r}")
        out: list[int] = []
        with self._cond:
            while len(out) < n:
                if self._closed:
                    raise CanceledError("segment closed")
                if self._lo < self._hi:
                    take = min(n - len(out), self._hi - self._lo)
                    out.extend(range(self._lo, self._lo + take))
                    self._lo += take
                    self._issued += take
                    self._maybe_prefetch()
                    continue
                if self._next is not None:
                    self._lo, self._hi = self._next.start, self._next.stop
                    self._cur_len = len(self._next)
                    self._next = None
                    self._maybe_prefetch()
                    continue
                # Both ranges spent: fetch (or wait for the fetch in flight).
                if not self._fetching:
                    self._start_fetch()
                deadline = self._clock() + self._client.timeout + 1
                while self._fetching and not self._closed and self._clock() < deadline:
                    self._cond.wait(0.05)
                if self._lo >= self._hi and self._next is None:
                    err = self._last_error or UnavailableError("no range could be fetched in time")
                    raise UnavailableError(f"segment of key {self._key} spent and no new range: {err}", err.metadata)
        return out

    def stats(self) -> SegmentStats:
        with self._cond:
            now = self._clock()
            t0, n0 = self._rate_mark
            if now - t0 >= 1.0:
                self._rate = (self._issued - n0) / (now - t0)
                self._rate_mark = (now, self._issued)
            cur = max(0, self._hi - self._lo)
            nxt = len(self._next) if self._next is not None else 0
            rate = self._rate
            rem = cur + nxt
            return SegmentStats(
                remaining=rem,
                current_left=cur,
                next_left=nxt,
                size=self._size,
                rate=rate,
                expected_seconds=rem / rate if rate > 0 else float("inf"),
                fetching=self._fetching,
                fetches=self._fetches,
                last_error=self._last_error,
            )

    def close(self) -> None:
        """Stops the Segment; values it still holds are skipped."""
        with self._cond:
            self._closed = True
            self._lo = self._hi = 0
            self._next = None
            self._cond.notify_all()

    def __enter__(self) -> "Segment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- fetching (called with the lock held) -----------------------------

    def _maybe_prefetch(self) -> None:
        if self._next is not None or self._fetching or self._cur_len == 0:
            return
        used = self._cur_len - (self._hi - self._lo)
        if used < self.prefetch_at * self._cur_len:
            return
        if self._failed_at is not None and self._clock() - self._failed_at < self.retry_after:
            return  # the last fetch failed just now: not on every call
        self._start_fetch()

    def _start_fetch(self) -> None:
        now = self._clock()
        if self._last_fetch is not None:
            lasted = now - self._last_fetch
            if lasted < self.target:
                self._size = min(self._size * 2, self.max_size)
            elif lasted > 2 * self.target:
                self._size = max(self._size // 2, self.min_size)
        self._fetching = True
        size = self._size
        threading.Thread(target=self._fetch, args=(size, now), name="seqd-segment-fetch", daemon=True).start()

    def _fetch(self, size: int, started: float) -> None:
        try:
            r = self._client.reserve(self._key, size, space=self._space)
            err = None
        except SeqdError as e:
            r, err = None, e
        except Exception as e:  # a bug or a broken connection: reported, not lost
            r, err = None, UnavailableError(f"{e.__class__.__name__}: {e}")
        with self._cond:
            self._fetching = False
            if r is not None:
                self._fetches += 1
                self._last_fetch = started
                self._last_error = None
                self._failed_at = None
                if not self._closed:
                    if self._lo >= self._hi and self._next is None:
                        self._lo, self._hi, self._cur_len = r.start, r.stop, len(r)
                    else:
                        self._next = r
            else:
                self._last_error = err
                self._failed_at = self._clock()
            self._cond.notify_all()
