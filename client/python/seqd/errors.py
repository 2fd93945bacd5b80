"""Typed exceptions, one per Connect code.

Every error a seqd server sends carries a Connect code ("unavailable",
"not_found", ...); the client raises the subclass of SeqdError for that code,
with the server's one-line message and its metadata (for example the
Seqd-Leader hint of an unavailable error).
"""

from __future__ import annotations


class SeqdError(Exception):
    """An error of a seqd call: code is the Connect code ("unavailable")."""

    code = "unknown"

    def __init__(self, message: str, metadata: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.metadata = dict(metadata or {})

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class CanceledError(SeqdError):
    code = "canceled"


class UnknownError(SeqdError):
    code = "unknown"


class InvalidArgumentError(SeqdError):
    code = "invalid_argument"


class DeadlineExceededError(SeqdError):
    code = "deadline_exceeded"


class NotFoundError(SeqdError):
    code = "not_found"


class AlreadyExistsError(SeqdError):
    code = "already_exists"


class PermissionDeniedError(SeqdError):
    code = "permission_denied"


class ResourceExhaustedError(SeqdError):
    code = "resource_exhausted"


class FailedPreconditionError(SeqdError):
    code = "failed_precondition"


class AbortedError(SeqdError):
    code = "aborted"


class OutOfRangeError(SeqdError):
    code = "out_of_range"


class UnimplementedError(SeqdError):
    code = "unimplemented"


class InternalError(SeqdError):
    code = "internal"


class UnavailableError(SeqdError):
    """No server could answer within the call's deadline: no leader, a new
    leader still waiting out its predecessor's lease, servers down. Retrying
    is safe; a retried next or reserve may leave a gap, never a repeat."""

    code = "unavailable"


class DataLossError(SeqdError):
    code = "data_loss"


class UnauthenticatedError(SeqdError):
    code = "unauthenticated"


_BY_CODE = {
    cls.code: cls
    for cls in (
        CanceledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}

# The Connect protocol's code for an HTTP status without a Connect error body
# (a proxy's answer, say).
_BY_STATUS = {
    400: InvalidArgumentError,
    401: UnauthenticatedError,
    403: PermissionDeniedError,
    404: UnimplementedError,
    408: DeadlineExceededError,
    429: UnavailableError,
    502: UnavailableError,
    503: UnavailableError,
    504: UnavailableError,
}


def error_for(code: str, message: str, metadata: dict[str, str] | None = None) -> SeqdError:
    """Returns the exception for a Connect code."""
    return _BY_CODE.get(code, UnknownError)(message, metadata)


def error_for_status(status: int, message: str, metadata: dict[str, str] | None = None) -> SeqdError:
    """Returns the exception for an HTTP status without a Connect error."""
    return _BY_STATUS.get(status, UnknownError)(message, metadata)
