"""Hand-chosen edge cases: short op sequences, each aimed at the boundary of the rules it names.

They are the first thing `pullspec vectors export` writes and the cheapest way the mutation bank
kills a mutant: each case sits exactly where a plausible one-rule mistake (an off-by-one, a
`>=` for a `>`, the other profile's variant) changes an observation. Rule IDs are derived from the
ops (conformance.ops.OP_RULES); the comments say which boundary a case aims at.
"""

from __future__ import annotations

from pullspec.conformance.jsontypes import JSONObject

_STORE: JSONObject = {
    "mappedFileSizeCommitLog": 1024,
    "mappedFileSizeConsumeQueue": 80,
    "maxTransferCountOnMessageInMemory": 32,
    "maxTransferBytesOnMessageInMemory": 262144,
    "fileReservedTime": 0,
    "brokerRole": "ASYNC_MASTER",
    "offsetCheckInSlave": False,
    "topic": "T",
    "group": "G",
}
_SMALL: JSONObject = {**_STORE, "mappedFileSizeCommitLog": 512, "mappedFileSizeConsumeQueue": 40}
_PULL: JSONObject = {**_STORE, "slaveReadEnable": False, "topicQueueNums": 4}


#: One step of an edge case: (op, args).
Step = tuple[str, JSONObject]


def _m(queue_id: int, tags: str | None, size: int, times: int | None = None) -> JSONObject:
    msg: JSONObject = {"queueId": queue_id, "tags": tags, "bodySize": size}
    if times is not None:
        msg["reconsumeTimes"] = times
    return msg


def _put(*msgs: JSONObject) -> Step:
    return ("put", {"msgs": list(msgs)})


def _get(q: int, offset: int, n: int = 32, sub: str | None = None) -> Step:
    return ("get_message", {"queueId": q, "offset": offset, "maxMsgNums": n, "subscription": sub})


def _pull(q: int, offset: int, n: int = 32, sub: str = "*") -> Step:
    return ("pull", {"queueId": q, "offset": offset, "maxMsgNums": n, "subscription": sub})


def _role(role: str, check: bool) -> Step:
    return ("set_role", {"brokerRole": role, "offsetCheckInSlave": check})


_SIX = _put(*(_m(0, t, 20) for t in ("A", "B", "A", "C", "B", "A")))
_CLEAN: Step = ("delete_expired", {})
# Three 248-byte records per put on 512-byte files: each record fills most of a file.
_ROLLING = [
    _put(_m(1, "A", 150), _m(0, "A", 150), _m(1, "A", 150)),
    _put(_m(1, "A", 150), _m(0, "A", 150), _m(1, "A", 150)),
    _put(_m(0, "A", 150), _m(1, "A", 150)),
]


class Wrote(int):
    """An argument standing for the commit-log offset the reference wrote the n-th message at
    (resolved while the case is generated, since record sizes differ between profiles)."""


def _send_back(wrote: int, delay: int, max_times: int | None) -> Step:
    args: JSONObject = {"originalCommitLogOffset": Wrote(wrote), "group": "G", "delayLevel": delay}
    return ("send_back", {**args, "maxReconsumeTimes": max_times})


def _ops(*parts: Step | list[Step]) -> list[Step]:
    """Steps and lists of steps, flattened in order."""
    return [step for part in parts for step in (part if isinstance(part, list) else [part])]


def _lock(op: str, group: str, client: str, *mqs: int) -> Step:
    return (op, {"group": group, "clientId": client, "mqs": list(mqs)})


def _msgs(op: str, *msgs: list[int]) -> Step:
    return (op, {"msgs": list(msgs)})


def _clock(ms: int) -> Step:
    return ("advance_clock", {"ms": ms})


