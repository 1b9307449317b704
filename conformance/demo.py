"""`pullspec demo`: a short tour of the broker's pull answers on the reference model."""

from __future__ import annotations

from collections.abc import Callable

from pullspec.reference.broker import ReferenceBroker
from pullspec.reference.store import ReferenceMessageStore
from pullspec.spec.clock import ManualClock
from pullspec.spec.code import FLAG_SUBSCRIPTION, FLAG_SUSPEND, PullMessageRequest, PullResponse
from pullspec.spec.config import BrokerConfig, StoreConfig
from pullspec.spec.message import BrokerInnerMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole


def _row(label: str, offset: int, sub: str, r: PullResponse | None) -> str:
    if r is None:
        return f"  {label:<34} offset {offset:>3} {sub:<7} -> held for long polling"
    status = r.status.value if r.status else "-"
    return (
        f"  {label:<34} offset {offset:>3} {sub:<7} -> {r.code.name:<22} {status:<21} "
        f"next {r.next_begin_offset!s:>3}  min {r.min_offset} max {r.max_offset}  "
        f"msgs {r.msg_offsets}"
    )


def run(profile: Profile = Profile.V4_9, echo: Callable[[str], None] = print) -> None:
    """Put messages into a tiny reference store and show how the broker answers pulls."""
    clock = ManualClock(1_000_000)
    store = ReferenceMessageStore(
        StoreConfig(
            mapped_file_size_commit_log=1024,
            mapped_file_size_consume_queue=80,
            file_reserved_time=0,
        ),
        profile,
        clock=clock,
    )
    broker = ReferenceBroker(store, BrokerConfig(), profile, clock=clock)
    broker.create_topic("T", 1)
    for i in range(12):
        broker.send_message(
            BrokerInnerMessage(
                topic="T", queue_id=0, body=bytes(16), properties={"TAGS": "AB"[i % 2]}
            )
        )
    echo(f"profile {profile.value}: 12 messages (tags A,B,A,B,...) in queue T/0, 1 KiB commit-log")
    echo(
        "files, 4-entry consume-queue files; commit log "
        f"{store.get_min_phy_offset()}…{store.get_max_phy_offset()}"
    )

    def pull(label: str, offset: int, sub: str = "*", n: int = 32, suspend: bool = False) -> None:
        flag = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend else 0)
        _, r = broker.pull_message(
            PullMessageRequest(
                consumer_group="G",
                topic="T",
                queue_id=0,
                queue_offset=offset,
                max_msg_nums=n,
                sys_flag=flag,
                subscription=sub,
            )
        )
        echo(_row(label, offset, sub, r))

    echo("pulls on the master:")
    pull("below min (-1)", -1)
    pull("from 0, batch 3", 0, n=3)
    pull("tag A from 1 (never crosses a file)", 1, "A")
    pull("caught up (== max)", 12)
    pull("past max", 20)
    clock.advance(1)
    store.delete_expired_files()
    echo(f"after expiry: commit log min {store.get_min_phy_offset()}")
    pull("expired offset 0", 0)
    store.set_role(BrokerRole.SLAVE, False)
    pull("same on a slave (no correction)", 0)
    store.set_role(BrokerRole.ASYNC_MASTER, False)
    echo("long polling on the fake clock:")
    pull("caught up, suspend flag", 12, suspend=True)
    clock.advance(3_000)
    broker.send_message(
        BrokerInnerMessage(topic="T", queue_id=0, body=b"x", properties={"TAGS": "A"})
    )
    for request_id, r in broker.drain_responses():
        echo(
            f"  +3000 ms a message arrives: held pull #{request_id} answered {r.code.name} {r.msg_offsets}"
        )
    pull("caught up again, suspend flag", 13, suspend=True)
    clock.advance(15_000)
    broker.run_hold_checks()
    for request_id, r in broker.drain_responses():
        echo(f"  +15000 ms, next hold check: pull #{request_id} answered {r.code.name} (timeout)")
