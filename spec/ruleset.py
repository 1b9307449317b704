"""The ruleset of a profile: every version difference of the spec as the function stating it in
that profile.

`Ruleset(profile)` is what reference, fast and conformance call instead of choosing variants by
hand (`rules.overflow_badly_target(min_offset, max_offset)`); it is the one place where a profile
decides anything. Each spec module with a changed rule declares its rules in a `Rules` class
(`spec.store.StoreRules`, …); this class combines them all, so a ruleset can be passed wherever
one module's rules are expected. `Ruleset.of(profile)` is built once per profile.

Example: ``Ruleset.of(Profile.V4_9).overflow_badly_target(0, 5)`` is 5 (STORE-8: 4.9 corrects
to maxOffset), ``Ruleset.of(Profile.V4_7).overflow_badly_target(0, 5)`` is 0.
"""

from __future__ import annotations

from pullspec.spec.batch import BatchRules
from pullspec.spec.layout import LayoutRules


class Ruleset(BatchRules, LayoutRules):
    """Every version difference of the spec in one profile (see `spec.rules.Rules`)."""
