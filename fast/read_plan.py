"""The decisions of a pull, made once: DefaultMessageStore.getMessage up to its window scan.

`ReadPlanner.plan` classifies the offset (STORE-5, STORE-8 through spec.store.classify_offset),
finds the index window (STORE-9 through spec.store.index_window, the covering file found by its
start byte), answers OFFSET_FOUND_NULL (STORE-10), sizes the result (BATCH-4) and bounds the scan
by max_filter_message_count (BATCH-1). Every case but the scan is answered there; a scan is a
`ScanPlan` that any scanner consumes (fast.read_numpy, fast.read_compiled, fast.read_through):
each scanner decides nothing of this again. The planner is the one place in the read path that
depends on the profile, and only through the spec functions it calls.

The common case — min ≤ offset < max, the covering file mapped, a maxMsgNums seen before — takes
a fast path that calls no spec function per pull and relies on their contracts instead:
classify_offset answers None exactly when max ≠ 0 and min ≤ offset < max (its post-condition),
index_window's window is then the covering file's entries from offset to its written end, and
BATCH-4 and BATCH-1 depend on maxMsgNums alone, so they are evaluated once per value (a value
BATCH-4 refuses is never remembered: it raises on every pull). tests/test_fast_read_plan.py
checks the fast path against the full chain of spec calls (`plan_by_spec`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

import attrs

from pullspec.fast.consumequeue import ConsumeQueue, Layout
from pullspec.spec.batch import BatchLimits, BatchRules, max_filter_message_count
from pullspec.spec.config import StoreConfig
from pullspec.spec.errors import IllegalCapacityError, InvalidTypeError
from pullspec.spec.filter import ExpressionMessageFilter
from pullspec.spec.layout import CQ_STORE_UNIT_SIZE
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageFilter, check_get_message_arguments
from pullspec.spec.results import GetMessageResult
from pullspec.spec.ruleset import Ruleset
from pullspec.spec.status import BrokerRole, GetMessageStatus
from pullspec.spec.store import (
    classify_offset,
    consume_queue_roll_next_file,
    index_window,
    next_offset_correction,
)

#: maxMsgNums the compiled scans take (they count in int64 and size their buffers by it).
COMPILED_NUMS = 1 << 26
#: maxMsgNums values whose sizes are remembered before the memo is cleared.
_SIZES_KEPT = 1024


class ScanPlan(NamedTuple):
    """A pull that scans: entries [first, first + n) of file `number` of the queue's `layout`
    (held, so the file stays mapped while it is read), n being the window's written entries cut
    to the BATCH-1 budget; the pull's offset and maxMsgNums and the queue's min and max
    offsets."""

    queue: ConsumeQueue
    layout: Layout
    number: int
    first: int
    n: int
    offset: int
    max_msg_nums: int
    min_offset: int
    max_offset: int
    #: Whether the compiled scans take this maxMsgNums (`ReadPlanner.compiled_nums`).
    compiled: bool


Plan = GetMessageResult | ScanPlan
#: A ScanPlan from a tuple of its fields, without the named constructor's Python-level call.
_new_plan = tuple.__new__


class ReadPlanner:
    """The decisions of every pull of one store (profile, batch limits and memory share fixed,
    the broker role passed per pull since it may change at run time).

    >>> import tempfile
    >>> from pullspec.fast.consumequeue import ConsumeQueue
    >>> from pullspec.spec import BrokerRole, Profile, StoreConfig
    >>> planner = ReadPlanner(StoreConfig(), Profile.V4_9)
    >>> q = ConsumeQueue(tempfile.mkdtemp(), "T", 0, 6000, read_only=False)
    >>> planner.plan(q, 0, 32, BrokerRole.ASYNC_MASTER, False).status
    <GetMessageStatus.NO_MESSAGE_IN_QUEUE: 'NO_MESSAGE_IN_QUEUE'>
    >>> q.close()
    """

    def __init__(self, config: StoreConfig, profile: Profile) -> None:
        self.profile = profile
        #: The profile's rules, looked up once (BATCH-4, STORE-5/8 are version differences).
        self.rules = Ruleset.of(profile)
        self.limits = BatchLimits.of(config)
        #: accessMessageInMemoryMaxRatio of physical memory (BATCH-3's line).
        self.memory = config.memory_residency_bytes
        #: (BATCH-1 budget in entries, compiled_nums) by maxMsgNums that BATCH-4 accepts.
        self._sizes: dict[int, tuple[int, bool]] = {}
        #: The BATCH-1 budget by maxMsgNums that BATCH-4 accepts and the compiled scans take
        #: (the single pull's compiled path reads it, fast.read_compiled).
        self.compiled_budgets: dict[int, int] = {}
        #: Whether a negative maxMsgNums is scanned (BATCH-4 of the profile) rather than refused.
        self.negative_nums_scanned = _accepts_negative(self.rules)

    def budget(self, max_msg_nums: int) -> int:
        """BATCH-1 in whole consume-queue entries: the most entries a pull examines."""
        return -(-max_filter_message_count(max_msg_nums) // CQ_STORE_UNIT_SIZE)

    def compiled_nums(self, max_msg_nums: int) -> bool:
        """Whether the compiled scans take this maxMsgNums (a negative one only where BATCH-4
        scans it)."""
        if 0 <= max_msg_nums < COMPILED_NUMS:
            return True
        return -COMPILED_NUMS < max_msg_nums < 0 and self.negative_nums_scanned

    def _sized(self, max_msg_nums: int) -> tuple[int, bool]:
        """BATCH-4 (raising for a maxMsgNums the profile refuses), then the BATCH-1 budget in
        entries and whether the compiled scans take it, remembered by maxMsgNums."""
        self.rules.check_result_capacity(max_msg_nums)
        sized = (self.budget(max_msg_nums), self.compiled_nums(max_msg_nums))
        if len(self._sizes) >= _SIZES_KEPT:
            self._sizes.clear()
            self.compiled_budgets.clear()
        self._sizes[max_msg_nums] = sized
        if sized[1]:
            self.compiled_budgets[max_msg_nums] = sized[0]
        return sized

    def plan(
        self,
        q: ConsumeQueue,
        offset: int,
        max_msg_nums: int,
        role: BrokerRole,
        offset_check_in_slave: bool,
    ) -> Plan:
        """The answer of every case but the scan (STORE-5, STORE-8, STORE-10, BATCH-4), or the
        scan's ScanPlan."""
        min_logic = q.min_logic_offset
        # The published end before the Layout (fast.consumequeue): the Layout holds every file
        # below it.
        end = q.end
        lay = q.layout
        pos = offset * CQ_STORE_UNIT_SIZE
        if min_logic <= pos < end:  # classify_offset's None (its post-condition)
            fs = q.file_size
            rel = pos % fs
            number = lay.numbers.get(pos - rel)
            if number is not None:  # index_window: from offset to the file's written end
                sized = self._sizes.get(max_msg_nums)
                if sized is None:
                    sized = self._sized(max_msg_nums)
                readable = end - (pos - rel)
                n = ((readable if readable < fs else fs) - rel) // CQ_STORE_UNIT_SIZE
                return _new_plan(
                    ScanPlan,
                    (
                        q,
                        lay,
                        number,
                        rel // CQ_STORE_UNIT_SIZE,
                        n if n < sized[0] else sized[0],
                        offset,
                        max_msg_nums,
                        min_logic // CQ_STORE_UNIT_SIZE,
                        end // CQ_STORE_UNIT_SIZE,
                        sized[1],
                    ),
                )
        return self._plan(q, min_logic, end, lay, offset, max_msg_nums, role, offset_check_in_slave)

    def plan_pulls(
        self,
        requests: Sequence[Any],
        queues: dict[tuple[str, int], ConsumeQueue],
        queue: Callable[[str, int], ConsumeQueue],
        role: BrokerRole,
        offset_check_in_slave: bool,
    ) -> PlannedPulls:
        """get_messages' requests checked (as get_message checks its arguments) and planned,
        each as `plan` plans it; the scans the compiled loops take are written straight into
        the batch's columns (`PlannedPulls`), `plan`'s fast path inlined: a batch of small pulls
        spends as much on calls and intermediate objects as on deciding. A queue is found in
        `queues`, else made by `queue(topic, id)`."""
        pulls: Sequence[Pull] = requests
        planned = PlannedPulls(pulls)
        rows, columns, held = planned.rows, planned.columns, planned.held
        filter_ids, filters = planned.filter_ids, planned.filters
        budgets = self.compiled_budgets
        # Requests whose queue does not exist yet: planned once every request is checked, so a
        # bad request refuses the batch before any queue is made.
        unseen: list[int] = []
        for i, r in enumerate(requests):
            if not (
                type(r) is tuple
                and len(r) == 6
                and type(r[1]) is str
                and type(r[2]) is int
                and type(r[3]) is int
                and type(r[4]) is int
                and type(r[0]) is str
                and (r[5] is None or type(r[5]) is ExpressionMessageFilter)
            ):
                a = as_request(r)
                r = (a.group, a.topic, a.queue_id, a.offset, a.max_msg_nums, a.message_filter)
                if pulls is requests:  # copied once, and only when a request is not a Pull
                    pulls = planned.pulls = list(requests)
                cast(list[Pull], pulls)[i] = r
            q = queues.get((r[1], r[2]))
            if q is None:
                unseen.append(i)
                continue
            offset = r[3]
            min_logic, end, lay = q.min_logic_offset, q.end, q.layout
            pos = offset * CQ_STORE_UNIT_SIZE
            if min_logic <= pos < end:  # `plan`'s fast path
                fs = q.file_size
                rel = pos % fs
                start = pos - rel
                number = lay.numbers.get(start)
                budget = budgets.get(r[4])
                if number is not None and budget is not None:
                    n = ((end - start if end - start < fs else fs) - rel) // CQ_STORE_UNIT_SIZE
                    f = r[5]
                    fid = filter_ids.get(id(f))
                    if fid is None:
                        fid = filter_ids[id(f)] = len(filters)
                        filters.append(f)
                    rows[i] = len(held)
                    held.append((q, lay, number))
                    columns += (
                        lay.addresses[number],
                        rel // CQ_STORE_UNIT_SIZE,
                        n if n < budget else budget,
                        r[4],
                        fid,
                        offset,
                        min_logic // CQ_STORE_UNIT_SIZE,
                        end // CQ_STORE_UNIT_SIZE,
                    )
                    continue
            self._plan_into(planned, i, q, role, offset_check_in_slave)
        for i in unseen:
            r = pulls[i]
            self._plan_into(planned, i, queue(r[1], r[2]), role, offset_check_in_slave)
        return planned

    def _plan_into(
        self,
        planned: PlannedPulls,
        i: int,
        q: ConsumeQueue,
        role: BrokerRole,
        offset_check_in_slave: bool,
    ) -> None:
        """Plan request i of `planned` on its queue `q` by `plan`."""
        r = planned.pulls[i]
        plan = self.plan(q, r[3], r[4], role, offset_check_in_slave)
        if type(plan) is not ScanPlan:
            planned.answers[i] = cast(GetMessageResult, plan)
        elif plan.compiled:
            planned.add(i, plan, r[5])
        else:
            planned.uncompiled[i] = plan

    def plan_by_spec(
        self,
        q: ConsumeQueue,
        offset: int,
        max_msg_nums: int,
        role: BrokerRole,
        offset_check_in_slave: bool,
    ) -> Plan:
        """`plan` through the full chain of spec calls, whatever the case (the fast path's
        yardstick)."""
        min_logic, end, lay = q.min_logic_offset, q.end, q.layout
        return self._plan(q, min_logic, end, lay, offset, max_msg_nums, role, offset_check_in_slave)

    def _plan(
        self,
        q: ConsumeQueue,
        min_logic: int,
        end: int,
        lay: Layout,
        offset: int,
        max_msg_nums: int,
        role: BrokerRole,
        offset_check_in_slave: bool,
    ) -> Plan:
        """`plan` by calling the spec at each step, on the queue state read by the caller."""
        min_offset = min_logic // CQ_STORE_UNIT_SIZE
        max_offset = end // CQ_STORE_UNIT_SIZE
        decided = classify_offset(
            offset, min_offset, max_offset, role, offset_check_in_slave, self.rules
        )
        if decided is not None:
            return GetMessageResult(decided[0], decided[1], min_offset, max_offset)
        fs = q.file_size
        pos = offset * CQ_STORE_UNIT_SIZE
        start = pos - pos % fs
        number = lay.numbers.get(start)
        window = (
            None
            if number is None
            else index_window(offset, min_logic, ((start, min(end - start, fs)),), fs)
        )
        if window is None:
            target = consume_queue_roll_next_file(offset, q.units)
            next_offset = next_offset_correction(offset, target, role, offset_check_in_slave)
            return GetMessageResult(
                GetMessageStatus.OFFSET_FOUND_NULL, next_offset, min_offset, max_offset
            )
        assert number is not None
        self.rules.check_result_capacity(max_msg_nums)
        _, rel, written = window
        n = min((written - rel) // CQ_STORE_UNIT_SIZE, self.budget(max_msg_nums))
        return ScanPlan(
            q,
            lay,
            number,
            rel // CQ_STORE_UNIT_SIZE,
            n,
            offset,
            max_msg_nums,
            min_offset,
            max_offset,
            self.compiled_nums(max_msg_nums),
        )


def _accepts_negative(rules: BatchRules) -> bool:
    """Whether BATCH-4 of `rules` scans a negative maxMsgNums (4.7) or refuses it (4.9)."""
    try:
        rules.check_result_capacity(-1)
    except IllegalCapacityError:
        return False
    return True


@attrs.frozen
class GetRequest:
    """One pull of a get_messages batch: the arguments of get_message (a plain tuple of them
    is accepted as well).

    >>> GetRequest("G", "T", 0, 0, 32)
    GetRequest(group='G', topic='T', queue_id=0, offset=0, max_msg_nums=32, message_filter=None)
    """

    group: str
    topic: str
    queue_id: int
    offset: int
    max_msg_nums: int
    message_filter: MessageFilter | None = None


#: get_message's arguments after the store: (group, topic, queue id, offset, maxMsgNums, filter).
Pull = tuple[str, str, int, int, int, MessageFilter | None]

#: The columns of a PlannedPulls scan row, in order: the consume-queue file's address, the
#: ScanPlan's first, n, max_msg_nums, the index of the request's filter in `filters`, and the
#: ScanPlan's offset, min_offset and max_offset.
SCAN_COLUMNS = (
    "address",
    "first",
    "n",
    "max_msg_nums",
    "filter",
    "offset",
    "min_offset",
    "max_offset",
)


class PlannedPulls:
    """get_messages' plans, columnar: request i is answered by `answers[i]`, or is scan row
    `rows[i]` (the compiled loops' window; its ScanPlan is `scan_plan(rows[i])`), or is a scan
    the compiled loops do not take (`uncompiled[i]`, its ScanPlan).

    >>> planned = PlannedPulls([("G", "T", 0, 0, 32, None)])
    >>> planned.answers, planned.rows, planned.columns
    ([None], [-1], [])
    """

    __slots__ = (
        "answers",
        "columns",
        "filter_ids",
        "filters",
        "held",
        "pulls",
        "rows",
        "uncompiled",
    )

    def __init__(self, pulls: Sequence[Pull]) -> None:
        #: The checked requests.
        self.pulls = pulls
        #: Each request's answer when it needs no scan, else None.
        self.answers: list[GetMessageResult | None] = [None] * len(pulls)
        #: Each request's scan row, or -1.
        self.rows = [-1] * len(pulls)
        #: The scan rows, len(SCAN_COLUMNS) ints each, row after row.
        self.columns: list[int] = []
        #: Each scan row's (queue, Layout, file number): the Layout holds its files mapped
        #: until the scan has read them.
        self.held: list[tuple[ConsumeQueue, Layout, int]] = []
        #: The distinct filters of the scan rows, told apart by identity (`pulls` holds each).
        self.filters: list[MessageFilter | None] = []
        #: Each filter's index in `filters`, by id.
        self.filter_ids: dict[int, int] = {}
        #: The scans the compiled loops do not take, by request.
        self.uncompiled: dict[int, ScanPlan] = {}

    def add(self, i: int, plan: ScanPlan, message_filter: MessageFilter | None) -> None:
        """Make request i, a scan the compiled loops take, a scan row."""
        k = self.filter_ids.get(id(message_filter))
        if k is None:
            k = self.filter_ids[id(message_filter)] = len(self.filters)
            self.filters.append(message_filter)
        self.rows[i] = len(self.held)
        self.held.append((plan.queue, plan.layout, plan.number))
        self.columns += (
            plan.layout.addresses[plan.number],
            plan.first,
            plan.n,
            plan.max_msg_nums,
            k,
            plan.offset,
            plan.min_offset,
            plan.max_offset,
        )

    def scan_plan(self, row: int) -> ScanPlan:
        """The ScanPlan of scan row `row`."""
        q, lay, number = self.held[row]
        w = len(SCAN_COLUMNS)
        _, first, n, nums, _, offset, min_offset, max_offset = self.columns[w * row : w * row + w]
        return ScanPlan(q, lay, number, first, n, offset, nums, min_offset, max_offset, True)

    def plans(self) -> list[Plan]:
        """Each request's plan: its answer or its ScanPlan."""
        out: list[Plan] = []
        for i, answer in enumerate(self.answers):
            if answer is not None:
                out.append(answer)
            elif self.rows[i] >= 0:
                out.append(self.scan_plan(self.rows[i]))
            else:
                out.append(self.uncompiled[i])
        return out


def as_request(item: Any) -> GetRequest:
    """A get_messages request as a GetRequest, its fields checked as get_message checks them."""
    if type(item) is GetRequest:
        request = item
    elif isinstance(item, tuple | list) and len(item) in (5, 6):
        request = GetRequest(*item)
    elif isinstance(item, GetRequest):
        request = item
    else:
        raise InvalidTypeError("request", item, "GetRequest or a get_message argument tuple")
    r = request
    check_get_message_arguments(
        r.group, r.topic, r.queue_id, r.offset, r.max_msg_nums, r.message_filter
    )
    return request
