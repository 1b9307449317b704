"""Adapter for area `store`: DefaultMessageStore.getMessage with the broker's TAG filter.

Also replays the shared 4.9.7 store directories (`config.storeDir`): a candidate with
`open_store(path, config, profile, clock)` opens the directory read-only; any other candidate
gets a fresh store filled with the directory's messages.jsonl, which must answer the same.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from pullspec.conformance.adapters._config import store_config
from pullspec.conformance.candidates import Candidate, factory, has_factory
from pullspec.conformance.jsontypes import JSONObject, JSONValue, as_array, as_given, as_object
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import UnsupportedError
from pullspec.spec.evolve import evolve
from pullspec.spec.filter import ExpressionMessageFilter, tag_filter
from pullspec.spec.message import BrokerInnerMessage, HostAddress
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageStore
from pullspec.spec.results import PutMessageResult
from pullspec.spec.status import BrokerRole, PutMessageStatus

QUEUE_IDS = (0, 1)


@attrs.define
class StoreCase:
    """One case's store, clock and config."""

    store: MessageStore
    clock: ManualClock
    topic: str
    group: str
    #: The queue ids `queues` reports: 0, 1 and every other queue a put of this case named.
    queue_keys: tuple[tuple[str, int], ...] = attrs.field(default=(("0", 0), ("1", 1)))

    def wrote(self, queue_ids: Iterable[JSONValue]) -> None:
        """Note the queues a put named (an id that is not a non-negative int is not listed)."""
        known = {q for _, q in self.queue_keys}
        new = {q for q in queue_ids if type(q) is int and q >= 0 and q not in known}
        if new:
            self.queue_keys = tuple((str(q), q) for q in sorted(known | new))


def create(
    candidate: Candidate, config: Mapping[str, JSONValue], profile: Profile, base: Path
) -> StoreCase:
    """A fresh store for one case (or the shared store directory the case names)."""
    clock = ManualClock(0)
    cfg = store_config(config)
    store_dir = config.get("storeDir") or config.get("store_dir")
    if store_dir:
        path = _find_store_dir(base, str(store_dir))
        if has_factory(candidate, "open_store"):
            opened = factory(candidate, "open_store")(path, cfg, profile, clock)
            return StoreCase(opened, clock, "T", "G")
        return StoreCase(_replayed(candidate, path, cfg, profile, clock), clock, "T", "G")
    store = factory(candidate, "message_store")(cfg, profile, clock)
    topic, group = config.get("topic", "T"), config.get("group", "G")
    return StoreCase(store, clock, as_given(str, topic), as_given(str, group))


def _find_store_dir(base: Path, name: str) -> Path:
    for candidate in (base / name, base.parent / name, base.parent.parent / "stores" / name):
        if (candidate / "messages.jsonl").exists():
            return candidate
    raise UnsupportedError(f"store directory {name} not found near {base}")


def _replayed(
    candidate: Candidate, path: Path, cfg: StoreConfig, profile: Profile, clock: ManualClock
) -> MessageStore:
    new_store = factory(candidate, "message_store")
    rows = [json.loads(line) for line in (path / "messages.jsonl").open(encoding="utf-8")]
    expired = [r for r in rows if r.get("on_disk") is False]
    # As the generating run did: write as a master, keep files 1 h, age the expired files 2 h.
    live = evolve(cfg, broker_role=BrokerRole.ASYNC_MASTER, file_reserved_time=1)
    store = new_store(
        live if expired else evolve(cfg, broker_role=BrokerRole.ASYNC_MASTER), profile, clock
    )
    for row in rows:
        clock.jump_to(row["store_timestamp"])
        store.put_message(
            BrokerInnerMessage(
                topic=row["topic"],
                queue_id=row["queue_id"],
                body=base64.b64decode(row["body_base64"]),
                properties=row["properties"],
                flag=row["flag"],
                sys_flag=row["sys_flag"],
                reconsume_times=row["reconsume_times"],
                born_timestamp=row["born_timestamp"],
                born_host=HostAddress.parse(row["born_host"]),
                store_host=HostAddress.parse(row["store_host"]),
            )
        )
    if expired:
        set_last_modified = getattr(store, "set_last_modified", None)
        if set_last_modified is None:
            raise UnsupportedError("replaying an expired store needs set_last_modified()")
        first_kept = min(r["commitlog_offset"] for r in rows if r.get("on_disk", True))
        size = cfg.mapped_file_size_commit_log
        for start in range(0, first_kept - first_kept % size, size):
            set_last_modified(start, clock.now_ms() - 2 * 3_600_000)
        store.delete_expired_files()
    store.set_role(cfg.broker_role, cfg.offset_check_in_slave)
    return store


