"""A client for seqd, the Raft-replicated sequence and id service.

    from seqd import Client

    c = Client(["127.0.0.1:7710", "127.0.0.1:7720", "127.0.0.1:7730"])
    c.next(42)            # the next value of key 42 of space "default"
    c.next([1, 2, 2])     # one value per key, in order
    c.reserve(42, 100)    # range of 100 consecutive values
    c.current(42)         # at least every value already returned
    c.next_ids()          # a flake id of namespace "default"

Standard library only (http.client and json over seqd's Connect JSON API).
See docs/python.md.
"""

from .client import MAX_IDS, MAX_KEYS, MAX_RESERVE, Client, Decoded, Space
from .errors import (
    AbortedError,
    AlreadyExistsError,
    CanceledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    SeqdError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)
from .segment import Segment, SegmentStats

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Decoded",
    "Space",
    "Segment",
    "SegmentStats",
    "MAX_IDS",
    "MAX_KEYS",
    "MAX_RESERVE",
    "SeqdError",
    "AbortedError",
    "AlreadyExistsError",
    "CanceledError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
]
