"""Hypothesis fuzzing of the reformulator's parsers and of every critic (small sizes; the benchmark
script ``benchmarks/reliability_fuzz.py`` runs ten thousand inputs each), and the crashing inputs
found so far, kept as regression tests.

Set ``MODULO_FUZZ_EXAMPLES`` to run more examples here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modulo import components
from modulo.errors import PlanFormatError
from modulo.reformulate import MAX_JSON_DEPTH, MAX_REASON_CHARS, extract_json, validated
from modulo.testing.fuzz import (
    ANY_CHAR,
    JUNK,
    Target,
    benchmark_target,
    check_plan,
    check_text,
    json_values,
    plans,
    texts,
)

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out

EXAMPLES = int(os.environ.get("MODULO_FUZZ_EXAMPLES", "120"))
FUZZ = settings(
    max_examples=EXAMPLES, database=None, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)

SYNTH = ["tasks", "calendar", "trip"]
NATURAL_PLAN = ["trip", "meeting", "calendar"]
_targets: dict[str, Target] = {}


def target(name: str, data_dir: Path | None = None) -> Target:
    if name not in _targets:
        _targets[name] = benchmark_target(name, data_dir=data_dir)
    return _targets[name]


def fuzz(t: Target) -> None:
    assert t.problems and t.plans, t

    @FUZZ
    @given(texts(t))
    def parsers(case: tuple[object, str]) -> None:
        check_text(t, *case)  # type: ignore[arg-type]

    @FUZZ
    @given(plans(t))
    def critics(case: tuple[object, object]) -> None:
        check_plan(t, *case)  # type: ignore[arg-type]

    parsers()
    critics()
    # the edited plans reach every critic, not only the format check
    assert all(t.counts[f"critic:{c.name}"] > 0 for c in t.critics), dict(t.counts)


@pytest.mark.parametrize("family", SYNTH)
def test_fuzz_synth(family: str) -> None:
    fuzz(target(f"synth/{family}"))


@pytest.mark.parametrize("task", NATURAL_PLAN)
def test_fuzz_natural_plan(task: str, data_dir: Path) -> None:
    fuzz(target(f"natural_plan/{task}", data_dir))


def test_fuzz_travelplanner(data_dir: Path) -> None:
    fuzz(target("travelplanner", data_dir))


@FUZZ
@given(st.one_of(st.text(ANY_CHAR), st.lists(st.sampled_from(JUNK) | st.text(max_size=5), max_size=3).map("".join)))
def test_fuzz_extract_json_on_any_text(text: str) -> None:
    try:
        value = extract_json(text)
    except PlanFormatError:
        return
    json.dumps(value)  # what it returns can be written back


@FUZZ
@given(json_values)
def test_fuzz_validation_of_any_json_value(value: object) -> None:
    bench = components.benchmarks.get("synth/tasks")(n=1)
    out = validated(bench, value)
    assert (out.plan is None) != (out.error is None)


# -- regression tests: crashing inputs found by fuzzing and hostile-input drills --------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Here: [1" + "0" * 5000 + "]",  # ValueError: exceeds the limit for integer string conversion
        "1" + "0" * 5000,
        "[" * 2000 + "]" * 2000,  # RecursionError in plan validation after a deep value was returned
        "[" * 150 + "]" * 150,
    ],
)
def test_regression_extract_json_raises_only_plan_format_errors(text: str) -> None:
    with pytest.raises(PlanFormatError):
        extract_json(text)


def test_regression_extract_json_reads_in_bounded_time_on_degenerate_answers() -> None:
    # before: every '[' started a parse of the rest of the answer; 20,000 of them took ~10 s, a
    # megabyte hours. Now the scan gives up after a bounded amount of work (seconds at most).
    for text in ("[" * 1_000_000, '["a",' * 200_000, '{"a":[' * 150_000):
        with pytest.raises(PlanFormatError, match="gave up"):
            extract_json(text)
    # a fenced plan is still found after degenerate text
    assert extract_json("[" * 5000 + '\n```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}


def test_regression_nesting_limit_and_good_values() -> None:
    assert extract_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    assert extract_json('Sure:\n```json\n{"a": [1, {"b": null}]}\n```') == {"a": [1, {"b": None}]}
    assert extract_json('I think [maybe] {not} this: {"a": 1} ok') == {"a": 1}


def test_regression_lone_surrogates_and_huge_reasons() -> None:
    bench = components.benchmarks.get("synth/tasks")(n=1)
    value = extract_json('{"schedule": [{"task": "\\ud800", "start": "9:00", "end": "10:00"}]}')
    out = validated(bench, value)
    assert out.plan is None and "not valid Unicode" in (out.error or "")
    out = validated(bench, [{"task": "x" * 100} for _ in range(10_000)])
    assert out.error is not None and len(out.error) <= MAX_REASON_CHARS


PARSER_CRASHERS = [
    '{"schedule": 1' + "9" * 5000 + "}",  # ValueError: a number too long to convert (found by fuzzing)
    "{" + "[" * 3000 + "}",  # RecursionError in json.loads (found by fuzzing)
    '[{"days": 1' + "9" * 5000 + "}]",
    "[" * 200_000,  # and a bounded scan
]


@pytest.mark.parametrize("family", SYNTH)
def test_regression_synth_parsers_raise_only_plan_format_errors(family: str) -> None:
    t = target(f"synth/{family}")
    for text in PARSER_CRASHERS:
        with pytest.raises(PlanFormatError):
            t.benchmark.parse(text, t.problems[0])


def test_regression_travelplanner_parser_raises_only_plan_format_errors(data_dir: Path) -> None:
    t = target("travelplanner", data_dir)
    for text in PARSER_CRASHERS:
        with pytest.raises(PlanFormatError):
            t.benchmark.parse(text, t.problems[0])


@pytest.mark.parametrize("family", SYNTH)
def test_regression_a_huge_number_in_a_text_plan_is_a_format_error(family: str) -> None:
    # found by fuzzing: '**Day 1-3:**' with 5000 digits spliced in crashed int() in the trip parsers
    t = target(f"synth/{family}")
    problem, plan = t.problems[0], t.plans[0]
    text = t.benchmark.plan_text(plan, problem)
    for at in [i for i, ch in enumerate(text) if ch.isdigit()][:10]:
        try:  # a plan (the parser may skip the number) or a format error, nothing else
            t.benchmark.parse(text[:at] + "9" * 5000 + text[at:], problem)
        except PlanFormatError:
            pass


@pytest.mark.parametrize("task", NATURAL_PLAN)
def test_regression_natural_plan_huge_numbers(task: str, data_dir: Path) -> None:
    t = target(f"natural_plan/{task}", data_dir)
    problem, plan = t.problems[0], t.plans[0]
    text = t.benchmark.plan_text(plan, problem)
    for at in [i for i, ch in enumerate(text) if ch.isdigit()][:10]:
        try:
            t.benchmark.parse(text[:at] + "9" * 5000 + text[at:], problem)
        except PlanFormatError:
            pass
