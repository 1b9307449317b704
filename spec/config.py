"""Configuration with RocketMQ's defaults: the store (MessageStoreConfig), the broker
(BrokerConfig), subscription groups (SubscriptionGroupConfig) and topics (TopicConfig)."""

from __future__ import annotations

from typing import Any

import attrs

from pullspec.spec.errors import InvalidArgumentError, require_int
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.status import BrokerRole

GIB = 1 << 30
#: fileReservedTime is in hours; the clean service multiplies it by 60 × 60 × 1000
#: (DefaultMessageStore.CleanCommitLogService.deleteExpiredFiles).
HOUR_MS = 3_600_000
DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def _positive(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    require_int(attribute.name, value)
    if value <= 0:
        raise InvalidArgumentError(attribute.name, value, "must be > 0")


def _non_negative(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    require_int(attribute.name, value)
    if value < 0:
        raise InvalidArgumentError(attribute.name, value, "must be >= 0")


def _role(instance: Any, attribute: attrs.Attribute[BrokerRole], value: BrokerRole) -> None:
    if not isinstance(value, BrokerRole):
        raise InvalidArgumentError(attribute.name, value, "must be a BrokerRole")


def _ratio(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    require_int(attribute.name, value)
    if not 0 <= value <= 100:
        raise InvalidArgumentError(attribute.name, value, "must be in [0, 100]")


@attrs.frozen(kw_only=True)
class StoreConfig:
    """MessageStoreConfig: the store settings the spec reads, with RocketMQ's defaults."""

    mapped_file_size_commit_log: int = attrs.field(default=1_073_741_824, validator=_positive)
    mapped_file_size_consume_queue: int = attrs.field(default=6_000_000, validator=_positive)
    max_transfer_bytes_on_message_in_memory: int = attrs.field(default=262_144, validator=_positive)
    max_transfer_count_on_message_in_memory: int = attrs.field(default=32, validator=_positive)
    max_transfer_bytes_on_message_in_disk: int = attrs.field(default=65_536, validator=_positive)
    max_transfer_count_on_message_in_disk: int = attrs.field(default=8, validator=_positive)
    access_message_in_memory_max_ratio: int = attrs.field(default=40, validator=_ratio)
    #: StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE; the JVM reads the machine's RAM (fallback 24 GiB).
    total_physical_memory_size: int = attrs.field(default=24 * GIB, validator=_positive)
    broker_role: BrokerRole = attrs.field(default=BrokerRole.ASYNC_MASTER, validator=_role)
    offset_check_in_slave: bool = False
    max_message_size: int = attrs.field(default=4_194_304, validator=_positive)
    #: Hours a commit-log file is kept after its last write (fileReservedTime).
    file_reserved_time: int = attrs.field(default=72, validator=_non_negative)
    #: Files one clean round deletes at most (DELETE_FILES_BATCH_MAX).
    delete_files_batch_max: int = attrs.field(default=10, validator=_positive)
    check_crc_on_recover: bool = True
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    long_polling_enable: bool = True
    short_polling_time_mills: int = attrs.field(default=1000, validator=_positive)

    @property
    def consume_queue_file_size(self) -> int:
        """The consume-queue file size in bytes: mappedFileSizeConsumeQueue rounded up to 20s."""
        units = -(-self.mapped_file_size_consume_queue // CQ_STORE_UNIT_SIZE)
        return units * CQ_STORE_UNIT_SIZE

    @property
    def consume_queue_units_per_file(self) -> int:
        """U: consume-queue entries per file (300 000 by default)."""
        return self.consume_queue_file_size // CQ_STORE_UNIT_SIZE

    @property
    def memory_residency_bytes(self) -> int:
        """How far behind the commit-log head an entry may be and still count as in memory."""
        return int(
            self.total_physical_memory_size * (self.access_message_in_memory_max_ratio / 100.0)
        )


PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
PERM_PRIORITY = 8


@attrs.frozen(kw_only=True)
class BrokerConfig:
    """BrokerConfig: the broker settings the pull path reads, with RocketMQ's defaults."""

    broker_name: str = "broker-a"
    broker_permission: int = PERM_READ | PERM_WRITE
    slave_read_enable: bool = False
    long_polling_enable: bool = True
    short_polling_time_mills: int = attrs.field(default=1000, validator=_positive)
    transfer_msg_by_heap: bool = True
    filter_support_retry: bool = False
    enable_property_filter: bool = False
    auto_create_subscription_group: bool = True
    flush_consumer_offset_interval: int = attrs.field(default=5000, validator=_positive)
    #: The hold service's check interval with long polling (hard-coded in PullRequestHoldService).
    hold_check_interval_ms: int = attrs.field(default=5000, validator=_positive)


@attrs.frozen(kw_only=True)
class SubscriptionGroupConfig:
    """SubscriptionGroupConfig with RocketMQ's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1


@attrs.frozen(kw_only=True)
class TopicConfig:
    """TopicConfig: queue counts and permission of a topic."""

    topic_name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = PERM_READ | PERM_WRITE
