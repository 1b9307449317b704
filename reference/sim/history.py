"""The history of a whole-system simulation: one typed event per produce, pull, delivery, consume
outcome, send-back, commit, lock and fault, in the order they happened, and its JSON Lines form.

A message is identified across copies by its key (the producer's UNIQ_KEY property, which the
broker's and the client's send-back paths copy into every retry and DLQ copy, RETRY-6, CONC-11);
a copy by (topic, queue_id, offset). A client is named by incarnation ("c1#2": client c1 after
its second start) because a restart loses everything in memory, and a ProcessQueue by a number
unique in the run (`pq`), because a re-created queue starts afresh (REBAL-10).

The checker (`reference.sim.checker`) reads nothing else, so a history written by another
implementation (or a Spark campaign) can be checked the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, ClassVar, TypedDict

import attrs

#: A queue named in histories: "<topic>:<queue_id>".
QueueName = str


def queue_name(topic: str, queue_id: int) -> QueueName:
    """The name a history gives a queue: "<topic>:<queue_id>"."""
    return f"{topic}:{queue_id}"


def split_queue_name(name: QueueName) -> tuple[str, int]:
    """(topic, queue_id) of a name made by `queue_name` (topics may contain ':')."""
    topic, _, qid = name.rpartition(":")
    return topic, int(qid)


@attrs.frozen(kw_only=True)
class Event:
    """Something that happened at virtual time `at` (milliseconds)."""

    type: ClassVar[str] = "Event"
    at: int


@attrs.frozen(kw_only=True)
class QueueEvent(Event):
    """Something that happened to ProcessQueue `pq` (of queue `queue`) of client incarnation
    `client`: these fields come first in each such event."""

    client: str
    pq: int
    queue: QueueName


class QueueEventFields(TypedDict):
    """A QueueEvent's fields, to be spread into one: ``Assigned(**where, start=5)``."""

    at: int
    client: str
    pq: int
    queue: QueueName


@attrs.frozen(kw_only=True)
class Setup(Event):
    """What the run composed: the consumer group, its topics and the settings the checker reads
    (the client lease (PQ-15), the group's retry queue count (RETRY-1))."""

    type: ClassVar[str] = "Setup"
    profile: str
    group: str
    topics: tuple[str, ...]
    orderly: bool
    consumers: int
    retry_queue_nums: int = 1
    client_lock_ms: int = 30_000
    broker_lock_ms: int = 60_000
    seed: int = 0
    faults: tuple[str, ...] = ()
    #: What the liveness check and the budgets read (RocketMQ's defaults when absent): the
    #: retries before the DLQ (RETRY-4), the flow-control bounds (FLOW-6, FLOW-8), the persist
    #: interval (OFFSET-8) and the number of the topic's queues.
    max_reconsume_times: int = 16
    pull_threshold_for_queue: int = 1000
    pull_batch_size: int = 32
    max_span: int = 2000
    persist_interval_ms: int = 5000
    queues: int = 4


@attrs.frozen(kw_only=True)
class Produce(Event):
    """A producer's send the master acknowledged (SEND_OK) at (topic, queue_id, offset)."""

    type: ClassVar[str] = "Produce"
    key: str
    topic: str
    queue_id: int
    offset: int
    #: Every listener call with this message fails (the workload's poison message), so it must
    #: end in the dead-letter queue.
    poison: bool = False


@attrs.frozen(kw_only=True)
class Stored(Event):
    """A broker-made copy of message `key`: a send-back's retry copy, a schedule-topic copy, a
    delayed copy delivered to its real topic (RETRY-9) or a dead letter (RETRY-4)."""

    type: ClassVar[str] = "Stored"
    key: str
    topic: str
    queue_id: int
    offset: int
    reconsume_times: int
    #: For a schedule-topic copy, the topic it is delivered to when due (REAL_TOPIC, RETRY-8).
    real_topic: str = ""


@attrs.frozen(kw_only=True)
class PullSent(QueueEvent):
    """A pull put on the wire by `client` for ProcessQueue `pq`; commit_offset −1 when the
    commit flag is clear (REQ-2, REQ-8)."""

    type: ClassVar[str] = "PullSent"
    offset: int
    broker_id: int
    commit_offset: int


