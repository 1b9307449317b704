"""Mutants of CONSUMER_SEND_MSG_BACK (ReferenceSendBack over the reference store); seen by the
send_back area."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pullspec.conformance.mutants._patch import Candidate, Namespace, forks, mutate
from pullspec.conformance.mutants.base import Mutant
from pullspec.spec.clock import Clock
from pullspec.spec.config import StoreConfig, SubscriptionGroupConfig
from pullspec.spec.profiles import Profile
from pullspec.spec.retry import DeadLetterTarget
from pullspec.spec.ruleset import Ruleset

if TYPE_CHECKING:
    from pullspec.reference.send_back import ReferenceSendBack

_RETRY = "pullspec.spec.retry"


def _send_back_mutant(
    name: str,
    rule: str,
    doc: str,
    replace: Callable[[Namespace], Mapping[str, object]] | None = None,
    swap: Callable[[Ruleset], Ruleset] | None = None,
) -> Mutant:
    """`replace(retry_namespace)` answers the replacements of spec.retry (it may wrap originals);
    `swap(rules)` answers the send-back's ruleset with one function swapped."""

    def build() -> Candidate:
        from pullspec.reference.send_back import ReferenceSendBack
        from pullspec.reference.store import ReferenceMessageStore

        send_back_class = ReferenceSendBack
        if replace is not None:
            originals = forks({_RETRY: {}})[_RETRY]
            send_back_class = mutate(ReferenceSendBack, {_RETRY: replace(originals)})

        def send_back(
            s: StoreConfig, g: SubscriptionGroupConfig, profile: Profile, clock: Clock
        ) -> ReferenceSendBack:
            store = ReferenceMessageStore(config=s, profile=profile, clock=clock)
            built = send_back_class(store=store, group_config=g, profile=profile, clock=clock)
            if swap is not None:
                built.rules = swap(built.rules)
            return built

        return Candidate(name, send_back=send_back)

    return Mutant(name, rule, ("send_back",), doc, build)


def _dlq_off_by_one(rules: Ruleset) -> Ruleset:
    original = rules.dead_letter_target

    def shifted(group: str, times: int, limit: int, delay: int) -> DeadLetterTarget | None:
        return original(group, times, limit + 1, delay)

    return rules.swapped("dead_letter_target", shifted)


def _header_ignored(rules: Ruleset) -> Ruleset:
    def group_only(header: int | None, group_max: int, version: int) -> int:
        return group_max

    return rules.swapped("max_reconsume_times", group_only)


def _delay_ignores_times(ns: Namespace) -> Mapping[str, object]:
    return {"retry_delay_level": lambda header, times: 3 if header == 0 else header}


MUTANTS: tuple[Mutant, ...] = (
    _send_back_mutant(
        "dlq-threshold-off-by-one",
        "RETRY-4",
        "A record goes to the DLQ only when its reconsumeTimes exceeds max (> instead of >=).",
        swap=_dlq_off_by_one,
    ),
    _send_back_mutant(
        "max-reconsume-ignores-header",
        "RETRY-3",
        "maxReconsumeTimes always comes from the group's retryMaxTimes, never the header.",
        swap=_header_ignored,
    ),
    _send_back_mutant(
        "delay-ignores-reconsume-times",
        "RETRY-5",
        "delayLevel 0 becomes DELAY 3 whatever the record's reconsumeTimes.",
        _delay_ignores_times,
    ),
)
