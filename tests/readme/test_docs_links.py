"""The documents' structure that tests/readme/test_readme_commands.py does not run: relative links and their
anchors resolve, code fences are closed, and benchmarks/README.md has an entry for every script in
benchmarks/ (fast: no command is run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.readme.test_readme_commands import DOCS, REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of ``path``: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-`` (headings inside code fences are not headings)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return found


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc: str) -> None:
    source = REPO / doc
    text = source.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        path = (source.parent / file).resolve() if file else source
        if not path.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.name}")
    assert not broken, f"{doc}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", DOCS)
def test_code_fences_are_closed(doc: str) -> None:
    fences = re.findall(r"^ *```", (REPO / doc).read_text(encoding="utf-8"), re.M)
    assert len(fences) % 2 == 0, f"{doc}: {len(fences)} code fences, one is not closed"


def test_every_benchmark_script_has_an_entry() -> None:
    text = (REPO / "benchmarks" / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((REPO / "benchmarks").glob("*.py")) if f"`{p.name}`" not in text]
    assert not missing, "benchmarks/README.md does not describe: " + ", ".join(missing)


def test_anchor_rule_matches_a_known_heading() -> None:
    """The anchor rule above gives GitHub's anchor for a heading with punctuation."""
    assert "large-runs" in anchors(REPO / "README.md")
    assert "the-runs-end-with-the-critics-in-worker-processes---heavy" in anchors(REPO / "benchmarks" / "README.md")
