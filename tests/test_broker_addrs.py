"""BrokerData.brokerAddrs as a HashMap<Long, String>: its iteration order is java.util.HashMap's,
which REQ-6 and OFFSET-7 read when they fall back to the map's first entry.

The expected orders below were worked out from HashMap's source (Long.hashCode, the spread
hash, 16 buckets doubling past 3/4 load, put order within a bucket, tree bins from 9 entries in
one bucket of a 64-bucket table) and checked once against java.util.HashMap of OpenJDK 17.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pullspec.spec.broker_addrs import (
    LONG_MAX,
    LONG_MIN,
    BrokerAddrs,
    hash_map_order,
    long_hash_code,
    spread_hash,
)
from pullspec.spec.errors import InvalidArgumentError, InvalidTypeError

MULTIPLES_OF_64 = [64 * k for k in range(12)]


@pytest.mark.parametrize(
    ("puts", "order"),
    [
        ([2, 0], [0, 2]),  # the route lists a slave first; id 0 iterates first
        ([2, 1, 0], [0, 1, 2]),
        ([16, 0], [16, 0]),  # one bucket of 16: put order
        ([0, 16], [0, 16]),
        ([17, 1, 16], [16, 17, 1]),  # bucket 0 before bucket 1, put order inside bucket 1
        # 13 entries pass 3/4 of 16 buckets: the table doubles and 16 moves to bucket 16.
        ([*range(12), 16], [*range(12), 16]),
        ([16, *range(11)], [16, *range(11)]),  # 12 entries: 16 still shares bucket 0 with 0
        ([-1, 0], [-1, 0]),  # Long.hashCode(-1) == 0
        ([1 << 32, 1, 0], [0, 1 << 32, 1]),  # Long.hashCode(2^32) == 1
        ([65536, 1, 0], [0, 65536, 1]),  # spread: 65536 ^ 1 lands in bucket 1
        ([-2, 1], [-2, 1]),
        (MULTIPLES_OF_64[:9], MULTIPLES_OF_64[:9]),  # 9 in a bucket: the table grows to 32
        # 11 in one bucket of 64: a tree bin, iterated root (192) first, then the chain order.
        (MULTIPLES_OF_64[:11], [192, *[k for k in MULTIPLES_OF_64[:11] if k != 192]]),
        (MULTIPLES_OF_64, [192, *[k for k in MULTIPLES_OF_64 if k != 192]]),
        ([3, 1, 3, 0], [0, 1, 3]),  # a key put again keeps its place
        ([], []),
    ],
)
def test_hash_map_order_is_javas(puts: list[int], order: list[int]) -> None:
    assert order == list(hash_map_order(puts))


def test_long_hash_code_and_spread() -> None:
    assert [0, 1, 0, 1, 1, -2147483648] == [
        long_hash_code(v) for v in (0, 1, -1, -2, 1 << 32, LONG_MIN)
    ]
    assert [3, 65537, -2147450880] == [spread_hash(v) for v in (3, 1 << 16, 1 << 31)]


def test_broker_addrs_is_a_map_in_hash_order() -> None:
    addrs = BrokerAddrs([(1, "s:1"), (0, "m:1"), (1, "s:2")])
    assert [(0, "m:1"), (1, "s:2")] == list(addrs.items())
    assert {1: "s:2", 0: "m:1"} == addrs  # equality ignores order, as HashMap.equals does
    assert (2, "m:1", False) == (len(addrs), addrs[0], 2 in addrs)
    assert "BrokerAddrs([(0, 'm:1'), (1, 's:2')])" == repr(addrs)


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        ([(True, "a")], InvalidTypeError),
        ([("0", "a")], InvalidTypeError),
        ([(0, None)], InvalidTypeError),
        ([(0,)], InvalidTypeError),
        ([(LONG_MAX + 1, "a")], InvalidArgumentError),
    ],
)
def test_bad_entries_are_refused(entries: list[tuple[object, ...]], error: type[Exception]) -> None:
    with pytest.raises(error):
        BrokerAddrs(entries)  # type: ignore[arg-type]


@given(st.lists(st.integers(0, 11), max_size=12), st.randoms())
def test_small_ids_iterate_ascending_whatever_the_put_order(
    ids: list[int], rnd: random.Random
) -> None:
    # Ids below 16 in a map of at most 12 entries each own a bucket of the 16: ascending order.
    shuffled = list(ids)
    rnd.shuffle(shuffled)
    assert sorted(set(ids)) == list(hash_map_order(shuffled))
