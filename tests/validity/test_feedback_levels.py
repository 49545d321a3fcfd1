"""Feedback levels: at ``explain`` no critic of any built-in benchmark names a solution value that the
plan did not already contain; ``binary`` says only which constraint failed; ``hint`` adds suggestions.

Every critic of every benchmark (synth/*, natural_plan/*, TravelPlanner) judges failing plans: each
problem's known-good plan given to the other problems, and good plans edited in a few places (the
fuzzers' edits, derandomized). A *leak* is a value of the problem's own known-good plan (a string
leaf, or the name part of a "Name, City" leaf) that shows up in what the planner would be sent, while
neither the submitted plan nor the query contains it; or a whole item of the good plan (a slot, a
meeting, a day's entry: all its string values at once) spelled out while the plan lacks that item.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from modulo.critic import binary_feedback
from modulo.testing.fuzz import Target, _strings, benchmark_target, edited_plans
from modulo.types import PlanJSON, Problem, Verdict

EDITED = settings(
    max_examples=80, database=None, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
TARGETS = [
    "synth/calendar",
    "synth/tasks",
    "synth/trip",
    "natural_plan/calendar",
    "natural_plan/meeting",
    "natural_plan/trip",
    "travelplanner",
]
_targets: dict[str, Target] = {}


def target(name: str, data_dir: Path) -> Target:
    if name not in _targets:
        _targets[name] = benchmark_target(name, n=6 if name == "travelplanner" else 10, data_dir=data_dir)
    return _targets[name]


def _values(text: str) -> set[str]:
    """A string leaf and, for "Name, City" leaves, the name: values a feedback text could spell out."""
    out = {text.strip()}
    if ", " in text:
        out.add(text.rsplit(", ", 1)[0].strip())
    return {v for v in out if len(v) >= 3 and v not in ("-", "None")}


def _items(value: Any) -> list[dict[str, Any]]:
    """The innermost objects of a plan (a slot, a meeting step, a day): objects with no object inside."""
    if isinstance(value, dict):
        inner = [i for v in value.values() for i in _items(v)]
        return inner or ([value] if not any(isinstance(v, list) for v in value.values()) else [])
    if isinstance(value, list):
        return [i for v in value for i in _items(v)]
    return []


def _spelled(item: dict[str, Any]) -> re.Pattern[str] | None:
    """An item's string values written one after the other ("Monday, 13:00 - 14:00"), or None."""
    leaves = [s.strip() for s in item.values() if isinstance(s, str) and s.strip() not in ("", "-")]
    if len(leaves) < 2:
        return None
    return re.compile(r"\W{1,6}".join(re.escape(v) for v in leaves))


def leaks(problem: Problem, plan: PlanJSON, good: PlanJSON, text: str, common: set[str]) -> list[str]:
    """Values of ``good`` (the problem's known solution) that ``text`` names and ``plan`` lacks;
    ``common``: values found in most good plans (the format's own words: "wait", "travel")."""
    plan_text = json.dumps(plan, ensure_ascii=False) if plan is not None else ""
    allowed = plan_text + "\n" + problem.query
    values = {v for leaf in _strings(good) for v in _values(leaf)} - common
    found = sorted(v for v in values if v in text and v not in allowed)
    plan_items = _items(plan)
    for item in _items(good):
        pattern = _spelled(item)
        if pattern is not None and item not in plan_items and pattern.search(text) and not pattern.search(allowed):
            found.append(pattern.pattern)
    return found


def structural_edits(plan: PlanJSON) -> list[PlanJSON]:
    """``plan`` with one item of one of its lists dropped, doubled, or swapped with the next one."""
    out: list[PlanJSON] = []

    def lists(value: Any, path: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        found = [path] if isinstance(value, list) else []
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
        return found + [p for k, v in children for p in lists(v, (*path, k))]

    for path in lists(plan, ()):
        size = len(_at(plan, path))
        for i in range(size):
            for edit in ("drop", "double", "swap"):
                copy = json.loads(json.dumps(plan))
                items = _at(copy, path)
                if edit == "drop":
                    del items[i]
                elif edit == "double":
                    items.insert(i, json.loads(json.dumps(items[i])))
                elif i + 1 < size:
                    items[i], items[i + 1] = items[i + 1], items[i]
                else:
                    continue
                out.append(copy)
    return out


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def sent_text(v: Verdict) -> str:
    """What a backprompt strategy may quote from a verdict."""
    return v.feedback + "\n" + (v.hint or "")


class Sweep:
    def __init__(self, t: Target, level: str) -> None:
        self.t = t
        self.good = {p.id: plan for p, plan in zip(t.problems, t.plans, strict=True)}
        self.critics = [c.at_level(level) for c in t.critics]
        self.level = level
        self.failed: Counter[str] = Counter()
        self.applicable: Counter[str] = Counter()
        self.leaks: list[tuple[str, str, str]] = []
        per_plan = Counter(v for plan in t.plans for v in {v for leaf in _strings(plan) for v in _values(leaf)})
        self.common = {v for v, n in per_plan.items() if n * 2 >= len(t.plans)}

    def judge(self, problem: Problem, plan: PlanJSON) -> None:
        for c in self.critics:
            try:
                v = c(problem, plan)
            except Exception:  # crashes are the fuzzers' business; here only feedback text matters
                continue
            if v.applicable:
                self.applicable[c.name] += 1
            if v.accepts:
                continue
            self.failed[c.name] += 1
            if self.level == "binary":
                assert v.feedback == binary_feedback(c.description, c.name) and v.hint is None, (c.name, v)
            if self.level == "explain":
                assert v.hint is None, (c.name, v.hint)
            for leak in leaks(problem, plan, self.good[problem.id], sent_text(v), self.common):
                self.leaks.append((c.name, problem.id, leak))

    def run(self) -> None:
        t = self.t
        for problem in t.problems:
            for other in t.problems:
                if other.id != problem.id:
                    self.judge(problem, json.loads(json.dumps(self.good[other.id])))
            for plan in structural_edits(self.good[problem.id]):
                self.judge(problem, plan)

        @EDITED
        @given(edited_plans(t))
        def edited(case: tuple[Problem, PlanJSON]) -> None:
            self.judge(*case)

        edited()


def sweep(name: str, data_dir: Path, level: str) -> Sweep:
    s = Sweep(target(name, data_dir), level)
    s.run()
    for c in s.critics:
        c.at_level("explain")  # the targets are shared between tests
    return s


@pytest.mark.parametrize("name", TARGETS)
def test_explain_feedback_never_names_a_solution_value_the_plan_lacks(name: str, data_dir: Path) -> None:
    s = sweep(name, data_dir, "explain")
    assert not s.leaks, s.leaks[:10]
    # the sweep reached every critic that applies to these problems with failing plans
    missed = sorted(set(s.applicable) - set(s.failed))
    assert not missed, missed
    assert len(s.failed) >= len(s.critics) - 2, (sorted(s.failed), [c.name for c in s.critics])


@pytest.mark.parametrize(
    ("name", "critic"), [("synth/calendar", "synth_earliest"), ("natural_plan/calendar", "calendar_earliest")]
)
def test_hint_level_names_solution_values_so_the_check_can_fail(name: str, critic: str, data_dir: Path) -> None:
    s = sweep(name, data_dir, "hint")
    assert critic in {c for c, _pid, _value in s.leaks}, s.leaks[:5]


@pytest.mark.parametrize("name", ["synth/trip", "travelplanner"])
def test_binary_feedback_says_only_which_constraint_failed(name: str, data_dir: Path) -> None:
    s = sweep(name, data_dir, "binary")
    assert s.failed and not s.leaks