@attrs.frozen(kw_only=True)
class PullDelayed(QueueEvent):
    """A pull attempt delayed for `reason` (a PULLQ-9 row: FLOW-4 PAUSED, FLOW-6/7/8 flow
    control, FLOW-11 NOT_LOCKED …) by `ms`; only the first of a run of attempts of one
    ProcessQueue delayed for the same reason is recorded."""

    type: ClassVar[str] = "PullDelayed"
    reason: str
    ms: int


@attrs.frozen(kw_only=True)
class PullAnswered(QueueEvent):
    """The PullCallback's outcome: a PullStatus name, or None for onException."""

    type: ClassVar[str] = "PullAnswered"
    status: str | None
    next_offset: int
    offsets: tuple[int, ...] = ()


@attrs.frozen(kw_only=True)
class Delivered(QueueEvent):
    """Messages handed to a listener from `start` (== at) to `end` (orderly calls take time;
    concurrent calls take none)."""

    type: ClassVar[str] = "Delivered"
    offsets: tuple[int, ...]
    keys: tuple[str, ...]
    reconsume_times: tuple[int, ...]
    orderly: bool
    end: int


@attrs.frozen(kw_only=True)
class Consumed(QueueEvent):
    """A listener call's outcome: the status the service acted on and whether it means the
    messages were consumed (CONSUME_SUCCESS, or orderly SUCCESS/COMMIT)."""

    type: ClassVar[str] = "Consumed"
    offsets: tuple[int, ...]
    keys: tuple[str, ...]
    status: str
    success: bool


@attrs.frozen(kw_only=True)
class SentBack(Event):
    """A hand-back of one consumed copy: `via` "rpc" (CONSUMER_SEND_MSG_BACK), "fallback" (the
    internal producer, CONC-11), "cleaner" (PQ-18) or "orderly" (ORDER-15); `ok` is what the
    client was told; `stored` the topic a copy went to (None when nothing was stored)."""

    type: ClassVar[str] = "SentBack"
    client: str
    key: str
    queue: QueueName
    offset: int
    via: str
    ok: bool
    stored: str | None


@attrs.frozen(kw_only=True)
class ClientCommit(Event):
    """An update of a client's in-memory offset (OFFSET-2) by the writer `rule` (OFFSET-3)."""

    type: ClassVar[str] = "ClientCommit"
    client: str
    queue: QueueName
    offset: int
    increase_only: bool
    before: int | None
    after: int
    rule: str


@attrs.frozen(kw_only=True)
class BrokerCommit(Event):
    """The master's consumer offset of a queue replaced (COMMIT-1) through `via` "pull"
    (COMMIT-2), "persist" (COMMIT-3, OFFSET-6) or "fix-up" (RESULT-10's persist)."""

    type: ClassVar[str] = "BrokerCommit"
    client: str
    queue: QueueName
    offset: int
    before: int | None
    via: str


@attrs.frozen(kw_only=True)
class Assigned(QueueEvent):
    """Rebalance created ProcessQueue `pq` with its PullRequest at `start` (REBAL-10)."""

    type: ClassVar[str] = "Assigned"
    start: int


@attrs.frozen(kw_only=True)
class Dropped(QueueEvent):
    """ProcessQueue `pq` was dropped (PQ-14): `reason` names the rule — "PQ-16" when it was
    pull-expired and rebalance re-created its queue at once (REBAL-9), else "PQ-14"."""

    type: ClassVar[str] = "Dropped"
    reason: str


@attrs.frozen(kw_only=True)
class CursorMoved(QueueEvent):
    """A PullRequest's nextOffset moved back (FLOW-12's first-lock correction)."""

    type: ClassVar[str] = "CursorMoved"
    before: int
    after: int
    rule: str


@attrs.frozen(kw_only=True)
class Cached(QueueEvent):
    """How many messages a ProcessQueue holds after a put (cached or taken, whatever msgCount
    says), with the flow-control bound then in force."""

    type: ClassVar[str] = "Cached"
    count: int
    threshold: int
    batch: int


@attrs.frozen(kw_only=True)
class ClientLock(QueueEvent):
    """A client's ProcessQueue lock flag set or cleared (REBAL-19 … REBAL-21)."""

    type: ClassVar[str] = "ClientLock"
    locked: bool


@attrs.frozen(kw_only=True)
class Lease(Event):
    """The broker lock of a queue (LEASE): "grant", "refuse", "release" or "expire" (the lease
    found expired when someone asked, LEASE-3)."""

    type: ClassVar[str] = "Lease"
    client: str
    queue: QueueName
    action: str


