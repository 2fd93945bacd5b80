"""A real 3-node seqd cluster for the tests: seqd processes on 127.0.0.1.

The binary is $SEQD_BIN, or built once from this checkout with `go build`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_built: str | None = None


def seqd_binary() -> str:
    global _built
    if os.environ.get("SEQD_BIN"):
        return os.environ["SEQD_BIN"]
    if _built is None:
        out = os.path.join(tempfile.mkdtemp(prefix="seqd-py-bin"), "seqd")
        subprocess.run(["go", "build", "-o", out, "./cmd/seqd"], cwd=_ROOT, check=True)
        _built = out
    return _built


_handed_out: set[int] = set()


def free_port() -> int:
    """A port free for TCP and UDP on 127.0.0.1 (gossip needs both)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.bind(("127.0.0.1", port))
        except OSError:
            continue
        if port not in _handed_out:
            _handed_out.add(port)
            return port


class Node:
    def __init__(self, cluster: "Cluster", i: int):
        self.id = f"n{i + 1}"
        self.api = f"127.0.0.1:{free_port()}"
        self.raft = f"127.0.0.1:{free_port()}"
        self.gossip = f"127.0.0.1:{free_port()}"
        self.dir = os.path.join(cluster.dir, self.id)
        self.log = os.path.join(cluster.dir, self.id + ".log")
        self.cluster = cluster
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        args = [
            seqd_binary(), "serve", "--id", self.id, "--data-dir", self.dir,
            "--api-addr", self.api, "--raft-addr", self.raft, "--gossip-addr", self.gossip,
            "--join", ",".join(n.gossip for n in self.cluster.nodes),
            "--bootstrap-expect", str(len(self.cluster.nodes)),
        ] + self.cluster.extra
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log)

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def signal(self, sig: int) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)


class Cluster:
    """n seqd processes that bootstrap one cluster (n raft groups)."""

    def __init__(self, n: int = 3, extra: list[str] | None = None):
        self.dir = tempfile.mkdtemp(prefix="seqd-py-")
        self.extra = extra or []
        self.nodes: list[Node] = []
        self.nodes = [Node(self, i) for i in range(n)]
        for node in self.nodes:
            node.start()

    @property
    def addrs(self) -> list[str]:
        return [n.api for n in self.nodes]

    def status(self, node: Node) -> dict:
        req = urllib.request.Request(
            f"http://{node.api}/seq.v1.AdminService/ClusterStatus", data=b"{}",
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=2) as r:
            return json.loads(r.read())

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Waits until every group has a serving leader and ClusterStatus
        answers on every node."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ok = True
                for node in self.nodes:
                    st = self.status(node)
                    groups = st.get("groups", [])
                    if not groups or any(not g.get("serving") for g in groups):
                        ok = False
                if ok:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError("cluster not ready; logs in " + self.dir)

    def leader_of_group0(self) -> Node:
        for node in self.nodes:
            try:
                lid = self.status(node).get("leaderId")
            except OSError:
                continue
            for n in self.nodes:
                if n.id == lid:
                    return n
        raise RuntimeError("no leader known")

    def close(self) -> None:
        for n in self.nodes:
            n.signal(signal.SIGCONT)
            n.kill9()
        if os.environ.get("SEQD_KEEP_LOGS"):
            print("logs in", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
