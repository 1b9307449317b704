"""Mutants of CONSUMER_SEND_MSG_BACK (ReferenceSendBack over the reference store); seen by the
send_back area."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pullspec.conformance.mutants._patch import Candidate, forks, mutate
from pullspec.conformance.mutants.base import Mutant
from pullspec.spec.clock import Clock
from pullspec.spec.config import StoreConfig, SubscriptionGroupConfig
from pullspec.spec.profiles import Profile

_RETRY = "pullspec.spec.retry"
_RULE_STEMS = ("retry_target", "max_reconsume_times", "dead_letter_target", "send_back_message")
_RULE_NAMES = {
    p: tuple(f"{rule}_v{p.value.replace('.', '')}" for rule in _RULE_STEMS)
    for p in (Profile.V4_7, Profile.V4_9)
}


def _send_back_mutant(
    name: str, rule: str, doc: str, replace: Callable[[dict[str, Any]], dict[str, Any]]
) -> Mutant:
    """`replace(retry_namespace)` answers the replacements of spec.retry (it may wrap originals)."""

    def build() -> Candidate:
        from pullspec.reference.send_back import ReferenceSendBack
        from pullspec.reference.store import ReferenceMessageStore

        originals = forks({_RETRY: {}})[_RETRY]

        def rules(done: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
            # ReferenceSendBack picks its profile's rules from a table built at import: rebuild
            # it from the patched fork.
            patched = done[_RETRY]
            table = {p: tuple(patched[n] for n in names) for p, names in _RULE_NAMES.items()}
            return {"_RULES": table}

        send_back_class = mutate(
            ReferenceSendBack, {_RETRY: replace(originals), "pullspec.reference.send_back": rules}
        )

        def send_back(
            s: StoreConfig, g: SubscriptionGroupConfig, profile: Profile, clock: Clock
        ) -> Any:
            store = ReferenceMessageStore(config=s, profile=profile, clock=clock)
            return send_back_class(store=store, group_config=g, profile=profile, clock=clock)

        return Candidate(name, send_back=send_back)

    return Mutant(name, rule, ("send_back",), doc, build)


def _dlq_off_by_one(ns: dict[str, Any]) -> dict[str, Any]:
    def shifted(original: Any) -> Any:
        return lambda group, times, limit, delay: original(group, times, limit + 1, delay)

    return {
        "dead_letter_target_v47": shifted(ns["dead_letter_target_v47"]),
        "dead_letter_target_v49": shifted(ns["dead_letter_target_v49"]),
    }


def _header_ignored(ns: dict[str, Any]) -> dict[str, Any]:
    def group_only(header: int | None, group_max: int, version: int) -> int:
        return group_max

    return {"max_reconsume_times_v47": group_only, "max_reconsume_times_v49": group_only}


def _delay_ignores_times(ns: dict[str, Any]) -> dict[str, Any]:
    return {"retry_delay_level": lambda header, times: 3 if header == 0 else header}


MUTANTS: tuple[Mutant, ...] = (
    _send_back_mutant(
        "dlq-threshold-off-by-one",
        "RETRY-4",
        "A record goes to the DLQ only when its reconsumeTimes exceeds max (> instead of >=).",
        _dlq_off_by_one,
    ),
    _send_back_mutant(
        "max-reconsume-ignores-header",
        "RETRY-3",
        "maxReconsumeTimes always comes from the group's retryMaxTimes, never the header.",
        _header_ignored,
    ),
    _send_back_mutant(
        "delay-ignores-reconsume-times",
        "RETRY-5",
        "delayLevel 0 becomes DELAY 3 whatever the record's reconsumeTimes.",
        _delay_ignores_times,
    ),
)
