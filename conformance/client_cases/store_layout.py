"""Cases of area `store_layout` (see conformance.adapters.store_layout for its ops)."""

from __future__ import annotations

import random

from pullspec.conformance.client_cases.base import Case, Step, s


def _sl(name: str, *steps: Step) -> Case:
    return Case("store_layout", name, {}, steps)


def store_layout_edges() -> list[Case]:
    """LAYOUT-1 … 4, 6, STORE-1, 2, 13, 15, 17, CODE-4, 11, 14, FILTER-5."""
    return [
        _sl(
            "layout1-cq-entry",
            s("cq_entry", phys=0, size=0, tagsCode=0),
            s("cq_entry", phys=4096, size=191, tagsCode=65),
            s("cq_entry", phys=2**40, size=1, tagsCode=-1),
        ),
        _sl(
            "layout2-cq-position",
            s("cq_position", index=0, mappedFileSizeConsumeQueue=6_000_000),
            s("cq_position", index=299_999, mappedFileSizeConsumeQueue=6_000_000),
            s("cq_position", index=300_000, mappedFileSizeConsumeQueue=6_000_000),
            s("cq_position", index=5, mappedFileSizeConsumeQueue=90),
        ),
        _sl(
            "layout3-pre-blank",
            s("pre_blank", firstIndex=0, unitsPerFile=4),
            s("pre_blank", firstIndex=6, unitsPerFile=4),
            s("pre_blank", firstIndex=8, unitsPerFile=4),
        ),
        _sl(
            "layout4-store15-commit-log-files",
            *(
                s("commit_log_file", phys=p, mappedFileSizeCommitLog=1024)
                for p in (0, 1023, 1024, 5000)
            ),
        ),
        _sl(
            "layout6-magic",
            *(s("record_magic", magic=m) for m in (-626_843_481, -875_286_124, 0, 1)),
        ),
        _sl(
            "store1-2-code4-start",
            s("get_message_start", offset=7, shutDown=False, runningFlagsReadable=True),
            s("get_message_start", offset=-3, shutDown=True, runningFlagsReadable=True),
            s("get_message_start", offset=0, shutDown=False, runningFlagsReadable=False),
        ),
        _sl(
            "store13-scan-status",
            s("scan_status", status="NO_MATCHED_MESSAGE", returned=[]),
            s("scan_status", status="MESSAGE_WAS_REMOVING", returned=[]),
            s("scan_status", status="FOUND", returned=[3]),
        ),
        _sl(
            "store17-code11-sizes",
            s("buffer_total_size", sizes=[]),
            s("buffer_total_size", sizes=[100, 191]),
            s("success_body", records=["0a0b", "", "ff"]),
        ),
        _sl(
            "code14-outcome",
            *(
                s("pull_outcome_code", status=st, offset=o, brokerRole=r, offsetCheckInSlave=c)
                for st, o, r, c in (
                    ("FOUND", 3, "ASYNC_MASTER", False),
                    ("OFFSET_TOO_SMALL", 0, "ASYNC_MASTER", False),
                    ("OFFSET_TOO_SMALL", 0, "SLAVE", False),
                    ("OFFSET_TOO_SMALL", 0, "SLAVE", True),
                    ("NO_MESSAGE_IN_QUEUE", 0, "SLAVE", False),
                    ("NO_MESSAGE_IN_QUEUE", 5, "ASYNC_MASTER", False),
                    ("OFFSET_OVERFLOW_ONE", 5, "SLAVE", False),
                    ("OFFSET_FOUND_NULL", 5, "SYNC_MASTER", False),
                )
            ),
        ),
        _sl(
            "filter5-untagged",
            *(s("untagged_matches", expression=e) for e in (None, "*", "A", "A || B", "")),
        ),
    ]


def store_layout_random(rng: random.Random, i: int) -> list[Case]:
    """Random offsets and sizes through the file arithmetic."""
    steps = []
    for _ in range(10):
        size = rng.choice([1024, 4096, 1 << 30])
        steps.append(
            s("commit_log_file", phys=rng.randrange(0, 10 * size), mappedFileSizeCommitLog=size)
        )
        steps.append(
            s(
                "cq_position",
                index=rng.randrange(0, 10**6),
                mappedFileSizeConsumeQueue=rng.choice([80, 90, 6_000_000]),
            )
        )
        steps.append(
            s(
                "cq_entry",
                phys=rng.randrange(0, 2**50),
                size=rng.randrange(0, 5000),
                tagsCode=rng.randrange(-(2**31), 2**31),
            )
        )
    return [Case("store_layout", str(i), {}, tuple(steps))]


#: This area's edge cases and seeded random traces (see conformance.client_cases).
EDGES = store_layout_edges
RANDOM = store_layout_random
