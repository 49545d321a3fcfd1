"""Fuzzing the reformulator's parsers and the critics with Hypothesis (a dev dependency).

A :class:`Target` is a benchmark with a few problems and plans known to be good for them, supplied by
the benchmark's ``fuzz_cases`` hook (synthesized witnesses, gold plans, golden plans): any registered
benchmark can be fuzzed, a plugin's as well as a built-in. Strategies draw:

- texts for the parsers: arbitrary text (lone surrogates and control characters included), a good
  plan rendered as text or JSON and then cut, spliced, repeated or sprinkled with junk;
- plans for the critics: arbitrary JSON, and good plans edited in one to four places (a value
  replaced by another value of the plan, a number, an empty or huge string, None, a list or an
  object; an item dropped, doubled or moved; a key removed or added), so that many of them still
  pass the format checks and reach each critic's own logic.

The contracts checked (:func:`check_text`, :func:`check_plan`): ``extract_json`` returns a value no
deeper than ``MAX_JSON_DEPTH`` or raises PlanFormatError; a benchmark's ``parse`` returns a value or
raises PlanFormatError, and the reformulator's validation of that value never raises; plan
validation raises nothing but PlanFormatError; the format critic returns a Verdict for any valid
plan, and every critic returns one for any plan the format critic accepts (what the loop runs).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ..benchmark import Benchmark
from ..binding import bind_benchmark, bind_critics
from ..critic import FORMAT_GROUP, Critic
from ..errors import PlanFormatError
from ..reformulate import MAX_JSON_DEPTH, _depth, extract_json, validated
from ..types import PlanJSON, Problem, Verdict


@dataclass
class Target:
    """A benchmark, some of its problems, a good plan per problem, and its bound critics."""

    name: str
    benchmark: Benchmark
    problems: list[Problem]
    plans: list[PlanJSON]
    critics: list[Critic]
    #: string leaves of the good plans: edits reuse them, so edited plans often keep their format
    words: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def __repr__(self) -> str:
        return f"<fuzz target {self.name}: {len(self.problems)} problems, {len(self.critics)} critics>"


def benchmark_critics(benchmark: Benchmark) -> list[Critic]:
    """Every critic the benchmark declares, bound with its defaults, in the loop's order (format first)."""
    from ..metacontroller import order_critics

    return order_critics(bind_critics(benchmark.critic_names(), benchmark))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def make_target(name: str, benchmark: Benchmark, cases: Sequence[tuple[Problem, PlanJSON]]) -> Target:
    """A target from ``(problem, good plan)`` pairs (pairs whose plan is None are left out)."""
    pairs = [(p, plan) for p, plan in cases if plan is not None]
    words = sorted({s for _, plan in pairs for s in _strings(plan)})
    return Target(
        name=name,
        benchmark=benchmark,
        problems=[p for p, _ in pairs],
        plans=[plan for _, plan in pairs],
        critics=benchmark_critics(benchmark),
        words=words,
    )


def benchmark_target(name: str, n: int = 6, data_dir: Path | None = None) -> Target:
    """A target for the registered benchmark ``name`` (built with its defaults and ``data_dir``), seeded
    with the good plans of its :meth:`~modulo.benchmark.Benchmark.fuzz_cases` hook."""
    bench = bind_benchmark(name, data_dir=data_dir)
    return make_target(name, bench, bench.fuzz_cases(n))


# -- strategies ---------------------------------------------------------------------------------------
ANY_CHAR = st.characters(codec=None, categories=None)  # surrogates and control characters included

#: fragments that broke parsers before: deep nesting, numbers too long to convert, lone surrogate
#: escapes, NUL and bidi characters, fences, special floats
JUNK = (
    "[" * 3000,
    '{"a": ' * 400,
    "]" * 50,
    "9" * 5000,
    '"\\ud800"',
    "\\udfff",
    "\x00",
    "\u202e",
    "```json\n",
    "```",
    "NaN",
    "-Infinity",
    "1e999",
    "\r\n",
)

