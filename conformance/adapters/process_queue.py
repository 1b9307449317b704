"""The process_queue area adapter: replays ProcessQueue vector steps on a candidate.

A vector message `[offset, bodySize]` or `[offset, bodySize, maxOffset]` becomes a
StoredMessage of topic "T" with a body of `bodySize` zero bytes and, when given, the MAX_OFFSET
property the pull path sets. The observed `state` is positional, in `config.stateFields` order.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from pullspec.conformance.candidates import Candidate, factory
from pullspec.conformance.jsontypes import JSONObject, JSONValue, as_given, is_array
from pullspec.conformance.ops import DEFAULT_STATE_FIELDS
from pullspec.spec.clock import ManualClock
from pullspec.spec.errors import InvalidArgumentError, PullspecError, UnsupportedError, require_int
from pullspec.spec.message import PROPERTY_MAX_OFFSET, StoredMessage
from pullspec.spec.process_queue import LOCK_MAX_LIVE_TIME_MS, PULL_MAX_IDLE_TIME_MS
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import ProcessQueue

_STATE_READERS: dict[str, Callable[[ProcessQueue], JSONValue]] = {
    "msgCount": lambda q: q.msg_count,
    "msgSize": lambda q: q.msg_size,
    "maxSpan": lambda q: q.max_span,
    "queueOffsetMax": lambda q: q.queue_offset_max,
    "msgAccCnt": lambda q: q.msg_acc_cnt,
    "consuming": lambda q: q.consuming,
    "cachedOffsets": lambda q: list(q.cached_offsets),
    "consumingOffsets": lambda q: list(q.consuming_offsets),
    "isLockExpired": lambda q: q.is_lock_expired(),
    "isPullExpired": lambda q: q.is_pull_expired(),
    "dropped": lambda q: q.dropped,
    "locked": lambda q: q.locked,
    "lastLockTimestamp": lambda q: q.last_lock_timestamp,
    "lastPullTimestamp": lambda q: q.last_pull_timestamp,
    "lastConsumeTimestamp": lambda q: q.last_consume_timestamp,
}

_DEFAULT_PROPERTIES = operator.attrgetter(
    "msg_count",
    "msg_size",
    "max_span",
    "queue_offset_max",
    "msg_acc_cnt",
    "consuming",
    "cached_offsets",
    "consuming_offsets",
)


def _default_state(q: ProcessQueue) -> list[JSONValue]:
    """The DEFAULT_STATE_FIELDS readers' values, read in the same order in one C-level pass
    (every campaign trace reads these after every op, on both sides)."""
    *plain, cached, consuming = _DEFAULT_PROPERTIES(q)
    return [*plain, list(cached), list(consuming), q.is_lock_expired(), q.is_pull_expired()]


# `set` args: the vector's field name -> the candidate's attribute.
_SETTABLE = {
    "locked": "locked",
    "dropped": "dropped",
    "lastLockTimestamp": "last_lock_timestamp",
    "lastPullTimestamp": "last_pull_timestamp",
}


@attrs.define
class Instance:
    """One case's process queue together with the clock that drives it."""

    queue: ProcessQueue
    clock: ManualClock
    state_fields: tuple[str, ...]
    #: Reads `state_fields`, built once: `state()` runs after every op.
    reader: Callable[[ProcessQueue], list[JSONValue]] = attrs.field(init=False)

    @reader.default
    def _reader(self) -> Callable[[ProcessQueue], list[JSONValue]]:
        if self.state_fields == DEFAULT_STATE_FIELDS:
            return _default_state
        readers = tuple(_STATE_READERS[f] for f in self.state_fields)
        return lambda q: [read(q) for read in readers]

    def state(self) -> list[JSONValue]:
        """The positional state observation."""
        return self.reader(self.queue)


def to_message(spec: object) -> StoredMessage:
    """A vector message `[offset, bodySize(, maxOffset)]` as a StoredMessage."""
    if not isinstance(spec, list) or len(spec) not in (2, 3):
        raise InvalidArgumentError("msg", spec, "expected [offset, bodySize(, maxOffset)]")
    if all(type(x) is int for x in spec) and 0 <= spec[1] <= _MAX_SHARED_BODY:
        return _shared_message(*spec)
    return _message(*spec)


