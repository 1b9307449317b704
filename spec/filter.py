"""FILTER — tag-hash filtering: tag codes, subscription expressions and the broker's filter."""

from __future__ import annotations

import attrs

from pullspec.spec.errors import InvalidArgumentError
from pullspec.spec.message import StoredMessage
from pullspec.spec.rules import rule

SUB_ALL = "*"
EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"
TAG_SEPARATOR = "||"


class SubscriptionParseError(InvalidArgumentError):
    """A subscription expression that FilterAPI.buildSubscriptionData cannot build (e.g. "||")."""


@rule(
    "FILTER-2",
    source="FilterAPI.buildSubscriptionData; MessageExtBrokerInner.tagsString2tagsCode",
    seeds=("004_60fc00b6c6a023ff.txt",),
)
def java_string_hash(text: str) -> int:
    """A tag's code is Java's String.hashCode: h = 31·h + c over the UTF-16 code units, wrapped
    to a signed 32-bit int.

    post: -(2**31) <= __return__ < 2**31
    """
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@rule(
    "FILTER-1",
    source="CommitLog.checkMessageAndReturnSize; MessageExtBrokerInner.tagsString2tagsCode",
    seeds=(
        "000_26b83a4251c26823.txt",
        "002_c88c8921902728c1.txt",
        "004_60fc00b6c6a023ff.txt",
        "003_97f7c1df5f6104bc.txt",
    ),
)
def tags_string_to_tags_code(tags: str | None) -> int:
    """The consume-queue tags code of a message is the Java hashCode of its whole TAGS value, or
    0 when the message has no tag or an empty one.

    post: -(2**31) <= __return__ < 2**31
    post: bool(tags) or __return__ == 0
    """
    # Check that the message has a tag at all.
    if tags is None or tags == "":
        return 0
    return java_string_hash(tags)


@attrs.frozen
class SubscriptionData:
    """A consumer's subscription to one topic (SubscriptionData): expression, tags and codes."""

    topic: str
    sub_string: str
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False
    sub_version: int = 0

    @property
    def is_sub_all(self) -> bool:
        """True for the "*" subscription."""
        return self.sub_string == SUB_ALL


def _java_trim(text: str) -> str:
    """Java's String.trim: strip characters ≤ U+0020 from both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: null, "" and "TAG" are tag expressions."""
    return expression_type is None or expression_type in ("", EXPRESSION_TYPE_TAG)


@rule("FILTER-3", source="FilterAPI.buildSubscriptionData", seeds=("004_60fc00b6c6a023ff.txt",))
def build_subscription_data(
    topic: str, sub_string: str | None, expression_type: str | None = None
) -> SubscriptionData:
    """A TAG expression that is null, empty or exactly "*" subscribes to all; otherwise its
    "||"-separated, trimmed, non-empty pieces are the tags and their hash codes the codes.

    raises: SubscriptionParseError

    post: __return__.sub_string == "*" or len(__return__.code_set) <= len(__return__.tags_set)
    """
    if not is_tag_type(expression_type):
        assert expression_type is not None
        return SubscriptionData(topic, sub_string or "", expression_type=expression_type)
    # Check that the expression names anything at all.
    if sub_string is None or sub_string in ("", SUB_ALL):
        return SubscriptionData(topic, SUB_ALL)
    pieces = sub_string.split(TAG_SEPARATOR)
    while pieces and pieces[-1] == "":
        pieces.pop()  # Java's split drops trailing empty strings
    # Check that the split produced at least one piece (Java throws "subString split error").
    if not pieces:
        raise SubscriptionParseError("sub_string", sub_string, "subString split error")
    tags: list[str] = []
    for piece in pieces:
        tag = _java_trim(piece) if piece else ""
        if tag and tag not in tags:
            tags.append(tag)
    return SubscriptionData(
        topic,
        sub_string,
        tags_set=frozenset(tags),
        code_set=frozenset(java_string_hash(t) for t in tags),
    )


def _low_32(value: int) -> int:
    """Long.intValue(): the low 32 bits as a signed int."""
    v = value & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


