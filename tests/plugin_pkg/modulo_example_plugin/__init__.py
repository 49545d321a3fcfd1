"""An example third-party critic: limits how long any string field of a plan may be."""

from __future__ import annotations

from typing import Any

from modulo import Problem, Verdict, critic


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@critic("example/max_words", group="style", description="no text field of the plan is longer than max_words words")
def max_words(problem: Problem, plan: Any, *, max_words: int = 30) -> Verdict:
    for text in _strings(plan):
        n = len(text.split())
        if n > max_words:
            return Verdict.fail(f"The entry '{text[:40]}...' has {n} words; keep every entry under {max_words}.", words=n)
    return Verdict.ok()
