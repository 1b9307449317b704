"""Mutants of the message store (ReferenceMessageStore); seen by the store, pull_code and
send_back areas, whose candidates are built on the mutant store."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar, overload

from pullspec.conformance.mutants._patch import Candidate, mutate, wrap
from pullspec.conformance.mutants.base import Mutant
from pullspec.spec import batch, scan
from pullspec.spec import store as spec_store
from pullspec.spec.batch import BatchLimits
from pullspec.spec.clock import Clock
from pullspec.spec.config import BrokerConfig, StoreConfig, SubscriptionGroupConfig
from pullspec.spec.evolve import evolve
from pullspec.spec.message import Properties, StoredMessage
from pullspec.spec.profiles import Profile
from pullspec.spec.protocols import MessageFilter
from pullspec.spec.results import GetMessageResult
from pullspec.spec.scan import CQEntry, ScanState

if TYPE_CHECKING:
    from pullspec.reference.broker import ReferenceBroker
    from pullspec.reference.send_back import ReferenceSendBack
    from pullspec.reference.store import ReferenceMessageStore

T = TypeVar("T")
P = ParamSpec("P")

_AREAS = ("store", "pull_code")


def store_candidate(
    name: str, patches: Mapping[str, Mapping[str, object]], **methods: object
) -> Callable[[], Candidate]:
    """A builder of a candidate whose store, broker and send-back use the mutant store."""

    def build() -> Candidate:
        from pullspec.reference.broker import ReferenceBroker
        from pullspec.reference.send_back import ReferenceSendBack
        from pullspec.reference.store import ReferenceMessageStore

        store_class = mutate(ReferenceMessageStore, patches, **methods)

        def message_store(
            config: StoreConfig, profile: Profile, clock: Clock
        ) -> ReferenceMessageStore:
            return store_class(config=config, profile=profile, clock=clock)

        def broker(
            s: StoreConfig, b: BrokerConfig, profile: Profile, clock: Clock
        ) -> ReferenceBroker:
            store = message_store(s, profile, clock)
            return ReferenceBroker(store=store, config=b, profile=profile, clock=clock)

        def send_back(
            s: StoreConfig, g: SubscriptionGroupConfig, profile: Profile, clock: Clock
        ) -> ReferenceSendBack:
            store = message_store(s, profile, clock)
            return ReferenceSendBack(store=store, group_config=g, profile=profile, clock=clock)

        return Candidate(name, message_store=message_store, broker=broker, send_back=send_back)

    return build


def _mutant(
    name: str, rule: str, doc: str, patches: Mapping[str, Mapping[str, object]], **methods: object
) -> Mutant:
    return Mutant(name, rule, _AREAS, doc, store_candidate(name, patches, **methods))


class _PerTopicCounters(dict[tuple[str, int], int]):
    """The queue-offset counters keyed by topic only (the STORE-18 mutant)."""

    # dict.get's own overloads: the counter, or `default` when the topic has none.
    @overload
    def get(self, key: tuple[str, int], default: None = None, /) -> int | None: ...
    @overload
    def get(self, key: tuple[str, int], default: int, /) -> int: ...
    @overload
    def get(self, key: tuple[str, int], default: T, /) -> int | T: ...
    def get(self, key: tuple[str, int], default: T | None = None, /) -> int | T | None:
        """The topic's counter."""
        return super().get((key[0], 0), default)

    def __setitem__(self, key: tuple[str, int], value: int) -> None:
        """Set the topic's counter."""
        super().__setitem__((key[0], 0), value)


def _swapped_init(
    name: str, function: Callable[..., object] | None
) -> Callable[[ReferenceMessageStore], None]:
    """An __attrs_post_init__ whose store's ruleset has its function `name` swapped for
    `function` (None: the other profile's variant)."""

    def init(self: ReferenceMessageStore) -> None:
        from pullspec.reference.store import ReferenceMessageStore

        ReferenceMessageStore.__attrs_post_init__(self)
        mine = getattr(self.rules, name)
        other = next(v for v in self.rules.slots()[name].variants if v is not mine)
        self.rules = self.rules.swapped(name, other if function is None else function)

    return init


