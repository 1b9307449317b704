"""The typed errors of pullspec: every failure the spec defines, each with a closed `ErrorKind`.

An implementation signals a RocketMQ exception (or a rejected input) by raising one of these.
The conformance suite compares only the `kind`, never the message text. An error that stands for
a Java exception takes its kind from that exception, the same everywhere (`JAVA_EXCEPTION_KINDS`):
e.g. every IllegalArgumentException — an allocation's bad arguments, 4.9's "Illegal Capacity"
of a negative maxMsgNums — is INVALID_ARGUMENT.
"""

from __future__ import annotations

import enum
from typing import Any, Protocol

import attrs


class ErrorKind(enum.Enum):
    """The closed set of error kinds an observation may carry."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    INVALID_TYPE = "INVALID_TYPE"
    ILLEGAL_TOPIC = "ILLEGAL_TOPIC"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    NO_SUCH_ELEMENT = "NO_SUCH_ELEMENT"
    NULL_POINTER = "NULL_POINTER"
    REJECTED_EXECUTION = "REJECTED_EXECUTION"
    CORRUPT_STORE = "CORRUPT_STORE"
    READ_ONLY = "READ_ONLY"
    UNSUPPORTED = "UNSUPPORTED"


#: The kind of each Java exception a spec error can stand for: one kind per exception.
JAVA_EXCEPTION_KINDS: dict[str, ErrorKind] = {
    "IllegalArgumentException": ErrorKind.INVALID_ARGUMENT,
    "NumberFormatException": ErrorKind.INVALID_ARGUMENT,
    "IndexOutOfBoundsException": ErrorKind.INVALID_ARGUMENT,
    "NoSuchElementException": ErrorKind.NO_SUCH_ELEMENT,
    "NullPointerException": ErrorKind.NULL_POINTER,
    "RejectedExecutionException": ErrorKind.REJECTED_EXECUTION,
}


class PullspecError(Exception):
    """Base class of every error the spec defines."""

    kind: ErrorKind = ErrorKind.INVALID_ARGUMENT
    #: The simple name of the Java exception RocketMQ throws in the same place, if any.
    java_exception: str | None = None


class InvalidArgumentError(PullspecError, ValueError):
    """An argument has the right type but a value RocketMQ (or the spec) does not accept."""

    kind = ErrorKind.INVALID_ARGUMENT

    def __init__(self, name: str, value: Any, reason: str) -> None:
        self.name = name
        self.value = value
        self.reason = reason
        super().__init__(f"{name}={value!r}: {reason}")


class InvalidTypeError(PullspecError, TypeError):
    """An argument has the wrong type (a str body, a float offset, ...)."""

    kind = ErrorKind.INVALID_TYPE

    def __init__(self, name: str, value: Any, expected: str) -> None:
        self.name = name
        self.value = value
        self.expected = expected
        super().__init__(f"{name}={value!r}: expected {expected}, got {type(value).__name__}")


class IllegalTopicError(InvalidArgumentError):
    """A topic name that RocketMQ's TopicValidator refuses (blank, bad characters, too long)."""

    kind = ErrorKind.ILLEGAL_TOPIC


class MessageIllegalError(InvalidArgumentError):
    """A message the store refuses at put time (LAYOUT-11): it answers MESSAGE_ILLEGAL or
    PROPERTIES_SIZE_EXCEEDED; the attribute `status` holds the RocketMQ put status name."""

    kind = ErrorKind.MESSAGE_ILLEGAL

    def __init__(self, name: str, value: Any, reason: str, status: str) -> None:
        self.status = status
        super().__init__(name, value, reason)


class NoSuchElementError(PullspecError, LookupError):
    """Java's NoSuchElementException: e.g. ProcessQueue.commit with nothing being consumed."""

    kind = ErrorKind.NO_SUCH_ELEMENT
    java_exception = "NoSuchElementException"

    def __init__(self, what: str) -> None:
        super().__init__(what)


class NumberFormatError(InvalidArgumentError):
    """Java's NumberFormatException from Long.parseLong on a message property."""

    java_exception = "NumberFormatException"


class IllegalCapacityError(PullspecError, ValueError):
    """4.9's getMessage with a negative maxMsgNums once a window exists: Java's ArrayList throws
    IllegalArgumentException("Illegal Capacity"), an INVALID_ARGUMENT like any other."""

    kind = ErrorKind.INVALID_ARGUMENT
    java_exception = "IllegalArgumentException"

    def __init__(self, max_msg_nums: int) -> None:
        self.max_msg_nums = max_msg_nums
        super().__init__(f"max_msg_nums={max_msg_nums!r}: Illegal Capacity (profile 4.9)")


class NullPointerError(PullspecError):
    """Java's NullPointerException where RocketMQ unboxes an absent value (e.g. 4.7 send-back
    without maxReconsumeTimes)."""

    kind = ErrorKind.NULL_POINTER
    java_exception = "NullPointerException"

    def __init__(self, what: str) -> None:
        super().__init__(what)


