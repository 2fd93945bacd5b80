"""The seqd client: Connect JSON over HTTP/1.1 with http.client and json."""

from __future__ import annotations

import http.client
import json
import random
import ssl
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence, overload

from .errors import (
    InvalidArgumentError,
    SeqdError,
    UnavailableError,
    error_for,
    error_for_status,
)

if TYPE_CHECKING:
    from .segment import Segment

# The header naming the leader's API address, on an unavailable error (the
# leader to go to) and on an answer a follower forwarded (where to go next
# time).
_LEADER_HEADER = "Seqd-Leader"

MAX_KEYS = 10000
MAX_RESERVE = 1000000
MAX_IDS = 10000


@dataclass(frozen=True)
class Space:
    name: str
    step: int
    section_size: int


@dataclass(frozen=True)
class Decoded:
    """A flake id split into its fields (Client.decode)."""

    unix_ms: int
    worker: int
    sequence: int
    holder_label: str


class _Addr:
    """One server address: scheme, host and port."""

    __slots__ = ("tls", "host", "port", "key")

    def __init__(self, addr: str, default_tls: bool):
        tls = default_tls
        if addr.startswith("https://"):
            tls, addr = True, addr[len("https://") :]
        elif addr.startswith("http://"):
            tls, addr = False, addr[len("http://") :]
        addr = addr.rstrip("/")
        host, sep, port = addr.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"address {addr!r} is not host:port")
        self.tls, self.host, self.port = tls, host.strip("[]"), int(port)
        self.key = ("https://" if tls else "http://") + addr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Addr) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return self.key