json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.text(ANY_CHAR, max_size=10),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=12), inner, max_size=6)),
    max_leaves=40,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _same_kind(draw: st.DrawFn, target: Target, value: Any) -> Any:
    """A replacement of the same JSON type as ``value`` (so the plan often keeps its format)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + draw(st.sampled_from([-1, 1, -2, 2, 10, -10, 100, -100, -value, 10**6]))
    if isinstance(value, float):
        return draw(st.sampled_from([value + 1, value - 1, value * 10, -value, 0.0, math.nan, math.inf]))
    if isinstance(value, str):
        choice = draw(st.sampled_from(["word", "word", "edit", "digits", "empty", "case"]))
        if choice == "word" and target.words:
            return draw(st.sampled_from(target.words))
        if choice == "edit" and value:
            i = draw(st.integers(min_value=0, max_value=len(value)))
            return value[:i] + draw(st.text(max_size=4)) + value[i + draw(st.integers(min_value=0, max_value=3)) :]
        if choice == "digits":
            return value.translate(str.maketrans("0123456789", "1234567890"))
        if choice == "case":
            return value.swapcase()
        return ""
    return draw(json_leaves)


@st.composite
def edited_plans(draw: st.DrawFn, target: Target) -> tuple[Problem, PlanJSON]:
    """A problem and one of the target's good plans (for any problem), edited in up to four places:
    mostly a value replaced by one of the same type, sometimes by any value, or an item dropped,
    doubled or moved, a key added."""
    problem = draw(st.sampled_from(target.problems))
    plan: Any = json.loads(json.dumps(draw(st.sampled_from(target.plans))))
    anything = st.one_of(
        json_leaves,
        st.sampled_from(["", " ", "-", "x" * 5000, "0", "-1", "9:99", "25:00", "Day 0", "NaN", "None"]),
        st.sampled_from([0, -1, 1, 10**9, -(10**9), 1.5, math.nan, math.inf]),
        st.lists(json_leaves, max_size=3),
        st.dictionaries(st.text(max_size=8), json_leaves, max_size=3),
    )
    actions = ["same"] * 6 + ["any", "drop", "double", "move", "add_key"]
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        path = draw(st.sampled_from(_paths(plan)))
        action = draw(st.sampled_from(actions))
        if not path:
            plan = draw(anything) if action == "any" else plan
            continue
        parent = _get(plan, path[:-1])
        key = path[-1]
        if action == "same":
            parent[key] = _same_kind(draw, target, parent[key])
        elif action == "any":
            parent[key] = draw(anything)
        elif action == "drop":
            del parent[key]
        elif action == "double" and isinstance(parent, list):
            parent.insert(key, json.loads(json.dumps(parent[key])))
        elif action == "move" and isinstance(parent, list) and len(parent) > 1:
            item = parent.pop(key)
            parent.insert(draw(st.integers(min_value=0, max_value=len(parent))), item)
        elif action == "add_key" and isinstance(parent, dict):
            parent[draw(st.text(max_size=10))] = draw(anything)
    return problem, plan


def plans(target: Target) -> st.SearchStrategy[tuple[Problem, PlanJSON]]:
    """Plans for the critics: mostly edited good plans, some arbitrary JSON."""
    arbitrary = st.tuples(st.sampled_from(target.problems), json_values)
    return st.one_of(edited_plans(target), edited_plans(target), edited_plans(target), arbitrary)


def _render(target: Target, problem: Problem, plan: PlanJSON) -> str:
    try:
        return target.benchmark.plan_text(plan, problem)
    except Exception:  # a plan the renderer cannot write: its JSON will do
        return json.dumps(plan)


@st.composite
def texts(draw: st.DrawFn, target: Target) -> tuple[Problem, str]:
    """Answers for the parsers: arbitrary text, or a (possibly edited) good plan as text or JSON, then
    cut, spliced, repeated or sprinkled with junk."""
    problem, plan = draw(
        st.one_of(st.tuples(st.sampled_from(target.problems), st.sampled_from(target.plans)), edited_plans(target))
    )
    kind = draw(st.sampled_from(["arbitrary", "rendered", "rendered", "json", "fenced"]))
    if kind == "arbitrary":
        return problem, draw(st.text(ANY_CHAR, max_size=300))
    text = (
        _render(target, problem, plan)
        if kind == "rendered"
        else json.dumps(plan, indent=draw(st.sampled_from([None, 1])))
    )
    if kind == "fenced":
        text = f"Sure! Here it is:\n```json\n{text}\n```\nAnything else?"
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        n = len(text)
        i = draw(st.integers(min_value=0, max_value=n))
        j = draw(st.integers(min_value=i, max_value=min(n, i + 200)))
        action = draw(st.sampled_from(["cut", "delete", "repeat", "insert", "digits", "truncate"]))
        if action == "cut":
            text = text[:i]
        elif action == "delete":
            text = text[:i] + text[j:]
        elif action == "repeat":
            text = text[:j] + text[i:j] * draw(st.integers(min_value=1, max_value=50)) + text[j:]
        elif action == "insert":
            junk = st.one_of(st.text(ANY_CHAR, max_size=20), st.sampled_from(JUNK))
            text = text[:i] + draw(junk) + text[i:]
        elif action == "digits":
            text = text[:i] + text[i:j].translate(str.maketrans("0123456789", "9876543210")) + text[j:]
        else:
            text = text[: max(0, n - j + i)]
    return problem, text


# -- contracts -------------------------------------------------------------------------------------------
class ContractError(AssertionError):
    """A parser or critic broke its contract (the input is in the message)."""


def check_text(target: Target, problem: Problem, text: str) -> None:
    """``extract_json`` and the benchmark's parser on ``text``: a value or a PlanFormatError, nothing else."""
    target.counts["texts"] += 1
    try:
        value = extract_json(text)
    except PlanFormatError:
        target.counts["extract_json:error"] += 1
    else:
        if _depth(value) > MAX_JSON_DEPTH:
            raise ContractError(f"extract_json returned a value deeper than {MAX_JSON_DEPTH}: {text[:200]!r}")
        target.counts["extract_json:value"] += 1
        validated(target.benchmark, value)
    if target.benchmark.has_parser:
        try:
            parsed = target.benchmark.parse(text, problem)
        except PlanFormatError:
            target.counts["parse:error"] += 1
        else:
            target.counts["parse:value"] += 1
            out = validated(target.benchmark, parsed)
            target.counts["parse:valid" if out.plan is not None else "parse:invalid"] += 1


def check_plan(target: Target, problem: Problem, plan: PlanJSON) -> list[Verdict]:
    """Validation and every critic on ``plan`` as the loop would run them (format first, gating the rest)."""
    target.counts["plans"] += 1
    try:
        value = target.benchmark.validate_plan(plan)
    except PlanFormatError:
        target.counts["invalid"] += 1
        return []
    verdicts: list[Verdict] = []
    format_ok = True
    for critic in target.critics:
        if not format_ok and critic.group != FORMAT_GROUP:
            break
        verdict = critic(problem, value)  # a crash is a CriticError: the contract is broken
        target.counts[f"critic:{critic.name}"] += 1
        verdicts.append(verdict)
        if critic.group == FORMAT_GROUP and not verdict.accepts:
            format_ok = False
    target.counts["format_ok" if format_ok else "format_failed"] += 1
    if format_ok and all(v.accepts for v in verdicts):
        target.counts["all_accept"] += 1
    return verdicts
