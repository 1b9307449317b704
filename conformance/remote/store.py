"""The forwarding objects of the broker side: the message store, the pull path and the
send-back processor (`SubprocessCandidate`'s `message_store`, `broker` and `send_back`). Each
call travels as the matching vector op; the records themselves never cross the protocol, only
their offsets and sizes.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from pullspec.conformance.jsontypes import (
    JSONObject,
    JSONValue,
    as_array,
    as_given,
    as_object,
    is_object,
)
from pullspec.conformance.remote.session import VERSION_NAMES, RemoteSession, raise_observed
from pullspec.spec.code import FLAG_SUBSCRIPTION, PullMessageRequest, PullResponse
from pullspec.spec.errors import UnsupportedError
from pullspec.spec.evolve import evolve
from pullspec.spec.filter import ExpressionMessageFilter
from pullspec.spec.message import BrokerInnerMessage, StoredMessage
from pullspec.spec.results import GetMessageResult, PutMessageResult
from pullspec.spec.retry import SendBackRequest, SendBackResponse
from pullspec.spec.status import BrokerRole, GetMessageStatus, PutMessageStatus, ResponseCode


def _message_json(msg: BrokerInnerMessage) -> JSONObject:
    plain = BrokerInnerMessage(
        msg.topic, msg.queue_id, bytes(len(msg.body)), reconsume_times=msg.reconsume_times
    )
    if evolve(msg, properties=()) != plain or set(dict(msg.properties)) - {"TAGS"}:
        raise UnsupportedError("a message beyond {queueId, tags, bodySize, reconsumeTimes}")
    out: JSONObject = {"queueId": msg.queue_id, "tags": msg.tags, "bodySize": len(msg.body)}
    if msg.reconsume_times:
        out["reconsumeTimes"] = msg.reconsume_times
    return out


@attrs.frozen
class RemoteGetMessageResult(GetMessageResult):
    """A getMessage answer whose records stayed in the subprocess: offsets and total size only."""

    offsets: tuple[int, ...] = ()
    total_size: int = 0

    def __getattribute__(self, name: str) -> object:
        # The records themselves never cross the protocol: a caller that needs them (the
        # whole-system simulation's broker) cannot run on a subprocess store.
        if name == "messages" and object.__getattribute__(self, "offsets"):
            raise UnsupportedError("a subprocess store answers offsets, not the records")
        return object.__getattribute__(self, name)

    @property
    def buffer_total_size(self) -> int:
        """The total size the subprocess reported."""
        return self.total_size

    @property
    def msg_offsets(self) -> list[int]:
        """The queue offsets the subprocess reported."""
        return list(self.offsets)


class RemoteStore:
    """MessageStore forwarding to a subprocess (area `store`, or the store of a broker or
    send-back session). Offsets are those of the last put, delete or role switch."""

    def __init__(self, session: RemoteSession) -> None:
        self._s = session
        self._seen: JSONObject = {}
        self._role = BrokerRole(session.config.get("brokerRole", "ASYNC_MASTER"))
        self._check = bool(session.config.get("offsetCheckInSlave", False))

    @property
    def broker_role(self) -> BrokerRole:
        """The role last set."""
        return self._role

    @property
    def offset_check_in_slave(self) -> bool:
        """offsetCheckInSlave last set."""
        return self._check

    def _learn(self, observation: JSONObject) -> JSONObject:
        self._seen.update({k: v for k, v in observation.items() if k not in ("results", "error")})
        return observation

    def set_role(self, broker_role: BrokerRole, offset_check_in_slave: bool) -> None:
        """Forward `set_role`."""
        args: JSONObject = {
            "brokerRole": broker_role.value,
            "offsetCheckInSlave": offset_check_in_slave,
        }
        raise_observed(self._learn(self._s.call("set_role", args)))
        self._role, self._check = broker_role, offset_check_in_slave

    def put_messages(self, msgs: Sequence[BrokerInnerMessage]) -> list[PutMessageResult]:
        """Forward `put`."""
        key = "originalTopic" if self._s.area == "send_back" else "topic"
        for m in msgs:
            self._s.configure(**{key: m.topic})
        seen = self._learn(self._s.call("put", {"msgs": [_message_json(m) for m in msgs]}))
        raise_observed(seen)
        return [
            PutMessageResult(
                PutMessageStatus(r["status"]),
                as_given(int, r.get("queueOffset", -1)),
                as_given(int, r.get("wroteOffset", -1)),
                as_given(int, r.get("wroteBytes", 0)),
            )
            for r in map(as_object, as_array(seen["results"]))
        ]

    def put_message(self, msg: BrokerInnerMessage) -> PutMessageResult:
        """Forward a one-message `put`."""
        return self.put_messages([msg])[0]

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: object = None,
    ) -> GetMessageResult:
        """Forward `get_message` (a TAG ExpressionMessageFilter or none)."""
        if message_filter is not None and not isinstance(message_filter, ExpressionMessageFilter):
            raise UnsupportedError("a filter other than a TAG expression")
        sub = message_filter.subscription if message_filter else None
        args: JSONObject = {
            "queueId": queue_id,
            "offset": offset,
            "maxMsgNums": max_msg_nums,
            "subscription": sub.sub_string if sub else None,
            "group": group,
            "topic": topic,
        }
        seen = self._s.call("get_message", args)
        raise_observed(seen)
        # The subprocess's answers go on as it gave them: the vector comparison judges them.
        return RemoteGetMessageResult(
            GetMessageStatus(seen["status"]),
            as_given(int, seen["nextBeginOffset"]),
            as_given(int, seen["minOffset"]),
            as_given(int, seen["maxOffset"]),
            suggest_pulling_from_slave=as_given(bool, seen["suggestPullingFromSlave"]),
            offsets=tuple(as_given(int, o) for o in as_array(seen["msgOffsets"])),
            total_size=as_given(int, seen["bufferTotalSize"]),
        )

    def look_message_by_offset(self, commitlog_offset: int) -> StoredMessage | None:
        """Not a vector op: the records stay in the subprocess."""
        raise UnsupportedError("a subprocess store answers offsets, not the records")

    def check_in_disk_by_consume_offset(
        self, topic: str, queue_id: int, consume_offset: int
    ) -> bool:
        """Not a vector op."""
        raise UnsupportedError("checkInDiskByConsumeOffset is not a vector op")

    def delete_expired_files(self) -> int:
        """Forward `delete_expired`, one forced clean round (docs/protocol.md, `store`); the
        count of deleted files does not travel: 0."""
        raise_observed(self._learn(self._s.call("delete_expired", {})))
        return 0

    def _cached(self, key: str, *path: str) -> int:
        value = self._lookup(key, *path)
        if value is None and self._s.area in ("store", "pull_code"):
            # Nothing observed it yet (a read before any write): a set_role to the role it
            # already has changes nothing and answers the offsets.
            args: JSONObject = {"brokerRole": self._role.value, "offsetCheckInSlave": self._check}
            raise_observed(self._learn(self._s.call("set_role", args)))
            value = self._lookup(key, *path)
        if value is None:
            raise UnsupportedError(f"{key} {'.'.join(path)} was not observed yet")
        return value

    def _lookup(self, key: str, *path: str) -> int | None:
        value = self._seen.get(key)
        for p in path:
            value = value.get(p) if is_object(value) else None
        return value if isinstance(value, int) else None

    def _queue(self, queue_id: int, bound: str) -> int:
        """A queue's offset as last observed; `queues` lists 0, 1 and every queue a put named,
        so a queue it does not list has no entry (0)."""
        self._cached("commitLogMaxOffset")  # observe once, if nothing has yet
        queues = self._seen.get("queues")
        if not is_object(queues) or str(queue_id) not in queues:
            return 0
        return self._cached("queues", str(queue_id), bound)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's min offset as last observed."""
        return self._queue(queue_id, "minOffset")

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's max offset as last observed."""
        return self._queue(queue_id, "maxOffset")

    def get_min_phy_offset(self) -> int:
        """The commit-log min offset as last observed."""
        return self._cached("commitLogMinOffset")

    def get_max_phy_offset(self) -> int:
        """The commit-log max offset as last observed."""
        return self._cached("commitLogMaxOffset")