@rule(
    "FILTER-4",
    source="ExpressionMessageFilter.isMatchedByConsumeQueue",
    seeds=("004_60fc00b6c6a023ff.txt", "000_26b83a4251c26823.txt", "002_c88c8921902728c1.txt"),
)
def is_matched_by_consume_queue(
    subscription: SubscriptionData | None, tags_code: int | None
) -> bool:
    """At the consume-queue stage a TAG subscription matches when it is absent, in class-filter
    mode, the code is null, the expression is "*", or its code set holds the code's low 32 bits.

    post: __return__ if (subscription is None or tags_code is None) else True
    """
    if subscription is None or subscription.class_filter_mode:
        return True
    if not is_tag_type(subscription.expression_type):
        return True  # SQL92 (FILTER-8) is not modelled: the bloom stage cannot prove a miss
    # A null code (unknown tag) matches every TAG subscription.
    if tags_code is None:
        return True
    if subscription.sub_string == SUB_ALL:
        return True
    return _low_32(tags_code) in subscription.code_set


@rule(
    "FILTER-5",
    source="ExpressionMessageFilter.isMatchedByConsumeQueue; DefaultMessageStore.getMessage",
    seeds=("004_60fc00b6c6a023ff.txt",),
)
def untagged_message_matches(subscription: SubscriptionData) -> bool:
    """An untagged message has code 0, so the broker passes it only to "*" and to subscriptions
    naming a tag whose hash code is 0.

    post: __return__ == is_matched_by_consume_queue(subscription, 0)
    """
    return is_matched_by_consume_queue(subscription, tags_string_to_tags_code(None))


@rule(
    "FILTER-6",
    source="ExpressionMessageFilter.isMatchedByCommitLog",
    seeds=("000_26b83a4251c26823.txt", "004_60fc00b6c6a023ff.txt"),
)
def is_matched_by_commit_log(subscription: SubscriptionData | None) -> bool:
    """At the commit-log stage every TAG subscription matches: the broker never compares tag
    strings, so hash collisions reach the client.

    post: __return__
    """
    # SQL92 commit-log evaluation (FILTER-8) is not modelled; TAG and class filters always pass
    return True


@rule(
    "FILTER-7",
    source="PullMessageProcessor.processRequest",
    seeds=("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"),
)
def retry_filter_selected(filter_support_retry: bool) -> bool:
    """A pull uses ExpressionForRetryMessageFilter when filterSupportRetry is on, else
    ExpressionMessageFilter, and keeps the same filter object with a held request.

    post: __return__ == filter_support_retry
    """
    return filter_support_retry


@rule(
    "FILTER-8",
    source="ExpressionMessageFilter; ConsumerFilterData.isMsgInLive",
    seeds=("004_60fc00b6c6a023ff.txt", "000_26b83a4251c26823.txt"),
)
def sql92_allowed(expression_type: str | None, enable_property_filter: bool) -> bool:
    """A non-TAG (SQL92) subscription is served only when enablePropertyFilter is on.

    post: __return__ if is_tag_type(expression_type) else __return__ == enable_property_filter
    """
    return is_tag_type(expression_type) or enable_property_filter


@rule(
    "FILTER-9",
    source="ExpressionForRetryMessageFilter.isMatchedByCommitLog",
    seeds=("002_c88c8921902728c1.txt", "004_60fc00b6c6a023ff.txt"),
)
def retry_filter_matches_commit_log(subscription: SubscriptionData | None) -> bool:
    """The retry-aware filter differs only at the commit-log stage for SQL subscriptions, so for
    TAG subscriptions it matches every record, as FILTER-6.

    post: __return__ == is_matched_by_commit_log(subscription)
    """
    return is_matched_by_commit_log(subscription)


@attrs.frozen
class ExpressionMessageFilter:
    """The broker's filter for one subscription (ExpressionMessageFilter), TAG expressions."""

    subscription: SubscriptionData | None

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """FILTER-4."""
        return is_matched_by_consume_queue(self.subscription, tags_code)

    def is_matched_by_commit_log(self, message: StoredMessage | None) -> bool:
        """FILTER-6."""
        return is_matched_by_commit_log(self.subscription)


def tag_filter(topic: str, expression: str | None) -> ExpressionMessageFilter | None:
    """The broker filter for a TAG `expression` on `topic` (None expression = no filter)."""
    if expression is None:
        return None
    return ExpressionMessageFilter(build_subscription_data(topic, expression))
