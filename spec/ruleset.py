"""The ruleset of a profile: every version difference of the spec as the function stating it in
that profile.

`Ruleset.of(profile)` is what reference, fast and conformance call instead of choosing variants
by hand (`rules.overflow_badly_target(min_offset, max_offset)`); it is the one place where a
profile decides anything. Each spec module with a changed rule declares its part in a `Rules`
class (`spec.store.StoreRules`, …) and calls its changed rules through it; this class combines
them all, so a ruleset is accepted wherever one module's rules are. A test checks that every rule
whose variants differ between the profiles has its functions here.

Example: ``Ruleset.of(Profile.V4_9).overflow_badly_target(0, 5)`` is 5 (STORE-8: 4.9 corrects
to maxOffset), ``Ruleset.of(Profile.V4_7).overflow_badly_target(0, 5)`` is 0.
"""

from __future__ import annotations

from pullspec.spec.allocate import AllocateRules
from pullspec.spec.batch import BatchRules
from pullspec.spec.consume_concurrently import ConsumeConcurrentlyRules
from pullspec.spec.consume_orderly import ConsumeOrderlyRules
from pullspec.spec.layout import LayoutRules
from pullspec.spec.offset_store import OffsetStoreRules
from pullspec.spec.process_queue import ProcessQueueRules
from pullspec.spec.pull_decision import PullDecisionRules
from pullspec.spec.pull_from_where import PullFromWhereRules
from pullspec.spec.pull_request import PullRequestRules
from pullspec.spec.pull_result import PullResultRules
from pullspec.spec.pull_route import PullRouteRules
from pullspec.spec.rebalance import RebalanceRules
from pullspec.spec.record import RecordRules
from pullspec.spec.retry import RetryRules
from pullspec.spec.store import StoreRules


class Ruleset(
    AllocateRules,
    BatchRules,
    ConsumeConcurrentlyRules,
    ConsumeOrderlyRules,
    LayoutRules,
    OffsetStoreRules,
    ProcessQueueRules,
    PullDecisionRules,
    PullFromWhereRules,
    PullRequestRules,
    PullResultRules,
    PullRouteRules,
    RebalanceRules,
    RecordRules,
    RetryRules,
    StoreRules,
):
    """Every version difference of the spec in one profile (see `spec.rules.Rules`).

    Example: ``Ruleset.of("4.7").retries_undeliverable_record()`` is False (RETRY-9).
    """
