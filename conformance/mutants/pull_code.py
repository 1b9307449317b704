"""Mutants of the broker's pull path (ReferenceBroker over the reference store); seen by the
pull_code area."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pullspec.conformance.mutants._patch import Candidate, mutate, wrap
from pullspec.conformance.mutants.base import Mutant
from pullspec.spec import code
from pullspec.spec.clock import Clock
from pullspec.spec.config import BrokerConfig, StoreConfig
from pullspec.spec.message import Properties
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole, GetMessageStatus, ResponseCode

if TYPE_CHECKING:
    from pullspec.reference.broker import ReferenceBroker


def _broker_mutant(
    name: str, rule: str, doc: str, patches: Mapping[str, Mapping[str, object]]
) -> Mutant:
    def build() -> Candidate:
        from pullspec.reference.broker import ReferenceBroker
        from pullspec.reference.store import ReferenceMessageStore

        broker_class = mutate(ReferenceBroker, patches)

        def broker(
            s: StoreConfig, b: BrokerConfig, profile: Profile, clock: Clock
        ) -> ReferenceBroker:
            store = ReferenceMessageStore(config=s, profile=profile, clock=clock)
            return broker_class(store=store, config=b, profile=profile, clock=clock)

        return Candidate(name, broker=broker)

    return Mutant(name, rule, ("pull_code",), doc, build)


def _event_with_spaces(
    f: Callable[[str, str, str, int, int, int], tuple[bytes, Properties]],
    group: str,
    topic: str,
    broker_name: str,
    queue_id: int,
    offset_request: int,
    offset_new: int,
) -> tuple[bytes, Properties]:
    body, properties = f(group, topic, broker_name, queue_id, offset_request, offset_new)
    spaced = body.replace(b'":', b'": ').replace(b',"', b', "')  # json.dumps' separators
    return spaced, properties


def _code(
    status: GetMessageStatus, replaced: ResponseCode
) -> Callable[[GetMessageStatus, int], ResponseCode]:
    """status_to_response_code answering `replaced` for `status`."""

    def change(
        f: Callable[[GetMessageStatus, int], ResponseCode], s: GetMessageStatus, offset: int, /
    ) -> ResponseCode:
        return replaced if s is status else f(s, offset)

    return wrap(code.status_to_response_code, change)


def _queue_id_check_off_by_one(
    f: Callable[..., ResponseCode | None],
    /,
    *,
    broker_permission: int,
    group_exists: bool,
    consume_enable: bool,
    topic_exists: bool,
    topic_permission: int,
    queue_id: int,
    read_queue_nums: int,
) -> ResponseCode | None:
    return f(
        broker_permission=broker_permission, group_exists=group_exists,
        consume_enable=consume_enable, topic_exists=topic_exists,
        topic_permission=topic_permission, queue_id=queue_id,
        read_queue_nums=read_queue_nums + 1,
    )  # fmt: skip


def _slave_retry_sticks(
    role: BrokerRole, slave_read_enable: bool, status: GetMessageStatus, offset: int
) -> ResponseCode:
    from pullspec.spec.code import status_to_response_code

    if role is BrokerRole.SLAVE and not slave_read_enable:
        return ResponseCode.PULL_RETRY_IMMEDIATELY  # the overwrite by the status switch is lost
    return status_to_response_code(status, offset)


MUTANTS: tuple[Mutant, ...] = (
    _broker_mutant(
        "empty-queue-not-found-anywhere",
        "CODE-8",
        "An empty queue answers PULL_NOT_FOUND at every offset, not only at 0.",
        {"pullspec.spec.code": {"empty_queue_code": lambda offset: ResponseCode.PULL_NOT_FOUND}},
    ),
    _broker_mutant(
        "slave-retry-sticks",
        "CODE-9",
        "A slave without slave reading answers PULL_RETRY_IMMEDIATELY whatever the status.",
        {"pullspec.spec.code": {"slave_code": _slave_retry_sticks}},
    ),
    _broker_mutant(
        "slave-answers-offset-moved",
        "CODE-10",
        "A slave without offsetCheckInSlave still answers PULL_OFFSET_MOVED.",
        {
            "pullspec.spec.code": {
                "offset_moved_outcome": lambda role, check, suggestion, broker_id: (
                    ResponseCode.PULL_OFFSET_MOVED,
                    suggestion,
                    True,
                )
            }
        },
    ),
    _broker_mutant(
        "offset-moved-event-spaced",
        "CODE-15",
        "The OFFSET_MOVED_EVENT body is JSON with spaces after ':' and ',' (the record is longer).",
        {
            "pullspec.spec.code": {
                "offset_moved_event": wrap(code.offset_moved_event, _event_with_spaces)
            }
        },
    ),
    _broker_mutant(
        "overflow-one-retries",
        "CODE-7",
        "OFFSET_OVERFLOW_ONE answers PULL_RETRY_IMMEDIATELY instead of PULL_NOT_FOUND.",
        {
            "pullspec.spec.code": {
                "status_to_response_code": _code(
                    GetMessageStatus.OFFSET_OVERFLOW_ONE, ResponseCode.PULL_RETRY_IMMEDIATELY
                )
            }
        },
    ),
    _broker_mutant(
        "queue-id-check-off-by-one",
        "CODE-2",
        "The queue-id check lets queueId == readQueueNums through to the store.",
        {
            "pullspec.spec.code": {
                "pre_store_check": wrap(code.pre_store_check, _queue_id_check_off_by_one)
            }
        },
    ),
)
