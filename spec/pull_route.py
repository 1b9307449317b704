"""Where a pull goes and with which flags (REQ-4, REQ-6, REQ-7, REQ-8, REQ-10): PullSysFlag, the
node choice, the broker address lookup and the filter-server routing."""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from pullspec.spec.broker_addrs import BrokerAddrs
from pullspec.spec.client_errors import MQClientError
from pullspec.spec.consumer_config import MASTER_ID
from pullspec.spec.filter import is_tag_type
from pullspec.spec.profiles import Profile
from pullspec.spec.rules import Rules, rule, stated

_SEEDS = (
    "000_26b83a4251c26823.txt",
    "001_c163ec5dbc0ced81.txt",
    "002_c88c8921902728c1.txt",
    "004_60fc00b6c6a023ff.txt",
)
_SEEDS_2_4 = ("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt")

#: MQVersion.Version.V4_1_0_SNAPSHOT.ordinal(): the first broker that filters by SQL92 (REQ-7).
V4_1_0_SNAPSHOT = 232


class PullSysFlag(enum.IntFlag):
    """PullSysFlag's bits."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL_MESSAGE = 0x10


@rule("REQ-4", source="PullSysFlag.buildSysFlag", seeds=_SEEDS)
def build_sys_flag(
    commit_offset: bool,
    suspend: bool,
    subscription: bool,
    class_filter: bool,
    lite_pull: bool = False,
) -> int:
    """The sys flag ORs COMMIT_OFFSET 0x1, SUSPEND 0x2, SUBSCRIPTION 0x4, CLASS_FILTER 0x8 and
    LITE_PULL 0x10 for the arguments that are true.

    post: 0 <= __return__ <= 0x1F
    post: bool(__return__ & 0x1) == commit_offset and bool(__return__ & 0x2) == suspend
    """
    # The push consumer always sets SUSPEND, so its flags are 2, 3, 6, 7, 10 or 11.
    flag = PullSysFlag(0)
    for bit, on in (
        (PullSysFlag.COMMIT_OFFSET, commit_offset),
        (PullSysFlag.SUSPEND, suspend),
        (PullSysFlag.SUBSCRIPTION, subscription),
        (PullSysFlag.CLASS_FILTER, class_filter),
        (PullSysFlag.LITE_PULL_MESSAGE, lite_pull),
    ):
        if on:
            flag |= bit
    return int(flag)


def clear_commit_offset_flag(sys_flag: int) -> int:
    """PullSysFlag.clearCommitOffsetFlag: `sys_flag & ~0x1`."""
    return sys_flag & ~int(PullSysFlag.COMMIT_OFFSET)


def has_flag(sys_flag: int, bit: PullSysFlag) -> bool:
    """PullSysFlag.has…Flag: whether `bit` is set in `sys_flag`."""
    return sys_flag & int(bit) == int(bit)


@attrs.frozen
class FindBrokerResult:
    """A broker address and whether it is a slave's (FindBrokerResult)."""

    broker_addr: str
    slave: bool


def recalculate_pull_from_which_node(
    suggested: int | None, connect_broker_by_user: bool = False, default_broker_id: int = MASTER_ID
) -> int:
    """PullAPIWrapper.recalculatePullFromWhichNode (REQ-6): the user's broker id, else the
    broker's last suggestion (RESULT-2), else the master."""
    if connect_broker_by_user:
        return default_broker_id
    return MASTER_ID if suggested is None else suggested


def _first_entry(broker_addrs: BrokerAddrs) -> FindBrokerResult:
    # `map.entrySet().iterator().next()`: the first entry in HashMap order, not the route's.
    broker_id, addr = next(iter(broker_addrs.items()))
    return FindBrokerResult(addr, broker_id != MASTER_ID)


def find_broker_address_in_admin(broker_addrs: BrokerAddrs | None) -> FindBrokerResult | None:
    """MQClientInstance.findBrokerAddressInAdmin: the first entry of the broker's address map in
    its HashMap iteration order (`spec.broker_addrs`), slave when its id is not 0; None without
    a map or with an empty one.

    Example: ``find_broker_address_in_admin(BrokerAddrs([(1, "s:1"), (0, "m:1")]))`` is
    ``FindBrokerResult("m:1", slave=False)``: id 0 iterates first.
    """
    return _first_entry(broker_addrs) if broker_addrs else None