def _other_variant_init(name: str) -> Callable[[ReferenceMessageStore], None]:
    """An __attrs_post_init__ whose store states `name` with the other profile's variant."""
    return _swapped_init(name, None)


def _shared_counters_init(self: ReferenceMessageStore) -> None:
    from pullspec.reference.store import ReferenceMessageStore

    ReferenceMessageStore.__attrs_post_init__(self)
    self._counters = _PerTopicCounters()


class _UntaggedPasses:
    """Wraps a filter so that code 0 (an untagged message) passes every subscription."""

    def __init__(self, inner: MessageFilter) -> None:
        self.inner = inner

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """Code 0 passes; any other code is the wrapped filter's decision."""
        return tags_code == 0 or self.inner.is_matched_by_consume_queue(tags_code)

    def is_matched_by_commit_log(self, message: StoredMessage | None) -> bool:
        """The wrapped filter's decision."""
        return self.inner.is_matched_by_commit_log(message)


def _untagged_get_message(
    self: ReferenceMessageStore,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    max_msg_nums: int,
    message_filter: MessageFilter | None = None,
) -> GetMessageResult:
    from pullspec.reference.store import ReferenceMessageStore

    wrapped = _UntaggedPasses(message_filter) if message_filter is not None else None
    return ReferenceMessageStore.get_message(
        self, group, topic, queue_id, offset, max_msg_nums, wrapped
    )


def _max_is_last_index(
    f: Callable[[int, int | None, int], tuple[int, int]],
    min_logic_offset: int,
    last_file_start: int | None,
    last_file_written: int,
) -> tuple[int, int]:
    low, high = f(min_logic_offset, last_file_start, last_file_written)
    return low, max(high - 1, 0)


def _batch_full_ignoring_count(
    f: Callable[[int, int, int, int, bool, BatchLimits], bool],
    size_py: int,
    _max_msg_nums: int,
    buffer_total: int,
    message_total: int,
    is_in_disk: bool,
    limits: BatchLimits,
) -> bool:
    return f(size_py, 2**31 - 1, buffer_total, message_total, is_in_disk, limits)


def _stop_entry_counted(
    original: Callable[P, tuple[ScanState, bool]], /, *args: P.args, **kwargs: P.kwargs
) -> tuple[ScanState, bool]:
    state, stop = original(*args, **kwargs)
    return (evolve(state, scanned=state.scanned + 1) if stop else state), stop


def _no_read_at_0_elsewhere(
    f: Callable[[int, int, int, int | None, int | None, int], int | None],
    phys: int,
    size: int,
    file_size: int,
    first_file_start: int | None,
    last_file_start: int | None,
    last_file_read_position: int,
) -> int | None:
    at = f(phys, size, file_size, first_file_start, last_file_start, last_file_read_position)
    return None if at is not None and at != phys else at


def _min_correction_strict(
    f: Callable[[int, Sequence[CQEntry], int, int], int],
    first_file_start: int,
    first_file_entries: Sequence[CQEntry],
    commit_log_min: int,
    current: int,
) -> int:
    return f(first_file_start, first_file_entries, commit_log_min + 1, current)


def _empty_values_kept(text: str) -> Properties:
    pairs = [item.split("\x01", 1) for item in text.split("\x02") if "\x01" in item]
    return tuple((k, v) for k, v in pairs if k)


