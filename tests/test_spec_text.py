"""The spec's text tells the truth: a `# Verify` comment stands directly over the assert it names,
as in consensus-specs; a guard or a note is a plain comment."""

from __future__ import annotations

import re
from pathlib import Path

SPEC = Path(__file__).resolve().parent.parent / "spec"
_VERIFY = re.compile(r"^\s*# Verify\b")


def verify_comments_not_over_an_assert(text: str) -> list[int]:
    """The line numbers of `# Verify` comments whose comment block is not followed by an assert."""
    lines = text.splitlines()
    bad = []
    for n, line in enumerate(lines):
        if not _VERIFY.match(line):
            continue
        following = n + 1
        while following < len(lines) and lines[following].lstrip().startswith("#"):
            following += 1
        if following == len(lines) or not lines[following].lstrip().startswith("assert "):
            bad.append(n + 1)
    return bad


def test_the_checker_tells_an_assert_from_a_guard() -> None:
    text = "# Verify x is set\nassert x\n# Verify y\n# (continued)\nif y:\n    pass\n"
    assert [3] == verify_comments_not_over_an_assert(text)


def test_every_verify_comment_in_spec_stands_over_an_assert() -> None:
    found = {
        path.name: bad
        for path in sorted(SPEC.glob("*.py"))
        if (bad := verify_comments_not_over_an_assert(path.read_text(encoding="utf-8")))
    }
    assert {} == found
