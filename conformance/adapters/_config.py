"""Shared translation of the vectors' MessageStoreConfig/BrokerConfig keys into spec configs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pullspec.conformance.jsontypes import JSONValue, as_given
from pullspec.spec.config import BrokerConfig, StoreConfig
from pullspec.spec.status import BrokerRole

#: Vector (MessageStoreConfig) key → StoreConfig field.
STORE_KEYS = {
    "mappedFileSizeCommitLog": "mapped_file_size_commit_log",
    "mappedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
    "maxTransferBytesOnMessageInMemory": "max_transfer_bytes_on_message_in_memory",
    "maxTransferCountOnMessageInMemory": "max_transfer_count_on_message_in_memory",
    "maxTransferBytesOnMessageInDisk": "max_transfer_bytes_on_message_in_disk",
    "maxTransferCountOnMessageInDisk": "max_transfer_count_on_message_in_disk",
    "accessMessageInMemoryMaxRatio": "access_message_in_memory_max_ratio",
    # StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE (the JVM reads the machine's RAM; a vector sets it).
    "totalPhysicalMemorySize": "total_physical_memory_size",
    "fileReservedTime": "file_reserved_time",
    "offsetCheckInSlave": "offset_check_in_slave",
    "maxMessageSize": "max_message_size",
}


def store_config(config: Mapping[str, JSONValue]) -> StoreConfig:
    """The StoreConfig a vector case's config describes (unknown keys are informational). The
    values go to StoreConfig as the vector gives them: its validators refuse a wrong one."""
    # Keyword arguments named through STORE_KEYS: no static type states which field a key
    # names, so they are Any; StoreConfig's validators check each value.
    kwargs: dict[str, Any] = {STORE_KEYS[k]: v for k, v in config.items() if k in STORE_KEYS}
    if "brokerRole" in config:
        kwargs["broker_role"] = BrokerRole(config["brokerRole"])
    return StoreConfig(**kwargs)


def broker_config(config: Mapping[str, JSONValue]) -> BrokerConfig:
    """The BrokerConfig a vector case's config describes."""
    if "slaveReadEnable" in config:
        return BrokerConfig(slave_read_enable=as_given(bool, config["slaveReadEnable"]))
    return BrokerConfig()
