"""pullspec's specification of Apache RocketMQ 4.x consumer-pull semantics.

The spec is a document written as Python: value types, `typing.Protocol` interfaces and every
rule of the rulebooks as a small pure function carrying its rule ID. It imports nothing of the
implementations.
"""

from pullspec.spec.clock import Clock, ManualClock, SystemClock
from pullspec.spec.config import BrokerConfig, StoreConfig, SubscriptionGroupConfig, TopicConfig
from pullspec.spec.errors import ErrorKind, PullspecError
from pullspec.spec.message import BrokerInnerMessage, HostAddress, MessageQueue, StoredMessage
from pullspec.spec.profiles import ALL_PROFILES, DEFAULT_PROFILE, Profile
from pullspec.spec.protocols import MessageFilter, MessageStore
from pullspec.spec.results import GetMessageResult, PutMessageResult
from pullspec.spec.status import (
    BrokerRole,
    GetMessageStatus,
    PullStatus,
    PutMessageStatus,
    ResponseCode,
)

__all__ = [
    "ALL_PROFILES",
    "DEFAULT_PROFILE",
    "BrokerConfig",
    "BrokerInnerMessage",
    "BrokerRole",
    "Clock",
    "ErrorKind",
    "GetMessageResult",
    "GetMessageStatus",
    "HostAddress",
    "ManualClock",
    "MessageFilter",
    "MessageQueue",
    "MessageStore",
    "Profile",
    "PullStatus",
    "PullspecError",
    "PutMessageResult",
    "PutMessageStatus",
    "ResponseCode",
    "StoreConfig",
    "StoredMessage",
    "SubscriptionGroupConfig",
    "SystemClock",
    "TopicConfig",
]
