"""RETRY-7/RETRY-8 — delay levels and the schedule-topic rewrite the store applies at put."""

from __future__ import annotations

from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.layout import is_dispatched_type
from pullspec.spec.message import (
    PROPERTY_DELAY,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    Properties,
)
from pullspec.spec.rules import rule

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
SEED_004 = ("004_60fc00b6c6a023ff.txt",)
_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
#: A delivery time for an unknown level: one second after the store time.
UNKNOWN_LEVEL_DELAY_MS = 1_000


@rule("RETRY-7", source="ScheduleMessageService.parseDelayLevel", seeds=SEED_004)
def parse_delay_levels(message_delay_level: str) -> tuple[int, ...]:
    """messageDelayLevel is split on single spaces into levels 1, 2, …, each a number followed by
    a unit s, m, h or d; item k is level k and the level count is maxDelayLevel.

    raises: InvalidArgumentError
    post: all(d >= 0 for d in __return__)
    """
    levels: list[int] = []
    for item in message_delay_level.split(" "):
        # The item is a number with a known unit.
        unit = _UNITS.get(item[-1:])
        if unit is None or not item[:-1].isdigit() or not item[:-1].isascii():
            raise InvalidArgumentError(
                "message_delay_level", message_delay_level, f"bad item {item!r}"
            )
        levels.append(int(item[:-1]) * unit)
    return tuple(levels)


def delay_level_of(properties: Properties) -> int:
    """The DELAY property as an int (0 when absent), as Message.getDelayTimeLevel reads it."""
    value = dict(properties).get(PROPERTY_DELAY)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        raise InvalidArgumentError("DELAY", value, "not an integer delay level") from None


@rule(
    "RETRY-8",
    source="CommitLog.asyncPutMessage; ScheduleMessageService.delayLevel2QueueId",
    seeds=SEED_004,
)
def delay_rewrite(
    topic: str, queue_id: int, properties: Properties, sys_flag: int, max_delay_level: int
) -> tuple[str, int, Properties, int] | None:
    """A non-transactional or committed message with DELAY > 0 is stored in SCHEDULE_TOPIC_XXXX,
    queue level − 1, with DELAY clamped to maxDelayLevel and its real topic and queue kept as
    REAL_TOPIC and REAL_QID; the answer is (topic, queue id, properties, level) or None.

    raises: InvalidArgumentError
    pre: max_delay_level > 0
    post: __return__ is None or 1 <= __return__[3] <= max_delay_level
    post: __return__ is None or __return__[1] == __return__[3] - 1
    """
    level = delay_level_of(properties)
    # Check that the message is to be delayed at all.
    if level <= 0 or not is_dispatched_type(sys_flag):
        return None
    level = min(level, max_delay_level)
    rewritten = {**dict(properties), PROPERTY_DELAY: str(level)}
    rewritten[PROPERTY_REAL_TOPIC] = topic
    rewritten[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    return (SCHEDULE_TOPIC, level - 1, tuple(rewritten.items()), level)


def deliver_timestamp(level: int, store_timestamp: int, levels: tuple[int, ...]) -> int:
    """The consume-queue tags code of a schedule-topic entry: store time + the level's delay, or
    + 1000 ms for an unknown level (RETRY-8, FILTER-1)."""
    if 1 <= level <= len(levels):
        return store_timestamp + levels[level - 1]
    return store_timestamp + UNKNOWN_LEVEL_DELAY_MS