def _optional_int(value: JSONValue) -> int | None:
    """An optional offset of a subprocess's answer, handed on as it gave it."""
    return None if value is None else as_given(int, value)


@attrs.frozen(kw_only=True)
class RemotePullResponse(PullResponse):
    """A pull answer whose records stayed in the subprocess: their queue offsets only."""

    offsets: tuple[int, ...] = ()

    @property
    def msg_offsets(self) -> list[int]:
        """The queue offsets the subprocess reported."""
        return list(self.offsets)


class RemoteBroker:
    """The broker's pull path forwarding to a subprocess (area `pull_code`)."""

    def __init__(self, session: RemoteSession) -> None:
        self._s = session
        #: The same remote instance, for the setup steps.
        self.store = RemoteStore(session)

    def create_topic(self, topic: str, queue_nums: int = 4, perm: int = 6) -> None:
        """Record the topic for `create` (config `topic`, `topicQueueNums`)."""
        if perm != 6:
            raise UnsupportedError("a topic permission other than read-write")
        self._s.configure(topic=topic, topicQueueNums=queue_nums)

    def pull_message(self, request: PullMessageRequest) -> tuple[int, PullResponse]:
        """Forward `pull` (no suspend flag, no piggy-backed commit)."""
        wanted = FLAG_SUBSCRIPTION if request.subscription is not None else 0
        if request.sys_flag != wanted or request.expression_type not in (None, "TAG"):
            raise UnsupportedError("a pull beyond {queueId, offset, maxMsgNums, subscription}")
        self._s.configure(group=request.consumer_group, topic=request.topic)
        args: JSONObject = {
            "queueId": request.queue_id,
            "offset": request.queue_offset,
            "maxMsgNums": request.max_msg_nums,
            "subscription": request.subscription,
        }
        seen = self._s.call("pull", args)
        raise_observed(seen)
        status = seen.get("status")
        # The subprocess's answers go on as it gave them: the vector comparison judges them.
        return 0, RemotePullResponse(
            code=ResponseCode[as_given(str, seen["code"])],
            status=GetMessageStatus(status) if status is not None else None,
            next_begin_offset=_optional_int(seen.get("nextBeginOffset")),
            min_offset=_optional_int(seen.get("minOffset")),
            max_offset=_optional_int(seen.get("maxOffset")),
            suggest_which_broker_id=as_given(int, seen.get("suggestWhichBrokerId", 0)),
            offsets=tuple(as_given(int, o) for o in as_array(seen.get("msgOffsets") or ())),
        )


