"""The reference driver of area `offset_store` (vocabulary: conformance.adapters.offset_store, docs/protocol.md)."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.offset_store import (
    ReferenceLocalFileOffsetStore,
    ReferenceRemoteOffsetStore,
    decode_offset_table,
    encode_offset_table,
)
from pullspec.reference.push_consumer import ServiceState
from pullspec.spec import offset_store as spec_os
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.consumer_config import ConsumerConfig, MessageModel, ReadOffsetType
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile

#: The vector area this module serves.
AREA = "offset_store"


def _table_json(table: dict[MessageQueue, int]) -> list[dict[str, Any]]:
    return [
        {"mq": _client.mq_json(q), "offset": v}
        for q, v in sorted(
            table.items(), key=lambda kv: (kv[0].topic, kv[0].broker_name, kv[0].queue_id)
        )
    ]


class Driver(_client.DriverBase):
    """The reference driver: reference.offset_store's remote or local store."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        model = _client.enum_of(MessageModel, config.get("messageModel", "CLUSTERING"))
        self.kind = spec_os.offset_store_kind(model, False)
        self.broker = _wiring.OffsetBroker()
        self.local: ReferenceLocalFileOffsetStore | None = None
        self.store: ReferenceLocalFileOffsetStore | ReferenceRemoteOffsetStore
        if self.kind is spec_os.OffsetStoreKind.LOCAL_FILE:
            base = tempfile.mkdtemp(prefix="pullspec-offsets-")
            # The directory goes with the driver: a case never leaves files behind.
            weakref.finalize(self, shutil.rmtree, base, True)
            self.local = self.classes.local_offset_store.for_group(
                base, str(config.get("clientId", "c1")), str(config.get("consumerGroup", "G"))
            )
            self.store = self.local
        else:
            self.store = self.classes.remote_offset_store(
                self.broker, str(config.get("consumerGroup", "G"))
            )

    def _file(self, suffix: str) -> Any:
        assert self.local is not None
        path = Path(str(self.local.path) + suffix)
        if not path.exists():
            return None
        try:
            return _table_json(decode_offset_table(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError, KeyError):
            return "corrupt"

    def _state(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind.value,
            "table": _table_json(self.store.clone_offset_table(None)),
        }
        if self.local is None:
            sent = [
                {"mq": _client.mq_json(q), "offset": offset, "oneway": oneway}
                for q, offset, oneway in self.broker.sent
            ]
            out["sent"], self.broker.sent = _client.sorted_by_mq(sent), []
        else:
            out["files"] = {
                "main": self._file(""),
                "bak": self._file(spec_os.BAK_SUFFIX),
                "tmp": Path(str(self.local.path) + spec_os.TMP_SUFFIX).exists(),
            }
            out["persistSteps"] = [s.value for s in self.local.last_persist_steps]
        return out

    def _no_op(self, what: spec_os.LocalNoOp) -> bool:
        return self.local is not None and what in spec_os.local_no_ops()

    def op_update_offset(self, args: _client.Args) -> dict[str, Any]:
        """updateOffset (OFFSET-2)."""
        self.store.update_offset(
            _client.mq(args.req("mq")), args.int("offset"), args.bool("increaseOnly")
        )
        return self._state()

    def op_update_by(self, args: _client.Args) -> dict[str, Any]:
        """updateOffset as one of RocketMQ's writers calls it (OFFSET-3)."""
        writer = args.enum("writer", spec_os.OffsetWriter)
        increase = spec_os.increase_only_for(writer)
        self.store.update_offset(_client.mq(args.req("mq")), args.int("offset"), increase)
        return {"increaseOnly": increase, **self._state()}

    def op_read_offset(self, args: _client.Args) -> dict[str, Any]:
        """readOffset (OFFSET-4, OFFSET-5, OFFSET-10)."""
        result = self.store.read_offset(
            _client.mq(args.req("mq")), args.enum("readType", ReadOffsetType)
        )
        return {"result": result, **self._state()}

    def op_persist(self, args: _client.Args) -> dict[str, Any]:
        """persist(mq) (OFFSET-6; a no-op locally, OFFSET-12)."""
        self.store.persist(_client.mq(args.req("mq")))
        return {"noOp": self._no_op(spec_os.LocalNoOp.PERSIST), **self._state()}

    def op_remove_offset(self, args: _client.Args) -> dict[str, Any]:
        """removeOffset(mq) (a no-op locally, OFFSET-12)."""
        self.store.remove_offset(_client.mq(args.req("mq")))
        return {"noOp": self._no_op(spec_os.LocalNoOp.REMOVE_OFFSET), **self._state()}

    def op_update_to_broker(self, args: _client.Args) -> dict[str, Any]:
        """updateConsumeOffsetToBroker (a no-op locally, OFFSET-12)."""
        self.store.update_consume_offset_to_broker(
            _client.mq(args.req("mq")), args.int("offset"), args.bool("oneway")
        )
        noop = self._no_op(spec_os.LocalNoOp.UPDATE_CONSUME_OFFSET_TO_BROKER)
        return {"noOp": noop, **self._state()}

    def op_persist_all(self, args: _client.Args) -> dict[str, Any]:
        """persistAll (OFFSET-6 remote, OFFSET-11 local)."""
        self.store.persist_all(_client.mqs(args.req("mqs")))
        return self._state()

    def op_persist_consumer_offset(self, args: _client.Args) -> dict[str, Any]:
        """MQClientInstance.persistAllConsumerOffset for this consumer (OFFSET-8)."""
        rig = _wiring.PushConsumerRig(ConsumerConfig(), self.profile)
        consumer = rig.consumer
        consumer.offset_store = self.store
        for q in _client.mqs(args.req("processQueueMqs")) or []:
            rig.hooks.table[q] = rig.pq
        if not args.bool("running"):
            consumer.service_state = ServiceState.SHUTDOWN_ALREADY
        consumer.persist_consumer_offset()
        targets = consumer.persist_rounds[-1]
        return {"targets": _client.mqs_json(targets), **self._state()}

    def op_rebalance_reset(self, args: _client.Args) -> dict[str, Any]:
        """Rebalance's removeDirtyOffset then computePullFromWhere's store read (OFFSET-13)."""
        queue = _client.mq(args.req("mq"))
        self.store.remove_offset(queue)
        result = self.store.read_offset(queue, ReadOffsetType.READ_FROM_STORE)
        return {
            "result": result,
            "memory": spec_os.memory_after_rebalance_read(result),
            **self._state(),
        }

    def op_broker_state(self, args: _client.Args) -> dict[str, Any]:
        """Set what the fake broker stores for a queue, or how its queries fail."""
        queue = _client.mq(args.req("mq"))
        offset, fails = args.get("offset"), args.get("fails")
        self.broker.offsets.pop(queue, None)
        self.broker.fails.pop(queue, None)
        if offset is not None:
            self.broker.offsets[queue] = offset
        if fails is not None:
            self.broker.fails[queue] = str(fails)
        return self._state()

    def op_write_file(self, args: _client.Args) -> dict[str, Any]:
        """Write (or delete) the local store's main or backup file."""
        assert self.local is not None, "write_file needs a BROADCASTING (local) store"
        path = self.local.directory / str(args.req("name"))
        offsets = args.get("offsets")
        if offsets is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            text = (
                offsets
                if isinstance(offsets, str)
                else encode_offset_table({_client.mq(o["mq"]): o["offset"] for o in offsets})
            )
            path.write_text(text, encoding="utf-8")
        return self._state()

    def op_load(self, args: _client.Args) -> dict[str, Any]:
        """load (OFFSET-10)."""
        try:
            self.store.load()
        except MQClientError:
            return {"exception": MQClientError.java_exception, **self._state()}
        return self._state()

    def op_broker_address(self, args: _client.Args) -> dict[str, Any]:
        """Which broker the offset RPCs go to (OFFSET-7)."""
        addrs = _client.broker_addrs(args.req("brokerAddrs"))
        before = None if args.bool("refreshed") else addrs
        return {"address": self.rules.offset_broker_address(before, addrs)}