def _message(offset: object, size: object, *max_offset: object) -> StoredMessage:
    queue_offset = require_int("offset", offset)
    body = bytes(require_int("bodySize", size))
    props = (
        ((PROPERTY_MAX_OFFSET, str(require_int("maxOffset", max_offset[0]))),) if max_offset else ()
    )
    return StoredMessage(
        topic="T",
        queue_id=0,
        queue_offset=queue_offset,
        commitlog_offset=0,
        size=0,
        tags_code=0,
        body=body,
        properties=props,
    )


#: Messages (frozen, bodies of zeros) are built once per distinct `[offset, bodySize(,
#: maxOffset)]` and then shared by every op and both sides that use an equal one: inputs, never
#: anything observed. Only lists of exact ints are keyed (so True never stands for 1).
_MAX_SHARED_BODY = 4096
_shared_message = functools.lru_cache(maxsize=8192)(_message)


def to_messages(specs: object) -> list[StoredMessage]:
    """The `msgs` argument of a step as StoredMessage objects."""
    if not isinstance(specs, list):
        raise InvalidArgumentError("msgs", specs, "expected a list")
    return [to_message(s) for s in specs]


def create(
    candidate: Candidate, config: Mapping[str, JSONValue], profile: Profile, base: Path
) -> Instance:
    """A fresh process queue of `candidate` on a ManualClock at `config["clockStart"]`."""
    new_queue = factory(candidate, "process_queue")
    # The factory takes no timing knobs, so only RocketMQ's defaults can be replayed.
    for key, default in (
        ("lockMaxLiveTimeMs", LOCK_MAX_LIVE_TIME_MS),
        ("pullMaxIdleTimeMs", PULL_MAX_IDLE_TIME_MS),
    ):
        if config.get(key, default) != default:
            raise UnsupportedError(f"{key}={config[key]} (the factory uses {default})")
    given = config.get("stateFields")
    fields = tuple(str(f) for f in given) if is_array(given) else DEFAULT_STATE_FIELDS
    unknown = [f for f in fields if f not in _STATE_READERS]
    if unknown:
        raise UnsupportedError(f"state fields {unknown}")
    clock = ManualClock(require_int("clockStart", config.get("clockStart", 0)))
    return Instance(queue=new_queue(clock, profile), clock=clock, state_fields=fields)


def _run(instance: Instance, op: str, args: JSONObject) -> JSONObject:
    q = instance.queue
    if op == "put_messages":
        return {"result": q.put_messages(to_messages(args.get("msgs")))}
    if op == "remove_messages":
        return {"result": q.remove_messages(to_messages(args.get("msgs")))}
    if op == "take_messages":
        return {"result": [m.queue_offset for m in q.take_messages(as_given(int, args["n"]))]}
    if op == "make_messages_to_consume_again":
        q.make_messages_to_consume_again(to_messages(args.get("msgs")))
        return {}
    if op == "commit":
        return {"result": q.commit()}
    if op == "rollback":
        q.rollback()
        return {}
    if op == "set":
        for key, value in args.items():
            if key not in _SETTABLE:
                raise UnsupportedError(f"set {key}")
            setattr(q, _SETTABLE[key], value)
        return {}
    if op == "advance_clock":
        return {"now": instance.clock.advance(as_given(int, args["ms"]))}
    raise UnsupportedError(f"process_queue op {op!r}")


def apply(instance: Instance, op: str, args: JSONObject) -> JSONObject:
    """Run one step and return its observation: `result` / `now` / `error`, and `state`."""
    try:
        observed = _run(instance, op, args)
    except UnsupportedError:
        raise
    except PullspecError as exc:
        # The state after a failed call is part of what RocketMQ did.
        observed = {"error": exc.java_exception or exc.kind.value}
    observed["state"] = instance.state()
    return observed