@attrs.frozen(kw_only=True)
class Truncated(Event):
    """Commit-log expiry deleted every record of a queue below `min_offset` (STORE-19)."""

    type: ClassVar[str] = "Truncated"
    queue: QueueName
    min_offset: int


@attrs.frozen(kw_only=True)
class Fault(Event):
    """An injected fault step: `fault` is its kind, `target` what it hit."""

    type: ClassVar[str] = "Fault"
    fault: str
    target: str
    detail: str = ""


@attrs.frozen(kw_only=True)
class Quiet(Event):
    """The quiet tail begins: no more faults and no more produces; the run goes on until
    `until` (or until every message is consumed or dead-lettered), then ends with a Snapshot
    against which liveness is judged. `started` names consumers the tail started because none
    was alive."""

    type: ClassVar[str] = "Quiet"
    until: int
    started: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Snapshot(Event):
    """The end of a run: the master's committed and max offsets per queue, and each live
    client's cached offsets per queue (what is still pending)."""

    type: ClassVar[str] = "Snapshot"
    committed: dict[QueueName, int]
    max_offsets: dict[QueueName, int]
    cached: dict[str, dict[QueueName, tuple[int, ...]]]
    scheduled: tuple[str, ...] = ()


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        Setup,
        Produce,
        Stored,
        PullSent,
        PullDelayed,
        PullAnswered,
        Delivered,
        Consumed,
        SentBack,
        ClientCommit,
        BrokerCommit,
        Assigned,
        Dropped,
        CursorMoved,
        Cached,
        ClientLock,
        Lease,
        Truncated,
        Fault,
        Quiet,
        Snapshot,
    )
}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _typed(value: Any) -> Any:
    # JSON has no tuples: every list of a history is a tuple in its event.
    if isinstance(value, list):
        return tuple(_typed(v) for v in value)
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    return value


def to_json(event: Event) -> dict[str, Any]:
    """The JSON object of one event: "type" first, then its fields."""
    out: dict[str, Any] = {"type": event.type}
    for field in attrs.fields(type(event)):
        out[field.name] = _plain(getattr(event, field.name))
    return out


def from_json(data: dict[str, Any]) -> Event:
    """The event a `to_json` object describes; ValueError for an unknown type or field."""
    fields = dict(data)
    name = fields.pop("type", None)
    cls = EVENT_TYPES.get(str(name))
    if cls is None:
        raise ValueError(f"unknown history event type {name!r}")
    try:
        return cls(**{k: _typed(v) for k, v in fields.items()})
    except TypeError as exc:
        raise ValueError(f"bad {name} event: {exc}") from exc


def dump_lines(events: Iterable[Event], out: IO[str]) -> int:
    """Write `events` as JSON Lines (one compact object per line); return how many."""
    count = 0
    for event in events:
        out.write(json.dumps(to_json(event), separators=(",", ":")))
        out.write("\n")
        count += 1
    return count


def load_lines(lines: Iterable[str]) -> Iterator[Event]:
    """Read JSON Lines back into events (blank lines are skipped)."""
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                yield from_json(json.loads(line))
            except (ValueError, json.JSONDecodeError) as exc:
                raise ValueError(f"history line {number}: {exc}") from exc


def write_history(events: Iterable[Event], path: str | Path) -> int:
    """Write a history file (JSON Lines); return the number of events."""
    with Path(path).open("w", encoding="utf-8") as out:
        return dump_lines(events, out)


def read_history(path: str | Path) -> list[Event]:
    """Read a history file written by `write_history`."""
    with Path(path).open(encoding="utf-8") as f:
        return list(load_lines(f))


@attrs.define
class History:
    """An append-only history that counts events by type; with `keep` False it only counts (a
    long run whose history is not written need not hold it)."""

    keep: bool = True
    events: list[Event] = attrs.Factory(list)
    counts: dict[str, int] = attrs.Factory(dict)

    def add(self, event: Event) -> None:
        """Append one event (events arrive in the order they happened)."""
        self.counts[event.type] = self.counts.get(event.type, 0) + 1
        if self.keep:
            self.events.append(event)

    def __len__(self) -> int:
        return sum(self.counts.values())

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def summary(self) -> dict[str, int]:
        """Events per type, in EVENT_TYPES order, types that never occurred left out."""
        return {name: self.counts[name] for name in EVENT_TYPES if name in self.counts}
