"""The benchmark class: plan schema and format, parser and renderer, metrics, data commands, store."""

from __future__ import annotations

import copy
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.checks import DAY_FIELDS
from critics.travelplanner.data import load_annotated_plans
from critics.travelplanner.planformat import parse_text, render_text
from critics.travelplanner.store import Sources, Store, store_path
from modulo.components import benchmarks
from modulo.errors import ConfigError, DataError, PlanFormatError
from modulo.prompts import load_template


@pytest.fixture(scope="module")
def train1(tp: TravelPlanner, tp_dir: Path) -> tuple[Any, list[dict[str, Any]]]:
    return tp.load("train")[0], [d for d in load_annotated_plans(tp_dir)[1] if d]


def test_registered_with_metrics_and_prompts(tp: TravelPlanner) -> None:
    assert benchmarks.get("travelplanner") is TravelPlanner
    assert [m.key for m in tp.metrics] == [
        "delivery_rate", "commonsense_micro", "commonsense_macro", "hard_micro", "hard_macro", "final_pass_rate"
    ]  # fmt: skip
    assert tp.primary_metric == "final_pass_rate"
    variables = tp.prompt_variables(tp.load("train")[0])
    for role in ("direct", "cot", "json", "reformulate"):
        template = load_template(tp.prompts[role])
        text = template.render(**variables, problem=tp.load("train")[0], reply="Day 1: x", schema="{}")
        assert tp.load("train")[0].query in text or role == "reformulate"


def test_schema_and_format(tp: TravelPlanner, train1: tuple[Any, list[dict[str, Any]]]) -> None:
    problem, plan = train1
    assert tp.validate_plan(plan) == plan and tp.check_format(problem, plan) == []
    schema = tp.plan_json_schema()
    assert schema and schema["type"] == "array"
    with pytest.raises(PlanFormatError, match="lunch"):
        tp.validate_plan([{k: v for k, v in plan[0].items() if k != "lunch"}])
    short = plan[:2]
    assert any("3 days" in issue for issue in tp.check_format(problem, short))
    bad = copy.deepcopy(plan)
    del bad[1]["dinner"]
    bad[2]["days"] = 7
    issues = tp.check_format(problem, bad)
    assert "day 2 lacks dinner" in issues and "day 3 is numbered 7" in issues
    assert tp.check_format(problem, {"days": 1}) == ["the plan must be a list of day objects, not dict"]


def test_parser_round_trip(tp: TravelPlanner, train1: tuple[Any, list[dict[str, Any]]]) -> None:
    problem, plan = train1
    text = tp.render_plan(plan)
    assert text.startswith("Day 1:\nCurrent City: from St. Petersburg to Rockford")
    assert tp.parse("Let me think.\nTravel Plan:\n" + text, problem) == plan
    assert parse_text(f"```json\n{__import__('json').dumps(plan)}\n```") == plan
    with pytest.raises(PlanFormatError):
        tp.parse("I cannot help with that.", problem)
    assert tp.has_parser
    assert render_text(None) == "null"


def test_render_text_layout() -> None:
    """Every day a block of its number and the 7 fields (missing ones empty, other values as an f-string
    writes them), then any extra field; an empty day is left out, a day that is not an object is JSON."""
    full = {"days": 1, "current_city": "A", "transportation": "-", "breakfast": "B, A", "attraction": "C, A;",
            "lunch": "-", "dinner": "D, A", "accommodation": "E, A"}  # fmt: skip
    odd = {"current_city": 2.5, "notes": ["x"], "breakfast": None, "days": True}
    assert render_text([full, {}, odd, "day"]) == (
        "Day 1:\nCurrent City: A\nTransportation: -\nBreakfast: B, A\nAttraction: C, A;\nLunch: -\nDinner: D, A\n"
        "Accommodation: E, A\n\n"
        "Day True:\nCurrent City: 2.5\nTransportation: \nBreakfast: None\nAttraction: \nLunch: \nDinner: \n"
        "Accommodation: \nnotes: ['x']\n\n"
        'Day 4: "day"'
    )
    assert render_text([{**full, "days": 7}]).startswith("Day 7:\n") and render_text([{"lunch": "L"}]).startswith(
        "Day 1:\nCurrent City: \n"
    )


