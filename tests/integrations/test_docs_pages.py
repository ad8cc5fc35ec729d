"""The documentation site's pages agree with the code: every page in mkdocs.yml's nav exists,
every page links only to pages that exist, and the Python blocks of the getting-started and
presets pages run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUNNABLE = ["getting-started.md", "presets.md"]


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:"):]
    return re.findall(r":\s*([\w./-]+\.md)\s*$", nav, re.M)


def test_nav_pages_exist():
    pages = _nav_pages()
    assert "index.md" in pages and "api.md" in pages and "integrations.md" in pages
    missing = [p for p in pages if not (DOCS / p).is_file()]
    assert not missing, f"mkdocs.yml nav lists missing pages {missing}"


@pytest.mark.parametrize("page", ["index.md", "getting-started.md", "presets.md",
                                  "integrations.md", "architecture.md", "contributing.md"])
def test_relative_links_resolve(page):
    text = (DOCS / page).read_text()
    for target in re.findall(r"\]\(([^)#\s]+\.(?:md|png))(?:#[\w-]+)?\)", text):
        assert (DOCS / target).is_file(), f"docs/{page} links to missing {target}"


@pytest.mark.parametrize("page", RUNNABLE)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)
    assert blocks
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/{page}[{i}]", "exec"), {"__name__": f"doc_{i}"})