class RemoteSendBack:
    """CONSUMER_SEND_MSG_BACK forwarding to a subprocess (area `send_back`)."""

    def __init__(self, session: RemoteSession) -> None:
        self._s = session
        #: The same remote instance, for the `put` steps.
        self.store = RemoteStore(session)
        self._last: StoredMessage | None = None

    @property
    def last_stored(self) -> StoredMessage | None:
        """The record the last send-back appended, as the subprocess described it."""
        return self._last

    def send_back(
        self, request: SendBackRequest, *, request_version: int | None = None
    ) -> SendBackResponse:
        """Forward `send_back` (the request version travels in the create config)."""
        if request.origin_msg_id is not None or request.unit_mode:
            raise UnsupportedError("a send-back beyond the vectors' header fields")
        version = (
            self._s.rules.client_request_version() if request_version is None else request_version
        )
        if version not in VERSION_NAMES:
            raise UnsupportedError(f"request version {version} has no name")
        self._s.configure(
            requestVersion=VERSION_NAMES[version],
            originalTopic=request.origin_topic or self._s.config["originalTopic"],
        )
        args: JSONObject = {
            "originalCommitLogOffset": request.offset,
            "group": request.group,
            "delayLevel": request.delay_level,
            "maxReconsumeTimes": request.max_reconsume_times,
        }
        seen = self._s.call("send_back", args)
        raise_observed(seen)
        stored = seen.get("stored")
        self._last = None
        if stored is not None:
            # The subprocess's description goes on as it gave it: the comparison judges it.
            described = as_object(stored)
            self._last = StoredMessage(
                as_given(str, described["topic"]), as_given(int, described["queueId"]),
                0, 0, 0, 0, b"",
                properties=as_given(dict[str, str], described.get("properties") or {}),
                reconsume_times=as_given(int, described["reconsumeTimes"]),
            )  # fmt: skip
        remark = seen.get("remark")
        return SendBackResponse(
            ResponseCode[as_given(str, seen["code"])],
            None if remark is None else as_given(str, remark),
        )
