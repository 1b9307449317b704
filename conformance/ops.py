"""Operations and observations: the language-neutral model the conformance suite speaks.

One `Op` is an operation name plus its arguments, in the vocabulary of the shared vectors
(../shared/vectors/README.md, the same camelCase names). One `Observation` is what an
implementation answered: its result fields, or a typed error kind from the closed
`spec.errors.ErrorKind` (never free text), plus the state fields the spec makes observable
after the call. Both convert to and from JSON exactly as a vector step writes them, so the same
objects travel through vector files, the subprocess protocol and the lockstep machines.

The rule maps say which rule IDs an op exercises and which a diverging field points at; they
feed the manifests, the coverage summary and every divergence report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from pullspec.spec.errors import ErrorKind, InvalidArgumentError, PullspecError, require_str

#: The vector areas, in the order the suite runs them.
AREAS: tuple[str, ...] = ("store", "pull_code", "process_queue", "lock_manager", "send_back")

#: Every area with a lockstep machine: AREAS plus the reference-generated areas that have one
#: (their vectors come from conformance.client_vectors, not from `pullspec vectors export`).
MACHINE_AREAS: tuple[str, ...] = (*AREAS, "offset_store")

#: Observation keys that report state after the call (the rest are the call's result).
STATE_FIELDS: Mapping[str, frozenset[str]] = {
    "store": frozenset(
        {"queues", "commitLogMinOffset", "commitLogMaxOffset", "brokerRole", "offsetCheckInSlave"}
    ),
    "pull_code": frozenset(
        {"queues", "commitLogMinOffset", "commitLogMaxOffset", "brokerRole", "offsetCheckInSlave"}
    ),
    "process_queue": frozenset({"state", "now"}),
    "lock_manager": frozenset({"table", "now"}),
    "send_back": frozenset({"queues", "commitLogMinOffset", "commitLogMaxOffset"}),
    "offset_store": frozenset({"kind", "table", "sent", "files", "persistSteps"}),
}

_STORE_PUT = ("STORE-18", "STORE-20", "LAYOUT-4", "LAYOUT-5", "LAYOUT-7", "LAYOUT-9", "FILTER-1")
_STORE_GET = (
    *("STORE-2", "STORE-3", "STORE-4", "STORE-5", "STORE-6", "STORE-7", "STORE-8", "STORE-9"),
    *("STORE-10", "STORE-11", "STORE-12", "STORE-13", "STORE-14", "STORE-15", "STORE-16"),
    *("STORE-17", "STORE-21", "BATCH-1", "BATCH-2", "BATCH-3", "BATCH-4"),
    *("FILTER-2", "FILTER-3", "FILTER-4", "FILTER-5", "FILTER-6"),
)
_STORE_OPS: dict[str, tuple[str, ...]] = {
    "put": _STORE_PUT,
    "get_message": _STORE_GET,
    "delete_expired": ("STORE-19", "STORE-20", "LAYOUT-4"),
    "set_role": ("STORE-6",),
}
_PULL = (
    *("CODE-2", "CODE-5", "CODE-6", "CODE-7", "CODE-8", "CODE-9", "CODE-10", "CODE-11"),
    *("CODE-14", "CODE-15", "FILTER-7", "FILTER-9"),
)

#: Rule IDs each op exercises, per area; `create` names the rules of a fresh instance.
OP_RULES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "store": {"create": ("STORE-3",), **_STORE_OPS},
    "pull_code": {"create": ("STORE-3",), **_STORE_OPS, "pull": (*_PULL, *_STORE_GET)},
    "process_queue": {
        "create": ("PQ-1",),
        "put_messages": ("PQ-2", "PQ-3", "PQ-4", "PQ-5", "PQ-6", "PQ-13"),
        "remove_messages": ("PQ-6", "PQ-7", "PQ-13", "PQ-17"),
        "take_messages": ("PQ-8", "PQ-17"),
        "make_messages_to_consume_again": ("PQ-6", "PQ-11"),
        "commit": ("PQ-9",),
        "rollback": ("PQ-10",),
        "set": ("PQ-14", "PQ-15", "PQ-16"),
        "advance_clock": ("PQ-15", "PQ-16"),
    },
    "lock_manager": {
        "create": ("LEASE-1",),
        "try_lock_batch": ("LEASE-2", "LEASE-3", "LEASE-4", "LEASE-5", "LEASE-6"),
        "unlock_batch": ("LEASE-7",),
        "is_locked": ("LEASE-3", "LEASE-4"),
        "advance_clock": ("LEASE-3",),
    },
    "send_back": {
        "create": (),
        "put": (*_STORE_PUT, "RETRY-7", "RETRY-8"),
        "send_back": (*(f"RETRY-{n}" for n in range(1, 9)), "LAYOUT-13", "STORE-22"),
    },
    "offset_store": {
        "create": ("OFFSET-1", "OFFSET-9"),
        "update_offset": ("OFFSET-2",),
        "update_by": ("OFFSET-2", "OFFSET-3"),
        "read_offset": ("OFFSET-4", "OFFSET-5", "OFFSET-10"),
        "persist": ("OFFSET-6", "OFFSET-12"),
        "persist_all": ("OFFSET-6", "OFFSET-11"),
        "remove_offset": ("OFFSET-12",),
        "update_to_broker": ("OFFSET-12",),
        "persist_consumer_offset": ("OFFSET-6", "OFFSET-8", "OFFSET-11"),
        "rebalance_reset": ("OFFSET-5", "OFFSET-10", "OFFSET-13"),
        "broker_state": (),
        "write_file": (),
        "load": ("OFFSET-10",),
        "broker_address": ("OFFSET-7",),
    },
}

_STORE_FIELDS: dict[str, tuple[str, ...]] = {
    "queueOffset": ("STORE-18",),
    "wroteOffset": ("LAYOUT-4", "LAYOUT-7"),
    "wroteBytes": ("LAYOUT-5", "LAYOUT-9"),
    "minOffset": ("STORE-4", "STORE-19", "LAYOUT-3"),
    "maxOffset": ("STORE-4",),
    "commitLogMinOffset": ("STORE-19", "LAYOUT-4"),
    "commitLogMaxOffset": ("STORE-20", "LAYOUT-7"),
    "nextBeginOffset": ("STORE-6", "STORE-7", "STORE-8", "STORE-10", "STORE-14", "STORE-15"),
    "msgOffsets": (
        *("STORE-11", "STORE-12", "STORE-15", "STORE-21", "BATCH-1", "BATCH-2", "BATCH-4"),
        "CODE-11",
        *("FILTER-1", "FILTER-2", "FILTER-4", "FILTER-5", "FILTER-6"),
    ),
    "bufferTotalSize": ("STORE-17", "STORE-21", "LAYOUT-5", "LAYOUT-9"),
    "suggestPullingFromSlave": ("STORE-16", "BATCH-3"),
    "error": ("BATCH-4",),
    "code": ("CODE-2", "CODE-7", "CODE-8", "CODE-9", "CODE-10", "CODE-14"),
    "suggestWhichBrokerId": ("CODE-6", "CODE-10"),
    "brokerRole": ("STORE-6",),
    "offsetCheckInSlave": ("STORE-6",),
}
_STATUS = ("STORE-3", "STORE-5", "STORE-9", "STORE-12", "STORE-13", "LAYOUT-11")

#: Rule IDs a diverging field points at, per area (a field not listed falls back to the op's).
FIELD_RULES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "store": {**_STORE_FIELDS, "status": _STATUS},
    "pull_code": {**_STORE_FIELDS, "status": _STATUS},
    "process_queue": {
        "msgCount": ("PQ-2", "PQ-9", "PQ-13"),
        "msgSize": ("PQ-7", "PQ-9", "PQ-13"),
        "maxSpan": ("PQ-6",),
        "queueOffsetMax": ("PQ-4", "PQ-12"),
        "msgAccCnt": ("PQ-5",),
        "consuming": ("PQ-3", "PQ-8"),
        "cachedOffsets": ("PQ-2", "PQ-7", "PQ-8", "PQ-10", "PQ-11"),
        "consumingOffsets": ("PQ-8", "PQ-9", "PQ-10", "PQ-11"),
        "isLockExpired": ("PQ-15",),
        "isPullExpired": ("PQ-16",),
        "error": ("PQ-8", "PQ-9"),
    },
    "lock_manager": {"expired": ("LEASE-3",)},
    "send_back": {
        **_STORE_FIELDS,
        "code": ("RETRY-1", "RETRY-3", "RETRY-4", "STORE-22"),
        "remark": ("RETRY-1", "RETRY-3", "STORE-22"),
        "topic": ("RETRY-2", "RETRY-4"),
        "queueId": ("RETRY-2", "RETRY-4"),
        "reconsumeTimes": ("RETRY-6",),
        "properties": ("RETRY-4", "RETRY-6", "RETRY-8", "LAYOUT-13"),
        "delayLevel": ("RETRY-4", "RETRY-5", "RETRY-8"),
        "error": ("RETRY-3",),
    },
    "offset_store": {
        "kind": ("OFFSET-1",),
        "table": ("OFFSET-2", "OFFSET-3", "OFFSET-4", "OFFSET-5", "OFFSET-10", "OFFSET-13"),
        "increaseOnly": ("OFFSET-3",),
        "result": ("OFFSET-4", "OFFSET-5", "OFFSET-10", "OFFSET-13"),
        "memory": ("OFFSET-13",),
        "sent": ("OFFSET-6",),
        "noOp": ("OFFSET-12",),
        "targets": ("OFFSET-8",),
        "files": ("OFFSET-11",),
        "persistSteps": ("OFFSET-11",),
        "exception": ("OFFSET-10",),
        "address": ("OFFSET-7",),
    },
}

#: Rule IDs that decide the next offset and the response code of each store status: a
#: divergence on those fields of a call whose expected status is known points at these.
STATUS_RULES: Mapping[str, tuple[str, ...]] = {
    "NO_MESSAGE_IN_QUEUE": ("STORE-3", "STORE-5", "STORE-6", "CODE-8", "CODE-10"),
    "OFFSET_TOO_SMALL": ("STORE-5", "STORE-6", "CODE-7", "CODE-10"),
    "OFFSET_OVERFLOW_ONE": ("STORE-5", "STORE-7", "CODE-7"),
    "OFFSET_OVERFLOW_BADLY": ("STORE-6", "STORE-8", "CODE-7", "CODE-10"),
    "OFFSET_FOUND_NULL": ("STORE-6", "STORE-9", "STORE-10", "CODE-7"),
    "FOUND": ("STORE-11", "STORE-12", "STORE-14", "STORE-21", "CODE-7", "CODE-9", "CODE-14"),
    "NO_MATCHED_MESSAGE": ("STORE-12", "STORE-13", "STORE-14", "CODE-7", "CODE-9", "CODE-14"),
    "MESSAGE_WAS_REMOVING": (
        *("STORE-12", "STORE-13", "STORE-14", "STORE-15", "STORE-21", "CODE-7", "CODE-9"),
        "CODE-14",
    ),
}
_STATUS_DECIDED = frozenset({"nextBeginOffset", "code", "status"})

#: Java exception names the recorded vectors and the adapters report, by error kind.
JAVA_EXCEPTIONS: Mapping[str, ErrorKind] = {
    "NoSuchElementException": ErrorKind.NO_SUCH_ELEMENT,
    "NumberFormatException": ErrorKind.INVALID_ARGUMENT,
    "IllegalArgumentException": ErrorKind.ILLEGAL_CAPACITY,
    "NullPointerException": ErrorKind.NULL_POINTER,
}


def error_kind(value: object) -> ErrorKind:
    """The ErrorKind an `error` value names: a kind, or a Java exception name RocketMQ threw."""
    if isinstance(value, ErrorKind):
        return value
    text = require_str("error", value)
    if text in JAVA_EXCEPTIONS:
        return JAVA_EXCEPTIONS[text]
    try:
        return ErrorKind(text)
    except ValueError:
        raise InvalidArgumentError(
            "error", text, "not an ErrorKind nor a known exception"
        ) from None


def check_area(area: object) -> str:
    """`area` if it is one of MACHINE_AREAS, else InvalidArgumentError."""
    if area not in MACHINE_AREAS:
        raise InvalidArgumentError("area", area, f"expected one of {', '.join(MACHINE_AREAS)}")
    return str(area)


@attrs.frozen
class Op:
    """One operation: its vector name and its arguments (camelCase, JSON values only)."""

    name: str
    args: Mapping[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `{"op", "args"}` part of a vector step."""
        return {"op": self.name, "args": dict(self.args)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Op:
        """An Op from a vector step (its `expect`, if any, is ignored)."""
        args = data.get("args") or {}
        if not isinstance(args, Mapping):
            raise InvalidArgumentError("args", args, "expected a JSON object")
        return cls(require_str("op", data.get("op")), dict(args))


@attrs.frozen
class Observation:
    """What one op observed: result fields, or an error kind, plus the state fields after it."""

    fields: Mapping[str, Any] = attrs.field(factory=dict)
    error: ErrorKind | None = None
    state: Mapping[str, Any] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The flat JSON object a vector step's `expect` holds (error as its ErrorKind name)."""
        out: dict[str, Any] = {**self.fields, **self.state}
        if self.error is not None:
            out["error"] = self.error.value
        return out

    @classmethod
    def from_json(cls, area: str, data: Mapping[str, Any]) -> Observation:
        """Split a flat observation of `area` into result, error kind and state."""
        state_keys = STATE_FIELDS[check_area(area)]
        error = error_kind(data["error"]) if data.get("error") is not None else None
        return cls(
            fields={k: v for k, v in data.items() if k not in state_keys and k != "error"},
            error=error,
            state={k: v for k, v in data.items() if k in state_keys},
        )

    @classmethod
    def failure(cls, exc: PullspecError) -> Observation:
        """The observation of a call that raised a typed spec error (no state was returned)."""
        return cls(error=exc.kind)


_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def field_names(path: str, state_fields: tuple[str, ...] = ()) -> list[str]:
    """The field names a first-difference path mentions, innermost first: `results[0].status`
    gives [status, results]; `state[2]` gives the name of the third of `state_fields`."""
    names = _IDENT.findall(path)
    positional = re.match(r"state\[(\d+)\]", path)
    if positional and int(positional.group(1)) < len(state_fields):
        names.append(state_fields[int(positional.group(1))])
    if re.match(r"table\.[^.]+\.[^.\[]+\[2\]", path):
        names.append("expired")
    return list(reversed(names))


def rules_for(
    area: str,
    op: str,
    path: str | None = None,
    state_fields: tuple[str, ...] = (),
    expected: Mapping[str, Any] | None = None,
) -> tuple[str, ...]:
    """The rule IDs a divergence of `op` at field `path` involves: the field's rules that the op
    exercises (narrowed to the expected store status's rules when one is known), else the
    field's rules, else every rule of the op."""
    op_rules = OP_RULES.get(area, {}).get(op, ())
    if path is None:
        return op_rules
    table = FIELD_RULES.get(area, {})
    for name in field_names(path, state_fields):
        if name in table:
            field_rules = table[name]
            both = tuple(r for r in field_rules if r in op_rules) or field_rules
            status = str((expected or {}).get("status"))
            if name in _STATUS_DECIDED and status in STATUS_RULES:
                narrowed = tuple(r for r in both if r in STATUS_RULES[status])
                return narrowed or both
            return both
    return op_rules
