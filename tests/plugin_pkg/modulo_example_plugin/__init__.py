"""An example third-party critic: limits how long any string field of a plan may be."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from modulo import Problem, Verdict, critic


def _texts(plan: Any) -> Iterator[str]:
    """The plan's text fields, in document order (a JSON plan: dicts, lists, strings and scalars)."""
    pending = [plan]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, (dict, list)):
            pending.extend(reversed(list(value.values()) if isinstance(value, dict) else value))


@critic("example/max_words", group="style", description="no text field of the plan is longer than max_words words")
def max_words(problem: Problem, plan: Any, *, max_words: int = 30) -> Verdict:
    for text in _texts(plan):
        n = len(text.split())
        if n > max_words:
            return Verdict.fail(f"The entry '{text[:40]}...' has {n} words; keep every entry under {max_words}.", words=n)
    return Verdict.ok()
