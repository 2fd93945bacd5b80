"""The client against a real 3-node seqd cluster (3 raft groups)."""

from __future__ import annotations

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import seqd  # noqa: E402
from seqd import Client  # noqa: E402

from .cluster import Cluster  # noqa: E402


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster(3)
        cls.cluster.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def test_calls(self):
        with Client(self.cluster.addrs) as c:
            a = c.next(10)
            b = c.next(10)
            self.assertIsInstance(a, int)
            self.assertGreater(b, a)
            vals = c.next([11, 11, 12])
            self.assertEqual(len(vals), 3)
            self.assertGreater(vals[1], vals[0])
            r = c.reserve(10, 50)
            self.assertEqual(len(r), 50)
            self.assertGreater(r.start, b)
            self.assertEqual(c.next(10), r.stop)
            self.assertEqual(c.current(10), r.stop)
            self.assertEqual(c.current([10, 987654321]), [r.stop, 0])
            big = (1 << 64) - 1  # the largest key: values are Python ints
            self.assertGreaterEqual(c.next(big), 1)

    def client(self, *args, **kw) -> Client:
        c = Client(*args, **kw)
        self.addCleanup(c.close)
        return c

    def test_spaces_and_errors(self):
        c = self.client(self.cluster.addrs[1:])
        sp, created = c.create_space("py-orders", step=500)
        self.assertTrue(created)
        self.assertEqual((sp.name, sp.step, sp.section_size), ("py-orders", 500, 100000))
        self.assertFalse(c.create_space("py-orders", step=500)[1])
        with self.assertRaises(seqd.AlreadyExistsError):
            c.create_space("py-orders", step=7)
        self.assertEqual(c.next(1, space="py-orders"), 1)
        with self.assertRaises(seqd.NotFoundError) as cm:
            c.next(1, space="nosuch")
        self.assertIn('unknown space "nosuch"', str(cm.exception))
        self.assertEqual(cm.exception.code, "not_found")
        with self.assertRaises(seqd.InvalidArgumentError):
            c.next(1, space="Bad Name")
        with self.assertRaises(seqd.InvalidArgumentError):
            c.reserve(1, 0)
        with self.assertRaises(seqd.InvalidArgumentError):
            c.next([])
        with self.assertRaises(seqd.InvalidArgumentError):
            c.next(-1)
        with self.assertRaises(seqd.InvalidArgumentError):
            c.create_space("x", step=(1 << 40) + 1)
        self.assertIsInstance(seqd.UnavailableError("x"), seqd.SeqdError)

    def test_ids(self):
        c = self.client(self.cluster.addrs)
        ids = c.next_ids(count=5)
        self.assertEqual(len(ids), 5)
        self.assertEqual(ids, sorted(set(ids)))
        d = c.decode(None, ids[0])
        self.assertLess(abs(d.unix_ms - time.time() * 1000), 60000)
        with self.assertRaises(seqd.InvalidArgumentError):
            c.next_ids(count=0)

    def test_threads(self):
        """One client shared by 16 threads: no value twice, each thread's
        values for a key increasing."""
        c = self.client(self.cluster.addrs)
        seen, errors = [], []
        lock = threading.Lock()

        def work(n):
            last = 0
            try:
                for _ in range(40):
                    v = c.next(2024)
                    if v <= last:
                        errors.append(f"thread {n}: {v} after {last}")
                    last = v
                    with lock:
                        seen.append(v)
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(seen), len(set(seen)))
        self.assertEqual(len(seen), 16 * 40)

    def test_token(self):
        """A cluster with --token and --token-sequence: calls without the
        token raise UnauthenticatedError, with it they answer."""
        cluster = Cluster(1, extra=["--token", "s3cret", "--token-sequence"])
        self.addCleanup(cluster.close)
        good = self.client(cluster.addrs, token="s3cret", timeout=30)
        self.assertGreater(good.next(3), 0)  # retried until the node serves
        with self.assertRaises(seqd.UnauthenticatedError):
            self.client(cluster.addrs).next(3)
        with self.assertRaises(seqd.UnauthenticatedError):
            self.client(cluster.addrs, token="wrong").create_space("t")

    def test_unreachable(self):
        """Nothing listening: UnavailableError once the deadline passes."""
        from .cluster import free_port

        c = self.client([f"127.0.0.1:{free_port()}"], timeout=0.5, attempt_timeout=0.2)
        t0 = time.monotonic()
        with self.assertRaises(seqd.UnavailableError):
            c.next(1)
        self.assertLess(time.monotonic() - t0, 3)
        c = self.client([f"127.0.0.1:{free_port()}"], timeout=2, retry_takes=False)
        with self.assertRaises(seqd.UnavailableError):
            c.next(1)
        self.assertEqual(c.retried, 0)


class LeaderKillTest(unittest.TestCase):
    """Calls from threads while group 0's leader is killed and restarted:
    every call succeeds within its deadline (retried on the others, after
    the leader hints), no value repeats, and a key's values increase in the
    order calls completed."""

    def test_leader_kill(self):
        cluster = Cluster(3)
        self.addCleanup(cluster.close)
        cluster.wait_ready()
        c = Client(cluster.addrs, timeout=20)
        self.addCleanup(c.close)
        results, errors = [], []
        lock = threading.Lock()
        stop = threading.Event()

        def work(n):
            while not stop.is_set():
                key = n % 4
                try:
                    t0 = time.monotonic()
                    v = c.next(key)
                    t1 = time.monotonic()
                except Exception as e:  # reported below
                    errors.append(repr(e))
                    return
                with lock:
                    results.append((key, v, t0, t1))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        victim = cluster.leader_of_group0()
        before = len(results)
        victim.kill9()
        time.sleep(3)
        victim.start()
        time.sleep(3)
        stop.set()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertGreater(len(results), before + 50, "calls stopped after the kill")
        by_key: dict[int, list] = {}
        for key, v, t0, t1 in results:
            by_key.setdefault(key, []).append((v, t0, t1))
        for key, ops in by_key.items():
            vals = [v for v, _, _ in ops]
            self.assertEqual(len(vals), len(set(vals)), f"key {key}: a value twice")
            # Per-key order: a call that began after another completed got
            # a larger value.
            ops.sort(key=lambda o: o[2])
            done_max = 0
            by_start = sorted(ops, key=lambda o: o[1])
            i = 0
            for v, t0, _ in by_start:
                while i < len(ops) and ops[i][2] < t0:
                    done_max = max(done_max, ops[i][0])
                    i += 1
                self.assertGreater(v, done_max, f"key {key}: {v} after a completed {done_max}")


if __name__ == "__main__":
    unittest.main()
