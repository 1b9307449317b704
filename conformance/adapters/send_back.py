"""Adapter for area `send_back`: SendMessageProcessor's CONSUMER_SEND_MSG_BACK over a fresh store.

A candidate provides ``send_back(store_config, group_config, profile, clock)`` returning an object
with ``store`` (the message store it writes to), ``send_back(request, request_version=...)`` and
``last_stored`` (the record the last send-back appended, or None).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from pullspec.conformance.adapters._config import store_config
from pullspec.conformance.adapters.store import message
from pullspec.conformance.candidates import Candidate, SendBack, factory
from pullspec.conformance.jsontypes import JSONObject, JSONValue, as_array, as_given, as_object
from pullspec.spec.clock import ManualClock
from pullspec.spec.config import SubscriptionGroupConfig
from pullspec.spec.delay import delay_level_of, parse_delay_levels
from pullspec.spec.errors import PullspecError, UnsupportedError
from pullspec.spec.message import StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.results import PutMessageResult
from pullspec.spec.retry import SendBackRequest, request_version_ordinal
from pullspec.spec.ruleset import Ruleset


@attrs.define
class SendBackCase:
    """One case's send-back processor, clock, original topic and request version."""

    processor: SendBack
    clock: ManualClock
    topic: str
    request_version: int


def create(
    candidate: Candidate, config: Mapping[str, JSONValue], profile: Profile, base: Path
) -> SendBackCase:
    """A fresh send-back processor over a fresh store with the case's subscription group."""
    new_processor = factory(candidate, "send_back")
    cfg = store_config(config)
    levels = len(parse_delay_levels(cfg.message_delay_level))
    if config.get("maxDelayLevel", levels) != levels:
        raise UnsupportedError(f"maxDelayLevel {config['maxDelayLevel']} (the store has {levels})")
    group = SubscriptionGroupConfig(
        group_name=as_given(str, config["group"]),
        retry_max_times=as_given(int, config["groupRetryMaxTimes"]),
        retry_queue_nums=as_given(int, config["retryQueueNums"]),
    )
    clock = ManualClock(0)
    version = config.get("requestVersion")
    return SendBackCase(
        new_processor(cfg, group, profile, clock),
        clock,
        as_given(str, config.get("originalTopic", "T")),
        request_version_ordinal(as_given(str, version))
        if version
        else Ruleset.of(profile).client_request_version(),
    )


def _put_json(r: PutMessageResult) -> JSONObject:
    if not r.ok:
        return {"status": r.status.value}
    return {
        "status": r.status.value,
        "queueOffset": r.queue_offset,
        "wroteOffset": r.wrote_offset,
        "wroteBytes": r.wrote_bytes,
    }


def _stored_json(record: StoredMessage | None) -> JSONObject | None:
    if record is None:
        return None
    return {
        "topic": record.topic,
        "queueId": record.queue_id,
        "reconsumeTimes": record.reconsume_times,
        "tags": record.tags,
        "properties": dict(record.properties),
        "delayLevel": delay_level_of(record.properties),
    }


def apply(case: SendBackCase, op: str, args: JSONObject) -> JSONObject:
    """Run one send_back-area step and observe it in the vectors' vocabulary."""
    case.clock.advance(1)
    store = case.processor.store
    if op == "put":
        msgs = [message(case.topic, as_object(m)) for m in as_array(args["msgs"])]
        results = store.put_messages(msgs)
        return {
            "results": [_put_json(r) for r in results],
            "commitLogMinOffset": store.get_min_phy_offset(),
            "commitLogMaxOffset": store.get_max_phy_offset(),
        }
    if op == "send_back":
        max_times = args.get("maxReconsumeTimes")
        try:
            request = SendBackRequest(
                offset=as_given(int, args["originalCommitLogOffset"]),
                group=as_given(str, args["group"]),
                delay_level=as_given(int, args["delayLevel"]),
                origin_topic=case.topic,
                max_reconsume_times=None if max_times is None else as_given(int, max_times),
            )
            response = case.processor.send_back(request, request_version=case.request_version)
        except UnsupportedError:
            raise  # the candidate cannot run this step: UNSUPPORTED, not an observed error
        except PullspecError as exc:
            return {"error": exc.java_exception or exc.kind.value}
        return {
            "code": response.code.name,
            "remark": response.remark,
            "stored": _stored_json(case.processor.last_stored),
        }
    raise UnsupportedError(f"send_back op {op}")
