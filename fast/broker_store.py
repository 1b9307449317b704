"""Opening a store directory that a RocketMQ 4.x broker wrote, read-only, in one call.

`MmapMessageStore` needs the broker's file sizes (`mappedFileSizeCommitLog`,
`mappedFileSizeConsumeQueue`: it refuses a file whose length differs, as RocketMQ's
`MappedFileQueue.load` does) and its role. `broker_file_sizes` reads the sizes from the files
themselves — RocketMQ creates every commit-log and consume-queue file at its full configured
size — and `open_broker_store` opens the directory read-only with them and the role given.
"""

from __future__ import annotations

import os
from pathlib import Path

from pullspec.fast.mapped import list_mapped_files
from pullspec.fast.store import MmapMessageStore
from pullspec.spec.clock import Clock, SystemClock
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError
from pullspec.spec.evolve import evolve
from pullspec.spec.profiles import Profile
from pullspec.spec.status import BrokerRole


def broker_file_sizes(store_dir: str | Path) -> tuple[int | None, int | None]:
    """(commit-log file size, consume-queue file size) in bytes, read from the first file of
    each kind in `store_dir`; None for a kind with no file yet.

    >>> broker_file_sizes("../shared/stores/basic")
    (16384, 400)
    """
    root = Path(store_dir)
    if not root.is_dir():
        raise InvalidArgumentError("store_dir", str(store_dir), "no such directory")
    commit_log = list_mapped_files(root / "commitlog")
    queue_files = [
        files[0][1]
        for topic in sorted((root / "consumequeue").glob("*"))
        for queue in sorted(topic.glob("*"))
        if (files := list_mapped_files(queue))
    ]
    return (
        os.path.getsize(commit_log[0][1]) if commit_log else None,
        os.path.getsize(queue_files[0]) if queue_files else None,
    )


def open_broker_store(
    store_dir: str | Path,
    *,
    broker_role: BrokerRole | str = BrokerRole.ASYNC_MASTER,
    offset_check_in_slave: bool = False,
    profile: Profile | str = Profile.V4_9,
    clock: Clock | None = None,
    config: StoreConfig | None = None,
) -> MmapMessageStore:
    """Open a RocketMQ 4.x broker's store directory read-only, answering pulls as that broker
    would: the file sizes come from the files (`broker_file_sizes`), the role and
    offsetCheckInSlave from the arguments (a slave's answers differ: STORE-6, STORE-16), every
    other setting from `config` (RocketMQ's defaults when None). Nothing is written: recovery
    runs in memory. Close it (or use `with`) to unmap the files.

    >>> with open_broker_store("../shared/stores/basic", broker_role="SLAVE") as store:
    ...     store.broker_role.value, store.get_max_offset_in_queue("TopicA", 0)
    ('SLAVE', 118)
    """
    if isinstance(broker_role, str):
        if broker_role not in BrokerRole.__members__:
            names = ", ".join(BrokerRole.__members__)
            raise InvalidArgumentError("broker_role", broker_role, f"expected one of {names}")
        role = BrokerRole[broker_role]
    else:
        role = broker_role
    if not isinstance(role, BrokerRole):
        raise InvalidTypeError("broker_role", broker_role, "BrokerRole or its name")
    if not isinstance(offset_check_in_slave, bool):
        raise InvalidTypeError("offset_check_in_slave", offset_check_in_slave, "bool")
    base = StoreConfig() if config is None else config
    commit_log, queue = broker_file_sizes(store_dir)
    sized = evolve(
        base,
        mapped_file_size_commit_log=commit_log or base.mapped_file_size_commit_log,
        mapped_file_size_consume_queue=queue or base.mapped_file_size_consume_queue,
        broker_role=role,
        offset_check_in_slave=offset_check_in_slave,
    )
    return MmapMessageStore(
        store_dir, sized, Profile.parse(profile), clock or SystemClock(), read_only=True
    )