class Client:
    """A seqd client. Thread-safe: share one among threads.

    addrs: the API addresses of some servers ("host:port", or with http:// or
    https://), a list or a comma-separated string. Any server answers any
    call (it forwards each key's share to its raft group's leader); the
    client follows the leader hints servers send, so that later calls go
    straight to the leader that answered.

    token: the bearer token of a cluster started with --token (admin calls)
    and --token-sequence (every call).

    timeout: the deadline of one call, retries included (seconds).
    attempt_timeout: the deadline of one attempt on one server; an attempt
    that times out (a server paused or cut off) is retried on another.
    min_backoff, max_backoff: the wait between retries grows from min to max
    (with jitter), except right after a leader hint.

    Retries: a call that fails with unavailable (no leader, a new leader
    still waiting out its predecessor's lease, a server down or not
    answering) is retried on other servers until its deadline. A next or
    reserve that is retried may have taken values in the failed attempt:
    those values are never returned to anyone, so a retried next leaves a
    gap in the key's sequence, never a repeat (the values it returns are
    still larger than every value returned before it began).
    With retry_takes=False, next and reserve are never retried after an
    attempt that may have reached a server: the error is raised instead.
    Client.retried counts the retried attempts of next and reserve.
    """

    def __init__(
        self,
        addrs: str | Sequence[str],
        token: str | None = None,
        timeout: float = 10.0,
        *,
        attempt_timeout: float = 2.0,
        min_backoff: float = 0.01,
        max_backoff: float = 0.5,
        retry_takes: bool = True,
        ssl_context: ssl.SSLContext | None = None,
        max_idle_per_server: int = 16,
    ):
        if isinstance(addrs, str):
            addrs = [a.strip() for a in addrs.split(",") if a.strip()]
        if not addrs:
            raise ValueError("no server address")
        if timeout <= 0 or attempt_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self._tls_default = ssl_context is not None
        self._addrs = [_Addr(a, self._tls_default) for a in addrs]
        self._token = token
        self.timeout = timeout
        self.attempt_timeout = attempt_timeout
        self.min_backoff, self.max_backoff = min_backoff, max_backoff
        self.retry_takes = retry_takes
        self._ssl = ssl_context
        self._max_idle = max_idle_per_server
        self._lock = threading.Lock()
        self._idle: dict[_Addr, list[http.client.HTTPConnection]] = {}
        self._preferred = self._addrs[0]
        self._next = 0
        self.retried = 0  # retried attempts of next and reserve
        self._closed = False

    # ---- the calls ---------------------------------------------------------

    @overload
    def next(self, keys: int, space: str | None = None) -> int: ...
    @overload
    def next(self, keys: Iterable[int], space: str | None = None) -> list[int]: ...

    def next(self, keys, space=None):
        """Takes the next value of each key (one int, or a list of them: a
        key listed twice gets two increasing values). Returns an int for an
        int, else a list in the keys' order."""
        one, ks = _keys(keys)
        out = self._call("seq.v1.SequenceService/Next", {"space": space or "", "keys": [str(k) for k in ks]}, takes=True)
        vals = [int(v) for v in out.get("values", [])]
        _check_len(vals, ks)
        return vals[0] if one else vals

    def reserve(self, key: int, count: int, space: str | None = None) -> range:
        """Takes count consecutive values of key (1 to 1,000,000) and returns
        them as a range."""
        _check_key(key)
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_RESERVE:
            raise InvalidArgumentError(f"count must be 1 to {MAX_RESERVE}, got {count!r}")
        out = self._call("seq.v1.SequenceService/Reserve", {"space": space or "", "key": str(key), "count": count}, takes=True)
        first = int(out.get("first", 0))
        return range(first, first + count)

    @overload
    def current(self, keys: int, space: str | None = None) -> int: ...
    @overload
    def current(self, keys: Iterable[int], space: str | None = None) -> list[int]: ...

    def current(self, keys, space=None):
        """Returns each key's current value: at least every value already
        returned for it (0 for a key never issued)."""
        one, ks = _keys(keys)
        out = self._call("seq.v1.SequenceService/Current", {"space": space or "", "keys": [str(k) for k in ks]}, takes=False)
        vals = [int(v) for v in out.get("values", [])]
        _check_len(vals, ks)
        return vals[0] if one else vals

    def next_ids(self, namespace: str | None = None, count: int = 1) -> list[int]:
        """Returns count flake ids of namespace (None: "default"), increasing
        unless the namespace is obfuscated."""
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_IDS:
            raise InvalidArgumentError(f"count must be 1 to {MAX_IDS}, got {count!r}")
        out = self._call("seq.v1.IdService/NextIds", {"namespace": namespace or "", "count": count}, takes=False)
        return [int(v) for v in out.get("ids", [])]

    def decode(self, namespace: str | None, id: int) -> Decoded:
        """Splits a flake id of namespace into its time, worker and sequence."""
        out = self._call("seq.v1.IdService/Decode", {"namespace": namespace or "", "id": str(id)}, takes=False)
        return Decoded(
            unix_ms=int(out.get("unixMs", 0)),
            worker=int(out.get("worker", 0)),
            sequence=int(out.get("sequence", 0)),
            holder_label=out.get("holderLabel", ""),
        )

    def create_space(self, name: str, step: int = 0, section_size: int = 0) -> tuple[Space, bool]:
        """Creates a space (step and section_size 0: the defaults). Returns the
        space and whether this call created it (False: it existed with the
        same settings)."""
        body = {"name": name, "step": str(step), "sectionSize": str(section_size)}
        out = self._call("seq.v1.AdminService/CreateSpace", body, takes=False)
        sp = out.get("space", {})
        return (
            Space(sp.get("name", name), int(sp.get("step", 0)), int(sp.get("sectionSize", 0))),
            bool(out.get("created", False)),
        )

    def segment(self, space: str | None, key: int, **opts) -> "Segment":
        """Returns a Segment: values of key reserved in ranges and handed out
        from memory (Leaf's segment mode; see seqd.segment)."""
        from .segment import Segment

        return Segment(self, space, key, **opts)

    def close(self) -> None:
        """Closes the idle connections."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for c in conns:
                c.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- calls, retries and routing ----------------------------------------

    def _call(self, method: str, body: dict, takes: bool) -> dict:
        deadline = time.monotonic() + self.timeout
        data = json.dumps(body).encode()
        backoff = self.min_backoff
        with self._lock:
            addr = self._preferred
        attempts = 0
        while True:
            attempts += 1
            remaining = deadline - time.monotonic()
            hinted = False
            try:
                status, headers, payload = self._post(addr, method, data, min(self.attempt_timeout, max(remaining, 0.001)))
            except (OSError, http.client.HTTPException) as e:
                # The server may have received the request: a take may have
                # taken values (a gap if retried).
                err: SeqdError = UnavailableError(f"{addr}: {e.__class__.__name__}: {e}")
                next_addr = self._other(addr)
            else:
                if status == 200:
                    leader = headers.get(_LEADER_HEADER)
                    if leader:
                        self._prefer(leader)
                    try:
                        return json.loads(payload) if payload else {}
                    except ValueError as e:
                        raise error_for("internal", f"malformed answer from {addr}: {e}") from None
                err = _error(status, headers, payload)
                if not isinstance(err, UnavailableError):
                    raise err
                hint = err.metadata.get(_LEADER_HEADER.lower())
                if hint:
                    try:
                        h = _Addr(hint, self._tls_default)
                    except ValueError:
                        h = None
                    if h is not None and h != addr:
                        next_addr, hinted = h, True
                    else:
                        next_addr = self._other(addr)
                else:
                    next_addr = self._other(addr)
            if takes and not self.retry_takes:
                raise err
            if time.monotonic() >= deadline:
                raise err
            if takes:
                with self._lock:
                    self.retried += 1
            if not hinted:
                pause = min(backoff, max(0.0, deadline - time.monotonic()))
                time.sleep(pause / 2 + random.random() * pause / 2)
                backoff = min(backoff * 2, self.max_backoff)
            addr = next_addr

    def _post(self, addr: _Addr, method: str, data: bytes, timeout: float):
        conn = self._take(addr, timeout)
        headers = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        ok = False
        try:
            conn.request("POST", "/" + method, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            ok = not resp.will_close
            return resp.status, _Headers(hdrs), payload
        finally:
            if ok:
                self._give(addr, conn)
            else:
                conn.close()

    def _take(self, addr: _Addr, timeout: float) -> http.client.HTTPConnection:
        with self._lock:
            if self._closed:
                raise error_for("canceled", "client closed")
            idle = self._idle.get(addr)
            conn = idle.pop() if idle else None
        if conn is None:
            if addr.tls:
                conn = http.client.HTTPSConnection(addr.host, addr.port, timeout=timeout, context=self._ssl)
            else:
                conn = http.client.HTTPConnection(addr.host, addr.port, timeout=timeout)
        else:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
        return conn

    def _give(self, addr: _Addr, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(addr, [])
            if not self._closed and len(idle) < self._max_idle:
                idle.append(conn)
                return
        conn.close()

    def _other(self, addr: _Addr) -> _Addr:
        """Another address than addr, round robin over the given ones."""
        with self._lock:
            for _ in range(len(self._addrs)):
                self._next = (self._next + 1) % len(self._addrs)
                a = self._addrs[self._next]
                if a != addr or len(self._addrs) == 1:
                    return a
            return self._addrs[0]

    def _prefer(self, hint: str) -> None:
        try:
            a = _Addr(hint, self._tls_default)
        except ValueError:
            return
        with self._lock:
            self._preferred = a


class _Headers(dict):
    """Lower-cased response headers; get() takes any case."""

    def get(self, key, default=None):  # type: ignore[override]
        return super().get(key.lower(), default)


def _error(status: int, headers: "_Headers", payload: bytes) -> SeqdError:
    meta = {k: v for k, v in headers.items() if k.startswith("seqd-")}
    try:
        body = json.loads(payload)
        code, message = body.get("code"), body.get("message", "")
    except (ValueError, AttributeError):
        code, message = None, payload.decode("utf-8", "replace").strip()
    if isinstance(code, str):
        return error_for(code, message, meta)
    return error_for_status(status, message or f"HTTP {status}", meta)


def _check_key(k) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < 1 << 64:
        raise InvalidArgumentError(f"a key is an int from 0 to 2^64-1, got {k!r}")


def _keys(keys) -> tuple[bool, list[int]]:
    if isinstance(keys, int) and not isinstance(keys, bool):
        _check_key(keys)
        return True, [keys]
    ks = list(keys)
    if not ks or len(ks) > MAX_KEYS:
        raise InvalidArgumentError(f"give 1 to {MAX_KEYS} keys, got {len(ks)}")
    for k in ks:
        _check_key(k)
    return False, ks


def _check_len(vals: list[int], keys: list[int]) -> None:
    if len(vals) != len(keys):
        raise error_for("internal", f"{len(vals)} values for {len(keys)} keys")

