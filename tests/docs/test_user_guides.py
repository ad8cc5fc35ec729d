"""The user guides (README.md and docs/*.md but the lab log, docs/experiments.md) describe the
project as it is:

- no commit ids and no asides about the session that wrote them ("not run for lack of
  time", "the development machine"): that record belongs in docs/experiments.md;
- the README stays a five-minute read: under :data:`README_WORDS` words outside its
  generated blocks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB_LOG = "docs/experiments.md"
USER_GUIDES = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")
                                    if f"docs/{p.name}" != LAB_LOG)]

README_WORDS = 1200
"""The README's limit, in words (code blocks included) outside its generated blocks."""

_HEX = r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}"
"""A commit-id-like token: 7 to 40 hex digits, letters and digits both (so neither a word
nor a number)."""

_NEAR = r"commits?|revision|worktree|git|HEAD|checkout|code version|before|after"
"""Words that make a hex token next to them a commit id."""

COMMIT_ID = re.compile(
    rf"\b(?:{_NEAR})\b[^.]{{0,30}}?\b{_HEX}\b"         # "at commit 9f0beea", "before (537544f)"
    rf"|\b{_HEX}\b[^.]{{0,30}}?\b(?:{_NEAR})\b"        # "9f0beea, the commit"
    rf"|\b(?:commits?|revision|worktree)\s+(?:at\s+|of\s+)?[0-9]{{7,40}}\b"  # "worktree of 7628988"
    rf"|\b{_HEX}\+src\.",                              # a code version: "068749b+src.34d4d21e"
    re.IGNORECASE)

ASIDES = ("lack of time", "development machine", "this session", "this round",
          "in this round", "not run for")
"""Phrases of a session's notes, not of a guide (matched case-insensitively, across line
breaks)."""


def provenance(text: str) -> list[str]:
    """The commit ids and session asides in ``text``, each as ``line N: excerpt``."""
    found = [(m.start(), m.group(0)) for m in COMMIT_ID.finditer(text)]
    for phrase in ASIDES:
        pattern = r"\s+".join(map(re.escape, phrase.split()))
        found += [(m.start(), m.group(0)) for m in
                  re.finditer(rf"\b{pattern}\b", text, re.IGNORECASE)]
    return [f"line {text.count(chr(10), 0, at) + 1}: {' '.join(s.split())!r}"
            for at, s in sorted(found)]


def test_the_provenance_check_finds_commit_ids_and_asides():
    for bad in ("models trained at commit 9f0beea (before the statistics)",
                "| before (537544f) | after |",
                "code version `068749b+src.34d4d21eb293`",
                "a worktree of 7628988, the tree before this work",
                "not run for lack\nof time", "on the 2-core Development\nMachine",
                "measured in this session", "Commit a1b2c3d4e5f6 changed it", "at commit\n9f0beea"):
        assert provenance(bad), bad
    for good in ("seeds 0-49 and 1,000,000 steps", "a deadline of 10000 slots",
                 "the config hash 0f32676675234e0f of the preset", "sha256 of the workload",
                 "say why in the commit message", "`src.<digest>`, the digest",
                 "a 2-core machine shared with other jobs", "before the first episode"):
        assert not provenance(good), good


@pytest.mark.parametrize("rel", USER_GUIDES)
def test_user_guides_carry_no_provenance(rel):
    found = provenance((ROOT / rel).read_text())
    assert not found, (f"{rel}: commit ids or session notes belong in {LAB_LOG} (move what "
                       f"matters for the record there):\n  " + "\n  ".join(found))


def test_readme_stays_short():
    text = (ROOT / "README.md").read_text()
    prose = re.sub(r"<!-- BEGIN (\S+) -->.*?<!-- END \1 -->", "", text, flags=re.S)
    words = len(prose.split())
    assert words < README_WORDS, (f"README.md: {words} words outside its generated blocks, "
                                  f"the limit is {README_WORDS}: move detail to docs/")