#: (name, area, config, ops): the hand-chosen edge cases; rules are derived from the ops.
EDGE_CASES: tuple[tuple[str, str, JSONObject, list[Step]], ...] = (
    ("store-empty-queue", "store", _STORE, _ops(_get(0, 0), _get(0, 5), _get(1, -1))),
    (
        "store-offset-classes",
        "store",
        _STORE,
        _ops(
            _put(_m(0, "A", 10), _m(0, "A", 10), _m(0, "B", 10), _m(1, None, 3)),
            [_get(0, o) for o in (-1, 0, 2, 3, 4, 9)],
        ),
    ),
    (
        "store-slave-keeps-offsets",
        "store",
        _STORE,
        _ops(
            _put(_m(0, "A", 10), _m(0, "A", 10)),
            _role("SLAVE", False),
            [_get(0, 9), _get(0, -1), _get(0, 2)],
            _role("SLAVE", True),
            [_get(0, 9), _get(0, -1), _put(_m(0, "A", 1))],
        ),
    ),
    (
        "store-batch-limits",
        "store",
        {
            **_STORE,
            "maxTransferCountOnMessageInMemory": 3,
            "maxTransferBytesOnMessageInMemory": 400,
        },
        _ops(
            _put(*(_m(0, "A", 60) for _ in range(6))),
            [_get(0, 0, n) for n in (1, 2, 32, 0, -1)],
            [_get(0, 4, 1, "B"), _get(0, 1, 1, "A")],
        ),
    ),
    (
        "store-tag-filters",
        "store",
        _STORE,
        _ops(
            _put(_m(0, "A", 5), _m(0, None, 5), _m(0, "", 5), _m(0, "B", 5), _m(0, "C", 5)),
            [_get(0, 0, 32, s) for s in ("A", "*", None, "A || C", "B || none-such", "")],
            [_get(0, 1, 1, "C"), _get(0, 1, 2, "B")],
        ),
    ),
    (
        # 400 + 424-byte bodies leave 4 bytes less than the second record plus its 8-byte blank.
        "store-end-of-file-blank",
        "store",
        _STORE,
        _ops(_put(_m(0, "A", 400), _m(1, "A", 424), _m(0, None, 300), _m(1, None, 301))),
    ),
    (
        "store-expiry",
        "store",
        _SMALL,
        _ops(
            _ROLLING,
            [_get(1, 1), _CLEAN, _get(1, 0), _get(0, 0), _get(0, 2), _get(1, 4)],
            [_put(_m(0, "B", 150)), _CLEAN],
        ),
    ),
    (
        # Queue 1 loses two whole consume-queue files but keeps its min: OFFSET_FOUND_NULL.
        "store-found-null",
        "store",
        {**_SMALL, "mappedFileSizeConsumeQueue": 80},
        _ops(
            _put(*(_m(1, "A", 0) for _ in range(9))),
            _put(_m(0, "A", 300), _m(0, "A", 300), _m(0, "A", 300)),
            [_CLEAN, _get(1, 0), _get(1, 2), _get(1, 5), _get(1, 7, 1), _get(1, 8), _get(0, 0)],
        ),
    ),
    (
        "store-removed-then-refilled",
        "store",
        {**_SMALL, "mappedFileSizeConsumeQueue": 80},
        _ops(
            _put(_m(1, "A", 150), _m(0, "A", 150)),
            _put(*(_m(0, "A", 150) for _ in range(4))),
            [_CLEAN, _get(1, 0), _put(_m(1, "C", 150), _m(1, "C", 150), _m(1, "C", 150))],
            [_put(_m(1, "C", 150), _m(1, "A", 150)), _CLEAN, _get(1, 0), _get(1, 2), _get(1, 5)],
        ),
    ),
    (
        "store-removing-skip",
        "store",
        {**_SMALL, "mappedFileSizeConsumeQueue": 160},
        _ops(
            _put(_m(1, "A", 150), _m(0, "A", 150), _m(0, "A", 150), _m(0, "A", 150)),
            [_CLEAN, _put(_m(1, "B", 150)), _get(1, 0), _get(1, 0, 32, "B"), _get(1, 1)],
        ),
    ),
    (
        # STORE-21: queue 1's entry at commit-log offset 0 outlives file 0; its 248-byte reads
        # are served from the start of file 512 — two shorter records run on, then one is cut.
        "store-read-at-0-after-delete",
        "store",
        {**_SMALL, "mappedFileSizeConsumeQueue": 160},
        _ops(
            _put(_m(1, "A", 150), _m(0, "B", 150), _m(0, "B", 50), _m(0, "C", 50)),
            [_CLEAN, _get(1, 0), _get(1, 0, 32, "A"), _get(1, 0, 32, "B"), _get(0, 1)],
            [_put(_m(0, "A", 300), _m(0, "A", 300)), _CLEAN, _get(1, 0), _get(0, 3)],
        ),
    ),
    ("pull-empty-queue", "pull_code", _PULL, _ops(_pull(0, 0), _pull(0, 3), _pull(1, -1))),
    (
        # CODE-15: each OFFSET_MOVED answer appends its event record (its size moves every later
        # commit-log offset); STORE-21: the pull at offset 0 after file 0 is deleted reads the
        # event record that starts the first remaining file.
        "pull-offset-moved-event",
        "pull_code",
        {**_PULL, "mappedFileSizeCommitLog": 512},
        _ops(
            [_put(_m(1, "A", 100)), _pull(0, 7), _pull(1, 9, 32, "A"), _put(_m(0, "B", 10))],
            [_pull(1, -1), _put(_m(0, "", 200)), _CLEAN, _pull(1, 0), _pull(0, 0, 32, "")],
        ),
    ),
    (
        "pull-codes",
        "pull_code",
        _PULL,
        _ops(
            _SIX,
            [_pull(0, 0), _pull(0, 6), _pull(0, 9), _pull(0, 3, 32, "C")],
            [_pull(0, 4, 1, "A"), _pull(0, -1), _pull(3, 0), _pull(4, 0)],
        ),
    ),
    (
        "pull-slave",
        "pull_code",
        _PULL,
        _ops(
            [_SIX, _role("SLAVE", False), _pull(0, 0), _pull(0, 9), _pull(0, 6), _pull(0, -1)],
            [_pull(0, 3, 32, "C"), _role("SLAVE", True), _pull(0, 9), _pull(0, -1)],
        ),
    ),
    (
        "pull-slave-read",
        "pull_code",
        {**_PULL, "slaveReadEnable": True},
        _ops(_SIX, _role("SLAVE", False), _pull(0, 0), _pull(0, 9), _pull(0, 6)),
    ),
    (
        "pq-put-dispatch",
        "process_queue",
        {},
        _ops(
            [_msgs("put_messages", *m) for m in ([[5, 10]], [[3, 7]], [[5, 12]], [], [[9, 1]])],
            ("take_messages", {"n": 0}),
            _msgs("put_messages", [11, 2]),
        ),
    ),
    (
        "pq-acc-cnt",
        "process_queue",
        {},
        _ops(
            [_msgs("put_messages", m) for m in ([1, 1, 10], [20, 1, 15], [21, 1, 21])],
            _msgs("put_messages", [22, 1], [23, 1, 30]),
        ),
    ),
    (
        "pq-remove",
        "process_queue",
        {},
        _ops(
            _msgs("remove_messages", [1, 1]),
            _msgs("put_messages", [1, 3], [2, 4]),
            _msgs("put_messages", [3, 5]),
            [_msgs("remove_messages", m) for m in ([2, 4], [1, 9], [7, 1], [3, 5])],
        ),
    ),
    (
        "pq-take-commit-rollback",
        "process_queue",
        {},
        _ops(
            [("take_messages", {"n": 0}), ("commit", {}), _msgs("put_messages", [1, 2], [2, 2])],
            [_msgs("put_messages", [3, 2]), ("take_messages", {"n": 2}), ("commit", {})],
            [("commit", {}), ("take_messages", {"n": 5}), _msgs("put_messages", [3, 9])],
            [("rollback", {}), ("take_messages", {"n": -1}), ("take_messages", {"n": 1})],
            [_msgs("make_messages_to_consume_again", [3, 2], [8, 1]), ("commit", {})],
        ),
    ),
    (
        "pq-expiry",
        "process_queue",
        {"clockStart": 1_000_000},
        _ops(
            [_clock(30_000), _clock(1), ("set", {"lastLockTimestamp": 1_030_001})],
            [_clock(89_999), _clock(1), ("set", {"locked": True})],
            [("set", {"lastPullTimestamp": 1_000_001}), _clock(1)],
        ),
    ),
    (
        "lm-lease-boundary",
        "lock_manager",
        {},
        _ops(
            [_lock("try_lock_batch", "G1", "c1", 0, 1), _clock(60_000)],
            [_lock("try_lock_batch", "G1", "c2", 0), _clock(60_000)],
            ("is_locked", {"group": "G1", "clientId": "c1", "mq": 1}),
            [_clock(60_000), _clock(1), _lock("try_lock_batch", "G1", "c2", 0, 1), _clock(1)],
            ("is_locked", {"group": "G1", "clientId": "c2", "mq": 0}),
        ),
    ),
    (
        "lm-groups-and-unlock",
        "lock_manager",
        {},
        _ops(
            [_lock("try_lock_batch", "G2", "c1"), _lock("unlock_batch", "G2", "c1", 0)],
            [_lock("try_lock_batch", "G1", "c1", 0, 1), _lock("try_lock_batch", "G1", "c2", 1, 2)],
            [_lock("unlock_batch", "G1", "c1", 0, 2), _lock("unlock_batch", "G1", "c1", 1)],
            _lock("unlock_batch", "G1", "c2", 2),
        ),
    ),
    (
        "sb-dlq-threshold",
        "send_back",
        {"groupRetryMaxTimes": 16},
        _ops(
            [_put(_m(0, "A", 16, 2)), _put(_m(0, "A", 16, 1)), _put(_m(0, "A", 16, 3))],
            [_send_back(n, 0, 2) for n in (0, 1, 2)],
        ),
    ),
    (
        "sb-header-absent",
        "send_back",
        {"groupRetryMaxTimes": 1},
        _ops(
            [_put(_m(0, "A", 16, 1)), _put(_m(0, None, 16, 0))],
            [_send_back(n, 1, None) for n in (0, 1)],
        ),
    ),
    (
        "sb-delay-levels",
        "send_back",
        {"groupRetryMaxTimes": 16},
        _ops(
            _put(_m(0, "A", 16, 3)),
            [_send_back(0, d, 16) for d in (0, 2, 30, -1)],
            ("send_back", {"originalCommitLogOffset": 5, "group": "G", "delayLevel": 0}),
        ),
    ),
    (
        # LAYOUT-13: a property stored with an empty value reads back absent, so the copy has no
        # TAGS; STORE-22: an offset inside a record or past the last one finds nothing.
        "sb-empty-tag-and-inside-record",
        "send_back",
        {"groupRetryMaxTimes": 16},
        _ops(
            _put(_m(0, "", 16, 0), _m(0, None, 0, 1)),
            [_send_back(0, 1, 16), _send_back(1, 0, 16), _send_back(0, -1, 16)],
            [
                ("send_back", {"originalCommitLogOffset": o, "group": "G", "delayLevel": 1})
                for o in (1, 100_000)
            ],
        ),
    ),
)