MUTANTS: tuple[Mutant, ...] = (
    _mutant(
        "slave-corrects-offsets",
        "STORE-6",
        "An error status corrects nextBeginOffset even on a slave without offsetCheckInSlave.",
        {"pullspec.spec.store": {"next_offset_correction": lambda old, new, role, check: new}},
    ),
    _mutant(
        "overflow-badly-other-profile",
        "STORE-8",
        "OFFSET_OVERFLOW_BADLY corrects to the other profile's target (4.9 restarts from 0).",
        {},
        __attrs_post_init__=_other_variant_init("overflow_badly_target"),
    ),
    _mutant(
        "overflow-one-advances",
        "STORE-7",
        "offset == maxOffset answers nextBeginOffset = offset + 1 instead of staying.",
        {"pullspec.spec.store": {"overflow_one_next_offset": lambda offset: offset + 1}},
    ),
    _mutant(
        "found-null-roll-off-by-one",
        "STORE-10",
        "OFFSET_FOUND_NULL moves one past the first index of the next consume-queue file.",
        {"pullspec.spec.store": {"consume_queue_roll_next_file": lambda i, u: i + u - i % u + 1}},
    ),
    _mutant(
        "batch-full-ignores-count",
        "BATCH-2",
        "isTheBatchFull ignores maxMsgNums (only the byte and transfer-count limits end a batch).",
        {
            "pullspec.spec.batch": {
                "is_the_batch_full": wrap(batch.is_the_batch_full, _batch_full_ignoring_count)
            },
            "pullspec.spec.scan": {},
            "pullspec.spec.store": {},
        },
    ),
    _mutant(
        "negative-max-allowed-in-4-9",
        "BATCH-4",
        "4.9 treats a negative maxMsgNums like 4.7 does (no Illegal Capacity error).",
        {},
        __attrs_post_init__=_swapped_init("check_result_capacity", lambda n: max(1, n)),
    ),
    _mutant(
        "batch-stop-entry-counted",
        "STORE-11",
        "The entry that makes the batch full counts as examined, so nextBeginOffset skips it.",
        {
            "pullspec.spec.scan": {"scan_entry": wrap(scan.scan_entry, _stop_entry_counted)},
            "pullspec.spec.store": {},
        },
    ),
    _mutant(
        "untagged-passes-filters",
        "FILTER-5",
        "An untagged message (code 0) passes every TAG subscription at the consume-queue stage.",
        {},
        get_message=_untagged_get_message,
    ),
    _mutant(
        "eof-blank-without-8",
        "LAYOUT-7",
        "A record rolls to the next commit-log file only when L > F − w (the 8-byte blank ignored).",
        {"pullspec.spec.layout": {"needs_end_of_file_blank": lambda length, w, f: length > f - w}},
    ),
    _mutant(
        "properties-other-profile",
        "LAYOUT-9",
        "Properties are encoded with the other profile's separator rule (one byte off per message).",
        {},
        __attrs_post_init__=_other_variant_init("message_properties_to_string"),
    ),
    _mutant(
        "min-correction-strict",
        "STORE-19",
        "After expiry a queue's min moves past an entry lying exactly at the commit-log minimum.",
        {
            "pullspec.spec.store": {
                "corrected_min_logic_offset": wrap(
                    spec_store.corrected_min_logic_offset, _min_correction_strict
                )
            }
        },
    ),
    _mutant(
        "queue-offset-per-topic",
        "STORE-18",
        "Queue offsets come from one counter per topic instead of one per queue.",
        {},
        __attrs_post_init__=_shared_counters_init,
    ),
    _mutant(
        "read-at-0-not-served-elsewhere",
        "STORE-21",
        "A read at commit-log offset 0 after its file is deleted finds nothing (MESSAGE_WAS_REMOVING)"
        " instead of the first remaining file's bytes.",
        {
            "pullspec.spec.store": {
                "commit_log_read_position": wrap(
                    spec_store.commit_log_read_position, _no_read_at_0_elsewhere
                )
            }
        },
    ),
    evolve(
        _mutant(
            "empty-property-kept",
            "LAYOUT-13",
            'A property stored with an empty value reads back with it (TAGS="" survives a '
            "send-back).",
            {},
            __attrs_post_init__=_swapped_init("string_to_message_properties", _empty_values_kept),
        ),
        areas=(*_AREAS, "send_back"),
    ),
    _mutant(
        "max-offset-is-last-index",
        "STORE-4",
        "A queue's max offset is its last index, not one past it.",
        {
            "pullspec.spec.store": {
                "queue_min_max_offsets": wrap(spec_store.queue_min_max_offsets, _max_is_last_index)
            }
        },
    ),
)
