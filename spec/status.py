"""RocketMQ's status and code vocabularies: store statuses, response codes, client pull statuses."""

from __future__ import annotations

import enum


class GetMessageStatus(enum.Enum):
    """The store's answer to getMessage (all nine values of GetMessageStatus)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class PutMessageStatus(enum.Enum):
    """The store's answer to putMessage."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class ResponseCode(enum.IntEnum):
    """Remoting response codes (ResponseCode) that the pull, offset and send-back paths use."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    FLOW_CONTROL = 215


class PullStatus(enum.Enum):
    """What the client's processPullResponse makes of a response code."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


class BrokerRole(enum.Enum):
    """MessageStoreConfig.brokerRole."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"
