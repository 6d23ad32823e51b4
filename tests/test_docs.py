"""The docs' own rules: page sizes, relative links that resolve, and a README that links every page.

A reference page states what is true now and stays readable (at most 600 lines; results at most 400);
history goes to docs/history/, under the same limit. Every relative link in README.md and docs/
must name a file that exists, so a page moved or renamed cannot leave a dead link behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MAX_LINES = 600
MAX_RESULTS_LINES = 400

# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
EXTERNAL = ("http://", "https://", "mailto:", "ftp://")


def doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md")) + sorted((DOCS / "history").glob("*.md"))


def relative_links(text: str) -> list[str]:
    """The relative link targets of a markdown text, outside fenced code and inline code."""
    targets = []
    in_fence = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        for target in LINK.findall(line):
            if target.startswith(EXTERNAL) or target.startswith("#"):
                continue
            targets.append(target)
    return targets


def dead_links(page: Path, text: str | None = None) -> list[str]:
    """The targets of page's relative links that name no existing file or folder."""
    text = page.read_text() if text is None else text
    dead = []
    for target in relative_links(text):
        path = target.split("#", 1)[0]
        if not path or not (page.parent / path).exists():
            dead.append(target)
    return dead


def test_docs_exist_with_guide_and_history():
    names = {p.name for p in DOCS.glob("*.md")}
    assert {"guide.md", "results.md"} <= names
    assert list((DOCS / "history").glob("*.md")), "docs/history/ holds no page"


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_size(page: Path):
    limit = MAX_RESULTS_LINES if page == DOCS / "results.md" else MAX_LINES
    lines = len(page.read_text().splitlines())
    assert lines <= limit, f"{page.relative_to(ROOT)} has {lines} lines, over {limit}: move history to docs/history/"


@pytest.mark.parametrize("page", [ROOT / "README.md", *doc_pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    assert dead_links(page) == [], f"dead links in {page.relative_to(ROOT)}"


def test_readme_links_every_docs_page():
    linked = {(ROOT / target.split("#", 1)[0]).resolve() for target in relative_links((ROOT / "README.md").read_text())}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert missing == [], f"README.md does not link {missing}"


def test_every_history_page_is_indexed():
    index = DOCS / "history" / "README.md"
    linked = {(index.parent / t.split("#", 1)[0]).resolve() for t in relative_links(index.read_text())}
    missing = [p.name for p in sorted((DOCS / "history").glob("*.md"))
               if p.name != "README.md" and p.resolve() not in linked]
    assert missing == [], f"docs/history/README.md does not list {missing}"


def test_checker_finds_a_planted_dead_link():
    text = ("[guide](guide.md) ![plot](img/results-wan.png) [web](https://example.org) [top](#summary)\n"
            "[gone](no-such-page.md#part) `[code](not-a-link.md)`\n```\n[fenced](also-not.md)\n```\n")
    assert dead_links(DOCS / "results.md", text) == ["no-such-page.md#part"]
