"""RETRY-11 — plain sends to a retry topic: SendMessageProcessor redirects a send to
"%RETRY%" + group whose reconsumeTimes reached the maximum into the group's DLQ."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from pullspec.spec.config import PERM_READ, PERM_WRITE
from pullspec.spec.errors import NullPointerError  # noqa: F401  (named by raises: lines CrossHair reads)
from pullspec.spec.retry import V47, V49, max_reconsume_times_v47, max_reconsume_times_v49
from pullspec.spec.retry_request import (
    RETRY_GROUP_TOPIC_PREFIX,
    SendBackResponse,
    _group_missing,
    dlq_topic_name,
)
from pullspec.spec.rules import rule


@attrs.frozen
class SendTarget:
    """Where a plain send is stored (RETRY-11) and how a DLQ topic is created for it."""

    topic: str
    queue_id: int
    #: The permission of the DLQ topic created for a redirected message, else None.
    dlq_perm: int | None = None


_RETRY_11 = "SendMessageProcessor.handleRetryAndDLQ, asyncSendMessage"
_RETRY_11_VERSIONS = (
    "Changed in 4.9.1/4.9.2: an absent header maxReconsumeTimes falls back to retryMaxTimes and "
    "the DLQ is READ|WRITE; 4.9.7's setDelayTimeLevel(0) there has no effect."
)


def _plain_send_target(
    topic: str,
    queue_id: int,
    group_retry_max_times: int | None,
    reconsume_times: int | None,
    resolve_max: Callable[[int], int],
    dlq_perm: int,
) -> SendTarget | SendBackResponse:
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return SendTarget(topic, queue_id)
    group = topic.removeprefix(RETRY_GROUP_TOPIC_PREFIX)
    # Verify the group exists (group_retry_max_times is None when it does not)
    if group_retry_max_times is None:
        return _group_missing(group)
    if (reconsume_times or 0) >= resolve_max(group_retry_max_times):
        return SendTarget(dlq_topic_name(group), 0, dlq_perm)
    return SendTarget(topic, queue_id)


# [4.7]
@rule("RETRY-11", source=_RETRY_11, seeds=(), profiles=V47, versions=_RETRY_11_VERSIONS)
def plain_send_target_v47(
    topic: str,
    queue_id: int,
    group_retry_max_times: int | None,
    header_max_reconsume_times: int | None,
    header_reconsume_times: int | None,
    request_version: int,
) -> SendTarget | SendBackResponse:
    """A send to "%RETRY%" + group needs the group's config and goes to "%DLQ%" + group queue 0,
    created WRITE only, when its header reconsumeTimes (absent = 0) ≥ max (RETRY-3, 4.7).

    raises: NullPointerError
    post: topic.startswith("%RETRY%") or __return__ == SendTarget(topic, queue_id)
    """
    return _plain_send_target(
        topic,
        queue_id,
        group_retry_max_times,
        header_reconsume_times,
        lambda g: max_reconsume_times_v47(header_max_reconsume_times, g, request_version),
        PERM_WRITE,
    )


# [Modified in 4.9]
@rule("RETRY-11", source=_RETRY_11, seeds=(), profiles=V49)
def plain_send_target_v49(
    topic: str,
    queue_id: int,
    group_retry_max_times: int | None,
    header_max_reconsume_times: int | None,
    header_reconsume_times: int | None,
    request_version: int,
) -> SendTarget | SendBackResponse:
    """A send to "%RETRY%" + group needs the group's config and goes to "%DLQ%" + group queue 0,
    created READ|WRITE, when its header reconsumeTimes (absent = 0) ≥ max (RETRY-3, 4.9), any
    DELAY it carries still applying.

    post: topic.startswith("%RETRY%") or __return__ == SendTarget(topic, queue_id)
    """
    return _plain_send_target(
        topic,
        queue_id,
        group_retry_max_times,
        header_reconsume_times,
        lambda g: max_reconsume_times_v49(header_max_reconsume_times, g, request_version),
        PERM_READ | PERM_WRITE,
    )
