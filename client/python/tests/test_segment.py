"""Segments (Leaf's segment mode) against a real seqd cluster."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import seqd  # noqa: E402
from seqd import Client  # noqa: E402

from .cluster import Cluster  # noqa: E402


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return False


class SegmentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(3)
        cls.cluster.wait_ready()
        cls.c = Client(cls.cluster.addrs)
        cls.c.create_space("seg", step=1000)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.cluster.close()

    def test_prefetch_and_sizes(self):
        """The next range is fetched once prefetch_at of the current one is
        used; sizes double while a range lasts less than the target, up to
        max_size, and halve when one lasts more than twice the target."""
        s = self.c.segment("seg", 1, min_size=10, max_size=80, prefetch_at=0.5, target=30.0)
        self.addCleanup(s.close)
        first = s.next_n(4)  # the first range (10 values) fetched on demand
        self.assertEqual(first, list(range(first[0], first[0] + 4)))
        st = s.stats()
        self.assertEqual((st.current_left, st.next_left), (6, 0))
        s.next()  # 5 of 10 used: the prefetch starts
        self.assertTrue(wait_for(lambda: s.stats().next_left > 0))
        st = s.stats()
        self.assertEqual(st.size, 20)  # the first range lasted < target: doubled
        self.assertEqual(st.next_left, 20)
        seen = first + [first[-1] + 1]
        for _ in range(200):
            v = s.next()
            self.assertGreater(v, seen[-1])
            seen.append(v)
        self.assertTrue(wait_for(lambda: not s.stats().fetching))
        self.assertEqual(s.stats().size, 80)  # 10, 20, 40, 80, capped
        # Slow consumption: a range that lasts more than twice the target
        # halves the next size.
        slow = self.c.segment("seg", 2, min_size=10, max_size=80, initial_size=40, prefetch_at=0.5, target=0.1)
        self.addCleanup(slow.close)
        slow.next()
        time.sleep(0.3)  # > 2 * target since the first fetch
        slow.next_n(20)  # half used: prefetch, sized down
        self.assertTrue(wait_for(lambda: slow.stats().next_left > 0))
        self.assertEqual(slow.stats().size, 20)

    def test_threads_on_one_segment(self):
        s = self.c.segment("seg", 3, min_size=50, max_size=1000)
        self.addCleanup(s.close)
        got, errors = [], []
        lock = threading.Lock()

        def work():
            last = 0
            for _ in range(300):
                v = s.next()
                if v <= last:
                    errors.append(f"{v} after {last}")
                last = v
                with lock:
                    got.append(v)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(got), len(set(got)))
        self.assertEqual(len(got), 2400)

    def test_many_segments_one_key_unique(self):
        """Segments of one key (other clients, other processes) never hand
        out one value twice; each one's values increase."""
        clients = [Client(self.cluster.addrs[i % 3:]) for i in range(5)]
        for cl in clients:
            self.addCleanup(cl.close)
        segs = [cl.segment("seg", 4, min_size=7, max_size=64) for cl in clients]
        out: list[list[int]] = [[] for _ in segs]

        def work(i):
            for _ in range(150):
                out[i].append(segs[i].next())

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(segs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        every = [v for vals in out for v in vals]
        self.assertEqual(len(every), len(set(every)))
        for vals in out:
            self.assertEqual(vals, sorted(vals))
        for s in segs:
            s.close()
        # Closed: what a closed Segment held is skipped, never reissued.
        with self.assertRaises(seqd.CanceledError):
            segs[0].next()
        later = self.c.next(4, space="seg")
        self.assertGreater(later, max(every))


class SegmentOutageTest(unittest.TestCase):
    """Every server stopped (SIGSTOP) for longer than the Segment's ranges
    last: it keeps issuing from memory, then fails with UnavailableError
    once both ranges are spent, and issues again after SIGCONT."""

    def test_outage(self):
        cluster = Cluster(3)
        self.addCleanup(cluster.close)
        cluster.wait_ready()
        c = Client(cluster.addrs, timeout=2, attempt_timeout=0.5)
        self.addCleanup(c.close)
        s = c.segment(None, 99, min_size=500, max_size=500, prefetch_at=0.1)
        self.addCleanup(s.close)
        s.next_n(50)  # 10 % of the first range: the second is fetched
        self.assertTrue(wait_for(lambda: s.stats().next_left == 500))
        held = s.stats().remaining  # 450 + 500
        self.assertEqual(held, 950)
        for n in cluster.nodes:
            n.signal(signal.SIGSTOP)
        try:
            vals = []
            t0 = time.monotonic()
            with self.assertRaises(seqd.UnavailableError):
                while True:
                    vals.append(s.next())
                    time.sleep(0.002)  # about 500 values/s: ~2 s of issuing
            # Everything held was issued, increasing, and then it failed.
            self.assertEqual(len(vals), held)
            self.assertEqual(vals, sorted(set(vals)))
            self.assertGreater(time.monotonic() - t0, 1.0)
            self.assertIsNotNone(s.stats().last_error)
        finally:
            for n in cluster.nodes:
                n.signal(signal.SIGCONT)
        deadline = time.monotonic() + 60
        while True:
            try:
                v = s.next()
                break
            except seqd.UnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.assertGreater(v, vals[-1])


if __name__ == "__main__":
    unittest.main()