def _put_json(r: PutMessageResult) -> JSONObject:
    if r.status is not PutMessageStatus.PUT_OK:
        return {"status": r.status.value}
    return {
        "status": r.status.value,
        "queueOffset": r.queue_offset,
        "wroteOffset": r.wrote_offset,
        "wroteBytes": r.wrote_bytes,
    }


def _offsets(case: StoreCase) -> JSONObject:
    s, topic = case.store, case.topic
    return {
        "queues": {
            key: {
                "minOffset": s.get_min_offset_in_queue(topic, q),
                "maxOffset": s.get_max_offset_in_queue(topic, q),
            }
            for key, q in case.queue_keys
        },
        "commitLogMinOffset": s.get_min_phy_offset(),
        "commitLogMaxOffset": s.get_max_phy_offset(),
    }


def message(topic: str, spec_: Mapping[str, JSONValue]) -> BrokerInnerMessage:
    """The message a vector's `{queueId, tags, bodySize[, reconsumeTimes]}` describes."""
    queue_id, tags, size = spec_["queueId"], spec_.get("tags"), spec_["bodySize"]
    reconsume = spec_.get("reconsumeTimes", 0)
    if (
        type(topic) is str
        and type(queue_id) is int
        and type(size) is int
        and 0 <= size <= _MAX_SHARED_BODY
        and (tags is None or type(tags) is str)
        and type(reconsume) is int
    ):
        return _shared_message(topic, queue_id, tags, size, reconsume)
    return _message(topic, queue_id, tags, size, reconsume)


def _message(
    topic: str, queue_id: JSONValue, tags: JSONValue, size: JSONValue, reconsume: JSONValue
) -> BrokerInnerMessage:
    # The values as the vector gives them: BrokerInnerMessage and the store check them.
    return BrokerInnerMessage(
        topic=topic,
        queue_id=as_given(int, queue_id),
        body=bytes(as_given(int, size)),
        properties={"TAGS": as_given(str, tags)} if tags is not None else None,
        reconsume_times=as_given(int, reconsume),
    )


#: Messages (frozen, bodies of zeros) are built once per distinct description and then shared by
#: every op and both sides that put an equal one: a put's inputs, never anything observed. Only
#: exact ints and strs are keyed (so True never stands for 1) and bodies up to this size.
_MAX_SHARED_BODY = 4096
_shared_message = functools.lru_cache(maxsize=8192)(_message)


@functools.lru_cache(maxsize=256)
def _shared_filter(topic: str, expression: str) -> ExpressionMessageFilter | None:
    # A frozen filter, a function of its two strings; parsing it was a tenth of a get_message.
    return tag_filter(topic, expression)


def _filter(topic: str, expression: JSONValue) -> ExpressionMessageFilter | None:
    if type(topic) is str and type(expression) is str:
        return _shared_filter(topic, expression)
    return tag_filter(topic, as_given(str, expression))


def apply(case: StoreCase, op: str, args: JSONObject) -> JSONObject:
    """Run one store step and observe it in the vectors' vocabulary."""
    case.clock.advance(1)
    if op == "put":
        msgs = [as_object(m) for m in as_array(args["msgs"])]
        results = case.store.put_messages([message(case.topic, m) for m in msgs])
        case.wrote(m.get("queueId") for m in msgs)
        return {"results": [_put_json(r) for r in results], **_offsets(case)}
    if op == "get_message":
        topic = as_given(str, args.get("topic", case.topic))
        result = case.store.get_message(
            as_given(str, args.get("group", case.group)),
            topic,
            as_given(int, args["queueId"]),
            as_given(int, args["offset"]),
            as_given(int, args["maxMsgNums"]),
            _filter(topic, args.get("subscription")),
        )
        return {
            "status": result.status.value,
            "nextBeginOffset": result.next_begin_offset,
            "minOffset": result.min_offset,
            "maxOffset": result.max_offset,
            "msgOffsets": result.msg_offsets,
            "bufferTotalSize": result.buffer_total_size,
            "suggestPullingFromSlave": result.suggest_pulling_from_slave,
        }
    if op == "delete_expired":
        case.store.delete_expired_files()
        return _offsets(case)
    if op == "set_role":
        case.store.set_role(
            BrokerRole(args["brokerRole"]),
            as_given(bool, args.get("offsetCheckInSlave", case.store.offset_check_in_slave)),
        )
        return {
            "brokerRole": case.store.broker_role.value,
            "offsetCheckInSlave": case.store.offset_check_in_slave,
            **_offsets(case),
        }
    raise UnsupportedError(f"store op {op}")
