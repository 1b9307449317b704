"""The reference driver of area `pull_result` (vocabulary: conformance.adapters.pull_result, docs/protocol.md)."""

from __future__ import annotations

from typing import Any, ClassVar

from pullspec.reference.areas import _vocab as _client
from pullspec.reference.areas import _wiring
from pullspec.reference.pull_service import PullRequest
from pullspec.spec import code as codes
from pullspec.spec import pull_result
from pullspec.spec.client_errors import MQBrokerError
from pullspec.spec.message import MessageQueue
from pullspec.spec.profiles import Profile
from pullspec.spec.status import PullStatus, ResponseCode

#: The vector area this module serves.
AREA = "pull_result"


class _PullError(Exception):
    """Any other exception the pull RPC reports (RemotingTimeoutException, …)."""


class Driver(_client.DriverBase):
    """A push consumer's PullCallback: every op is one callback of a fresh pull on a running
    ReferencePushConsumer (its process queue, consume service and offset store stand-ins)."""

    area = AREA
    #: The reference classes this driver builds (a mutant replaces one).
    classes: ClassVar[_wiring.Classes] = _wiring.REFERENCE

    def __init__(self, config: dict[str, Any], profile: Profile) -> None:
        super().__init__(config, profile)
        self.consumer = _client.consumer_config(config)

    def op_on_success(self, args: _client.Args) -> dict[str, Any]:
        """PullCallback.onSuccess for one result (RESULT-1 … RESULT-12, RESULT-15)."""
        raw = args.get("result")
        result = None
        if raw is not None:
            result = pull_result.PullResult(
                pull_status=_client.enum_of(PullStatus, raw["pullStatus"], "pullStatus"),
                next_begin_offset=raw["nextBeginOffset"],
                min_offset=raw.get("minOffset", 0),
                max_offset=raw.get("maxOffset", 0),
                msg_found_list=[_client.message(m) for m in raw.get("msgs", [])],
                suggest_which_broker_id=raw.get("suggestWhichBrokerId", 0),
            )
        sub = _client.subscription(args.get("subscription") or {})
        assert sub is not None
        rig = _wiring.PushConsumerRig(self.consumer, self.profile, classes=self.classes)
        dropped = args.bool("dropped", False)
        rig.pq.read({"msgCount": args.int("msgCount", 0), "dropped": dropped})
        rig.request.next_offset = args.int("prevRequestOffset")
        rig.consumer.process_pull_result(rig.request, result, sub)
        outcome = rig.consumer.outcomes[-1] if rig.consumer.outcomes else None
        handling = outcome.handling if outcome is not None else None
        submitted = rig.consume_service.submitted
        messages = submitted[0][0] if submitted else ()
        updates = list(rig.offset_store.updates)
        fix_up = None
        if handling is not None and handling.fix_up is not None:
            # Let the fix-up task run: what it writes, persists and removes, and when.
            rig.offset_store.updates.clear()
            before = rig.clock.now_ms()
            rig.scheduler.run_for(handling.fix_up.delay_ms)
            (mq, offset, increase_only), *_ = rig.offset_store.updates
            fix_up = {
                "offset": offset,
                "delayMs": rig.clock.now_ms() - before,
                "increaseOnly": increase_only,
                "persist": mq in rig.offset_store.persisted,
                "removeProcessQueue": mq in rig.hooks.removed,
                "reachesStorage": pull_result.fix_up_reaches_storage(self.consumer.message_model),
            }
        return {
            "nextOffset": rig.request.next_offset,
            "messages": [_client.message_json(m) for m in messages],
            "putDespiteDrop": bool(rig.pq.puts),
            "correctTagsOffset": handling is not None and handling.correct_tags_offset,
            "offsetUpdate": None
            if not updates
            else {"offset": updates[0][1], "increaseOnly": updates[0][2]},
            "reenqueue": _client.action_json(outcome.reenqueue if outcome else None),
            "dropProcessQueue": rig.pq.drops > 0,
            "fixUp": fix_up,
            "bugWarning": any("[BUG]" in text for _, text in rig.consumer.log),
            "pullFromWhichNode": rig.consumer.pull_from_which_node.get(rig.request.message_queue),
        }

    def op_on_success_throws(self, args: _client.Args) -> dict[str, Any]:
        """An exception inside onSuccess reaches onException (RESULT-14)."""
        copies = pull_result.copies_after_on_success_exception(args.bool("reenqueuedBeforeThrow"))
        return {"copies": copies}

    def op_on_exception(self, args: _client.Args) -> dict[str, Any]:
        """PullCallback.onException (RESULT-13)."""
        error = args.req("error")
        exc: BaseException = (
            MQBrokerError(error["code"])
            if error.get("kind") == MQBrokerError.java_exception
            else _PullError(error.get("kind"))
        )
        rig = _wiring.PushConsumerRig(self.consumer, self.profile, classes=self.classes)
        rig.request = PullRequest(
            _wiring.GROUP, MessageQueue(str(args.req("topic")), "b", 0), rig.pq, 0
        )
        rig.consumer.process_pull_exception(rig.request, exc)
        outcome = rig.consumer.outcomes[-1]
        return {
            "reenqueue": _client.action_json(outcome.reenqueue),
            "logWarning": any(level == "warn" for level, _ in rig.consumer.log),
        }

    def op_response(self, args: _client.Args) -> dict[str, Any]:
        """processPullResponse's code mapping (REQ-12, CODE-13)."""
        number = args.int("code")
        try:
            status = self.rules.pull_status_for_response_code(number, None, "")
        except MQBrokerError as exc:
            return {"exception": MQBrokerError.java_exception, "code": exc.code}
        # CODE-13 states the same table from the broker's side; both must agree.
        known = codes.client_pull_status(ResponseCode(number))
        return {"pullStatus": status.value, "brokerSideStatus": known.value if known else None}
