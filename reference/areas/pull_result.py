"""The reference driver of area `pull_result` (vocabulary: conformance.adapters.pull_result, docs/protocol.md)."""

from __future__ import annotations

from typing import Any

from pullspec.reference.areas import _vocab as _client
from pullspec.spec import code as codes
from pullspec.spec import pull_request, pull_result
from pullspec.spec.client_errors import MQBrokerError
from pullspec.spec.profiles import Profile
from pullspec.spec.status import PullStatus, ResponseCode

#: The vector area this module serves.
AREA = "pull_result"


class _PullError(Exception):
    """Any other exception the pull RPC reports (RemotingTimeoutException, …)."""


class Driver(_client.DriverBase):
    """The reference driver: spec.pull_result and the response-code mapping."""

    area = AREA

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
        handling = pull_result.on_success(
            result, args.int("prevRequestOffset"), sub, args.int("msgCount", 0), self.consumer
        )
        fix_up = handling.fix_up
        update = handling.offset_update
        return {
            "nextOffset": handling.next_offset,
            "messages": [_client.message_json(m) for m in handling.messages],
            "putDespiteDrop": bool(handling.messages)
            and pull_result.stores_despite_drop(args.bool("dropped", False)),
            "correctTagsOffset": handling.correct_tags_offset,
            "offsetUpdate": None
            if update is None
            else {"offset": update.offset, "increaseOnly": update.increase_only},
            "reenqueue": _client.action_json(handling.reenqueue),
            "dropProcessQueue": handling.drop_process_queue,
            "fixUp": None
            if fix_up is None
            else {
                **_client.value_json(fix_up),
                "reachesStorage": pull_result.fix_up_reaches_storage(self.consumer.message_model),
            },
            "bugWarning": handling.bug_warning,
            "pullFromWhichNode": handling.pull_from_which_node,
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
        handling = pull_result.on_exception(
            exc, str(args.req("topic")), self.consumer, self.profile
        )
        return {
            "reenqueue": _client.action_json(handling.delay),
            "logWarning": handling.log_warning,
        }

    def op_response(self, args: _client.Args) -> dict[str, Any]:
        """processPullResponse's code mapping (REQ-12, CODE-13)."""
        number = args.int("code")
        try:
            status = pull_request.pull_status_for_response_code(number)
        except MQBrokerError as exc:
            return {"exception": MQBrokerError.java_exception, "code": exc.code}
        # CODE-13 states the same table from the broker's side; both must agree.
        known = codes.client_pull_status(ResponseCode(number))
        return {"pullStatus": status.value, "brokerSideStatus": known.value if known else None}
