"""Calls/s of the Python client against a running cluster.

    python3 client/python/bench.py --addr 127.0.0.1:7710,127.0.0.1:7720,127.0.0.1:7730

For each thread count: next() of one random key per call from that many
threads sharing one Client, then Segment.next() from that many threads
sharing one Segment; each for --seconds, after a second of warm-up. Prints one
line per measurement and the CPU the Python process used per call.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from seqd import Client  # noqa: E402


def measure(fn, threads: int, seconds: float) -> tuple[float, float]:
    stop = threading.Event()
    counting = threading.Event()
    counts = [0] * threads

    def work(i):
        n = 0
        while not stop.is_set():
            fn()
            if counting.is_set():
                n += 1
        counts[i] = n

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    time.sleep(1.0)
    cpu0, t0 = time.process_time(), time.monotonic()
    counting.set()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    calls = sum(counts)
    return calls / elapsed, cpu / max(calls, 1) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="127.0.0.1:7710,127.0.0.1:7720,127.0.0.1:7730")
    ap.add_argument("--threads", default="1,16")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--keys", type=int, default=1000000)
    a = ap.parse_args()
    c = Client(a.addr)
    seg = c.segment(None, 424242, min_size=1000)
    for n in [int(x) for x in a.threads.split(",")]:
        rate, us = measure(lambda: c.next(random.randrange(a.keys)), n, a.seconds)
        print(f"python next         threads {n:3d}  calls/s {rate:10.0f}  client CPU us/call {us:7.1f}", flush=True)
        rate, us = measure(seg.next, n, a.seconds)
        print(f"python segment.next threads {n:3d}  calls/s {rate:10.0f}  client CPU us/call {us:7.1f}", flush=True)
    seg.close()
    c.close()


if __name__ == "__main__":
    main()