# [4.7]
@rule(
    "REQ-6",
    source="MQClientInstance.findBrokerAddressInSubscribe",
    seeds=("000_26b83a4251c26823.txt", *_SEEDS_2_4),
    profiles=(Profile.V4_7,),
    versions="4.9 tries brokerId + 1 for a missing slave id before the first-entry fallback",
)
def find_broker_address_in_subscribe_v47(
    broker_addrs: BrokerAddrs | None, broker_id: int, only_this_broker: bool
) -> FindBrokerResult | None:
    """The pull goes to exactly `broker_id` if the route has it, else (unless only_this_broker)
    to the first entry in the broker map's iteration order — BrokerData.brokerAddrs is a
    HashMap<Long, String>, so its bucket order, id 0 before 1 before 2 — else nowhere.

    post: __return__ is None or __return__.broker_addr in broker_addrs.values()
    """
    # The fallback takes the map's first entry, whose id decides slave-ness.
    if not broker_addrs:
        return None
    if broker_id in broker_addrs:
        return FindBrokerResult(broker_addrs[broker_id], broker_id != MASTER_ID)
    return None if only_this_broker else _first_entry(broker_addrs)


# [Modified in 4.9]
@rule("REQ-6", source="MQClientInstance.findBrokerAddressInSubscribe", profiles=(Profile.V4_9,))
def find_broker_address_in_subscribe_v49(
    broker_addrs: BrokerAddrs | None, broker_id: int, only_this_broker: bool
) -> FindBrokerResult | None:
    """The pull goes to exactly `broker_id`, else for a slave id to `broker_id + 1` (still a
    slave), else (unless only_this_broker) to the first entry in the broker map's HashMap
    iteration order (id 0 before 1 before 2), else nowhere.

    post: __return__ is None or __return__.broker_addr in broker_addrs.values()
    """
    # The +1 step applies even with only_this_broker and keeps slave = True.
    if not broker_addrs:
        return None
    slave = broker_id != MASTER_ID
    if broker_id in broker_addrs:
        return FindBrokerResult(broker_addrs[broker_id], slave)
    if slave and broker_id + 1 in broker_addrs:
        return FindBrokerResult(broker_addrs[broker_id + 1], True)
    return None if only_this_broker else _first_entry(broker_addrs)


@rule("REQ-7", source="PullAPIWrapper.pullKernelImpl", seeds=_SEEDS_2_4)
def check_filter_type_supported(
    expression_type: str, broker_version: int, broker_name: str
) -> None:
    """A non-TAG expression type sent to a broker older than V4_1_0_SNAPSHOT fails the pull with
    MQClientException before any RPC.

    raises: MQClientError
    post: __return__ is None
    """
    # TAG expressions reach any broker version.
    if not is_tag_type(expression_type) and broker_version < V4_1_0_SNAPSHOT:
        raise MQClientError(
            f"The broker[{broker_name}, {broker_version}] does not upgrade to support for "
            f"filter message by {expression_type}"
        )


@rule("REQ-8", source="PullAPIWrapper.pullKernelImpl", seeds=_SEEDS_2_4)
def sys_flag_for_broker(sys_flag: int, slave: bool) -> int:
    """A pull sent to a slave clears the COMMIT_OFFSET bit, so no offset is committed through a
    slave, while the commitOffset value itself is still sent.

    post: not slave or not __return__ & 0x1
    post: slave or __return__ == sys_flag
    post: __return__ | 0x1 == sys_flag | 0x1
    """
    # Only the commit bit changes.
    return clear_commit_offset_flag(sys_flag) if slave else sys_flag


@rule(
    "REQ-10",
    source="PullAPIWrapper.computePullFromWhichFilterServer",
    seeds=("000_26b83a4251c26823.txt", *_SEEDS_2_4),
)
def pull_target_address(
    sys_flag: int,
    broker_addr: str,
    topic: str,
    filter_servers: Sequence[str] | None,
    random_num: int,
) -> str:
    """With CLASS_FILTER set the pull goes to a random filter server of the broker (list entry
    randomNum % size), and fails with MQClientException when the broker has none.

    pre: random_num >= 0
    raises: MQClientError
    post: has_flag(sys_flag, PullSysFlag.CLASS_FILTER) or __return__ == broker_addr
    """
    # The filter-server choice is made after REQ-8, on the inner flag.
    if not has_flag(sys_flag, PullSysFlag.CLASS_FILTER):
        return broker_addr
    if not filter_servers:
        raise MQClientError(f"Find Filter Server Failed, Broker Addr: {broker_addr} topic: {topic}")
    return filter_servers[random_num % len(filter_servers)]


class PullRouteRules(Rules):
    """The changed REQ rule of the broker choice (see `spec.rules.Rules`)."""

    find_broker_address_in_subscribe = stated(
        find_broker_address_in_subscribe_v47, find_broker_address_in_subscribe_v49
    )