def test_render_text_writes_a_full_day_of_any_values_as_format_would() -> None:
    """A day with the 8 official fields is written with %s: the same text as format() for every JSON value."""
    from critics.travelplanner.planformat import _BLOCK, _FIELDS

    odd: list[object] = [None, True, False, 0, -7, 10**30, 1.0, 1e16, -0.0, float("nan"), "", "é ✓"]
    odd += [[1, "a"], {"k": [None]}]
    days = [
        {"days": odd[i % len(odd)], **{f: odd[(i + n) % len(odd)] for n, f in enumerate(DAY_FIELDS[1:], 1)}}
        for i in range(len(odd))
    ]
    assert render_text(days) == "\n\n".join(_BLOCK.format(*_FIELDS(day)) for day in days)


def test_a_plan_evaluated_again_gets_its_kept_evaluation(tp: TravelPlanner, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same problem objects and equal plans (as a run's summary asks for the delivered and the first
    plans) are evaluated once per mode; a plan changed in place, in any field, is evaluated again."""
    import critics.travelplanner.benchmark as module
    from critics.travelplanner.greedy import GreedyGenerator

    problems = tp.load("validation")[:4]
    plans = [GreedyGenerator(benchmark=tp).plan(p) for p in problems]
    calls = [0]
    original = module.evaluate_plan

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "evaluate_plan", counting)
    first = tp.evaluate(problems, plans)
    again = tp.evaluate(problems, copy.deepcopy(plans))
    assert calls[0] == 4 and again == first
    tp.evaluate(problems, plans, mode="strict")
    assert calls[0] == 8
    plans[0][1]["lunch"] = "No Such Diner, Nowhere"
    changed = tp.evaluate(problems, plans)
    assert calls[0] == 9 and changed.per_problem[1:] == first.per_problem[1:]
    monkeypatch.setattr(tp, "_evaluations", module.BoundedMemo(8))  # nothing kept: worked out afresh
    assert tp.evaluate(problems, plans) == changed and changed.per_problem[0] != first.per_problem[0]


def test_evaluate_arguments(tp: TravelPlanner) -> None:
    problems = tp.load("train")[:3]
    with pytest.raises(ConfigError):
        tp.evaluate(problems, [None])
    with pytest.raises(ConfigError):
        tp.evaluate(problems, [None] * 3, mode="loose")
    result = tp.evaluate(problems, [None] * 3)
    assert result.metrics["delivery_rate"] == 0.0
    assert result.tables["denominators"][0]["n"] == 3  # a subset: computed denominators
    assert [row["problem_id"] for row in result.per_problem] == ["train-1", "train-2", "train-3"]
    assert all(row["passed"] is False and row["valid_cost"] is None for row in result.per_problem)


def test_data_check_reports_the_partial_flights(tp: TravelPlanner) -> None:
    report = tp.data_check()
    text = "\n".join(report.lines)
    assert report.ok
    assert "129 with reference information" in text and "PARTIAL flights" in text and "3179 rows" in text


def test_data_download_without_network_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise httpx.ConnectError("no network")

    monkeypatch.setattr(httpx, "get", refuse)
    with pytest.raises(DataError, match="cannot download the TravelPlanner train split"):
        TravelPlanner(tmp_path).data_download()


def test_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "travelplanner").mkdir()
    with pytest.raises(DataError, match="database files are missing"):
        _ = TravelPlanner(tmp_path, store_dir=tmp_path / "cache").store
    assert not TravelPlanner(tmp_path, store_dir=tmp_path / "cache").data_check().ok


def test_store_keeps_the_official_rows(store: Store) -> None:
    assert store.counts["accommodations"] == 4285  # 5047 rows, dropna drops the ones with an empty column
    assert not store.match_accommodations("Brooklyn Home", "Pensacola")
    flights = store.flights_by_number("F3573659")
    assert len(flights) == 1 and flights[0].origin == "St. Petersburg" and flights[0].price == 474
    road = store.road("Baton Rouge", "Texarkana")
    assert road is not None and road.cost("self-driving") == 25 and road.cost("taxi") == 519
    hartford = store.road("Hartford", "Denver")
    assert hartford is not None and hartford.cost("taxi") is None  # "1 day 3 hours"
    assert store.city_state["Rockford"] == "Illinois"
    rows = store.match_restaurants("Coco Bambu", "Rockford")
    assert rows and store.match_restaurants("Coco Bambu", "Rockford") is rows  # memoised


def test_store_rebuilds_when_a_source_changes(tp_dir: Path, tmp_path: Path) -> None:
    database = tmp_path / "database"
    shutil.copytree(tp_dir / "database", database, ignore=shutil.ignore_patterns("*.sources.csv", "complete_*"))
    sources = Sources.from_database_dir(database)
    store = Store.open(sources, tmp_path / "cache")
    before = store.fingerprint
    assert Store.open(sources, tmp_path / "cache").fingerprint == before  # reused, not rebuilt
    with (database / "flights" / "clean_Flights_2022_partial.csv").open("a") as handle:
        handle.write("F9999999,1,01:00,02:00,1 hours 0 minutes,2022-03-01,Rockford,Chicago,100.0\n")
    rebuilt = Store.open(sources, tmp_path / "cache")
    assert rebuilt.fingerprint != before and rebuilt.flights_by_number("F9999999")
    with sqlite3.connect(store_path(sources, tmp_path / "cache")) as db:
        assert db.execute("SELECT COUNT(*) FROM flights").fetchone()[0] == 3180


def _probes(names: list[str]) -> list[str]:
    """Names to look up: whole names, parts of them, other cases and spaces, and names of no listing."""
    out = ["", " ", "Nowhere Inn", "é", "\x00"]
    for name in names:
        out += [name, name[:5], name[-4:], name[2:9], name.upper(), f" {name}", f"{name} ", name.strip()]
    return out


def test_an_official_accommodation_looked_up_alone_is_the_one_found_in_its_citys_rows(store: Store) -> None:
    """With its city's rows not read, an official accommodation match is read by itself from SQLite (instr):
    the same rows, in the same order, as the match over the city's rows, for any name."""
    alone, read = Store(store.path), Store(store.path)
    cities = [city for (city,) in alone._query("SELECT DISTINCT city FROM accommodations ORDER BY city", ())]
    assert len(cities) > 100
    for city in [*cities, "Atlantis", "é-ville"]:
        rows = read.accommodations_in(city)  # read's lookups go over the city's rows
        for name in _probes([r.name for r in rows[:6]]):
            assert alone.match_accommodations(name, city) == read.match_accommodations(name, city), (name, city)
            assert ("accommodations", "city = ?", city) not in alone._memo  # alone read no city's rows
    lone = "\ud800"  # not text SQLite is given: the city's rows are read
    assert (
        alone.match_accommodations(lone, cities[0]) == () and ("accommodations", "city = ?", cities[0]) in alone._memo
    )


def test_a_name_that_is_not_text_fails_the_match_alone_as_over_its_citys_rows(store: Store, tmp_path: Path) -> None:
    """(The official tables hold text names only; a store that did not would fail alike both ways.)"""
    copy = tmp_path / "store.sqlite"
    shutil.copy(store.path, copy)
    with sqlite3.connect(copy) as db:
        (city,) = db.execute("SELECT city FROM accommodations ORDER BY id LIMIT 1").fetchone()
        db.execute(
            "UPDATE accommodations SET name = NULL WHERE id = (SELECT max(id) FROM accommodations WHERE city = ?)",
            (city,),
        )
    alone, read = Store(copy), Store(copy)
    read.accommodations_in(city)
    errors = []
    for st in (alone, read):
        with pytest.raises(TypeError) as caught:
            st.match_accommodations("Nowhere Inn", city)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