class CorruptStoreError(PullspecError):
    """A store directory whose files cannot be read as RocketMQ's format."""

    kind = ErrorKind.CORRUPT_STORE

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class ReadOnlyStoreError(PullspecError):
    """A write to a store that was opened read-only."""

    kind = ErrorKind.READ_ONLY

    def __init__(self, what: str) -> None:
        super().__init__(what)


class UnsupportedError(PullspecError):
    """An operation or area an implementation does not support."""

    kind = ErrorKind.UNSUPPORTED

    def __init__(self, what: str) -> None:
        super().__init__(what)


class IndexOutOfBoundsError(InvalidArgumentError):
    """Java's IndexOutOfBoundsException: a listener's ackIndex below −1 (CONC-6)."""

    java_exception = "IndexOutOfBoundsException"


class RejectedExecutionError(PullspecError):
    """Java's RejectedExecutionException: a consume service that was shut down refuses a
    ConsumeRequest (CONC-2/3, ORDER-3) and the caller (the pull callback) sees it."""

    kind = ErrorKind.REJECTED_EXECUTION
    java_exception = "RejectedExecutionException"

    def __init__(self, what: str) -> None:
        super().__init__(what)


def require_int(name: str, value: object) -> int:
    """Return `value` if it is an int (not a bool), else raise InvalidTypeError naming it."""
    if type(value) is int:  # the usual case in one test (every validated field calls this)
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(name, value, "int")
    return value


def require_str(name: str, value: object) -> str:
    """Return `value` if it is a str, else raise InvalidTypeError naming it."""
    if type(value) is str:
        return value
    if not isinstance(value, str):
        raise InvalidTypeError(name, value, "str")
    return value


def require_bool(name: str, value: object) -> bool:
    """Return `value` if it is a bool, else raise InvalidTypeError naming `name`."""
    if not isinstance(value, bool):
        raise InvalidTypeError(name, value, "bool")
    return value


def require_bytes(name: str, value: object) -> bytes:
    """Return `value` as bytes if it is bytes-like, else raise InvalidTypeError naming it."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise InvalidTypeError(name, value, "bytes")


def require_non_negative(name: str, value: object) -> int:
    """Return `value` if it is an int ≥ 0, else raise the matching typed error."""
    v = require_int(name, value)
    if v < 0:
        raise InvalidArgumentError(name, v, "must be >= 0")
    return v


def require_range(name: str, value: object, low: int, high: int) -> int:
    """Return `value` if it is an int in [low, high], else raise the matching typed error."""
    v = require_int(name, value)
    if not low <= v <= high:
        raise InvalidArgumentError(name, v, f"must be in [{low}, {high}]")
    return v


#: Integer.MAX_VALUE: the initial ackIndex (CONC-4) and the orderly unbounded retry (ORDER-14).
JAVA_INT_MAX = 2**31 - 1


def set_int(_instance: object, attribute: attrs.Attribute[int], value: int) -> int:
    """An attrs `on_setattr` hook: the new value of an int attribute, checked by `require_int`."""
    return require_int(attribute.name, value)


def set_bool(_instance: object, attribute: attrs.Attribute[bool], value: bool) -> bool:
    """An attrs `on_setattr` hook: the new value of a bool attribute, checked by `require_bool`."""
    return require_bool(attribute.name, value)


def check_int(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    """An attrs validator: `require_int` on an int attribute."""
    require_int(attribute.name, value)


def check_bool(_instance: object, attribute: attrs.Attribute[bool], value: bool) -> None:
    """An attrs validator: `require_bool` on a bool attribute."""
    require_bool(attribute.name, value)


def conforms(value: object, kind: type) -> bool:
    """isinstance(value, kind), remembered per type of `value` once it held.

    Python 3.11 lists a runtime-checkable Protocol's members afresh on every isinstance against
    it (63 µs for the 26 of ProcessQueue, timeit), and the reference's client side checks its
    collaborators on every pull. A type that conformed once conforms
    again; only the protocol's data members its class does not define (attributes an instance
    sets itself) are looked up on each value. Example: ``conforms(3, int)`` is True and
    ``conforms(True, str)`` False."""
    key = (type(value), kind)
    own = _CONFORMING.get(key)
    if own is not None:
        return not own or all(hasattr(value, name) for name in own)
    if not isinstance(value, kind):
        return False
    if len(_CONFORMING) < _CONFORMING_KEPT:  # types made on the fly must not grow it forever
        _CONFORMING[key] = _instance_members(type(value), kind)
    return True


def _instance_members(cls: type, kind: type) -> tuple[str, ...]:
    """The members the protocols among `kind`'s bases declare that `cls` itself lacks (none for
    a class that is not a protocol): those an instance of `cls` must carry on its own."""
    names: set[str] = set()  # typing's own bookkeeping starts with "_", as no member of ours
    for base in kind.__mro__:
        if Protocol in base.__bases__:  # a protocol names Protocol among its bases
            names.update(vars(base), getattr(base, "__annotations__", {}))
    return tuple(sorted(n for n in names if not n.startswith("_") and not hasattr(cls, n)))


#: (type, class) -> the members an instance must still have itself (see `conforms`).
_CONFORMING: dict[tuple[type, type], tuple[str, ...]] = {}
_CONFORMING_KEPT = 4096
