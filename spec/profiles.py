"""Version profiles: `4.7` (tag rocketmq-all-4.7.1, the seeds' code) and `4.9` (rocketmq-all-4.9.7).

A rule that changed between the tags has one variant per profile; the catalogue
(`spec.rules`) records which variant applies to which profile.
"""

from __future__ import annotations

import enum

from pullspec.spec.errors import InvalidArgumentError


class Profile(enum.Enum):
    """A RocketMQ release whose behaviour the spec reproduces."""

    V4_7 = "4.7"
    V4_9 = "4.9"

    @property
    def tag(self) -> str:
        """The Apache RocketMQ git tag the profile was checked against."""
        return {"4.7": "rocketmq-all-4.7.1", "4.9": "rocketmq-all-4.9.7"}[self.value]

    @classmethod
    def parse(cls, text: str | Profile) -> Profile:
        """Parse "4.7", "4.9", "4.7.1", "4.9.7" (or a Profile) into a Profile."""
        if isinstance(text, Profile):
            return text
        for p in cls:
            if text in (p.value, p.tag, p.tag.removeprefix("rocketmq-all-")):
                return p
        raise InvalidArgumentError("profile", text, "expected one of 4.7, 4.9, 4.7.1, 4.9.7")


ALL_PROFILES: tuple[Profile, ...] = (Profile.V4_7, Profile.V4_9)
DEFAULT_PROFILE = Profile.V4_9
