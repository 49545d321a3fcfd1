"""The ten tools' argument rules and the paper's judge arithmetic."""

from __future__ import annotations

import pytest

from critics.travelbench.judge import RATINGS, parse_meta, parse_ratings, trajectory_score
from critics.travelbench.tools import TOOL_NAMES, validate_call
from modulo.tools import ToolArgumentError

NOW = "2025-10-24 10:00"
BJ_SH = {"origin": "北京市", "destination": "上海市"}


def test_ten_tools() -> None:
    assert len(TOOL_NAMES) == 10 and "map_search_places" in TOOL_NAMES and "web_search" in TOOL_NAMES


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("map_search_places", {"query": "加油站", "center": "39.9087,116.3974", "radius": 3000}),
        (
            "map_search_places",
            {"query": "火锅", "region": "北京市", "price_max": 100, "price_category": "average_cost"},
        ),
        (
            "map_compute_routes",
            {"origin": "39.9,116.4", "destination": "31.23,121.47", "modes": ["driving", "transit"]},
        ),
        ("map_search_central_places", {"query": "咖啡", "origins": ["39.90,116.40", "39.95,116.35"]}),
        ("travel_search_trains", {"origin": "北京市", "destination": "上海市", "date": "2025-10-30", "days": 3}),
        ("weather_forecast_days", {"location": "杭州市", "date": "2025-10-25", "days": 3}),
        ("web_search", {"query": "北京特色美食"}),
    ],
)
def test_valid_calls(name: str, args: dict[str, object]) -> None:
    assert validate_call(name, args, NOW) == args


@pytest.mark.parametrize(
    ("name", "args"),
    [
        # the last day of the window, with the default and with the longest span (days does not move it)
        ("weather_forecast_days", {"location": "杭州市", "date": "2025-11-08"}),
        ("weather_forecast_days", {"location": "杭州市", "date": "2025-11-05", "days": 15}),
        ("travel_search_flights", {**BJ_SH, "date": "2025-11-08", "days": 15}),
        # a date before the query's day, a radius without a centre, a long list: the authors refuse none
        ("travel_search_trains", {**BJ_SH, "date": "2025-10-20"}),
        ("map_search_places", {"query": "x", "region": "北京市", "radius": 500}),
        ("map_search_places", {"query": "x", "limit": 100}),
        (
            "map_search_along_route",
            {"query": "加油站", "origin": "39.9,116.4", "destination": "31.2,121.4", "buffer_radius": 30000},
        ),
    ],
)
def test_calls_the_authors_tools_accept_are_not_errors(name: str, args: dict[str, object]) -> None:
    assert validate_call(name, args, NOW) == args


@pytest.mark.parametrize(
    ("name", "args", "why"),
    [
        ("map_search_places", {"query": "加油站", "center": "39.9,116.4", "radius": 50}, "minimum of 100"),
        ("map_search_places", {"query": "加油站", "center": "39.9,116.4", "radius": 30000}, "maximum of 20000"),
        ("map_search_places", {"query": "加油站", "center": "北京"}, "does not match"),
        ("map_search_places", {"center": "39.9,116.4"}, "'query' is a required property"),
        (
            "map_search_places",
            {"query": "x", "price_min": 200, "price_max": 100, "price_category": "price"},
            "price_min 200 > price_max 100",
        ),
        ("map_search_places", {"query": "x", "price_max": 100}, "needs price_category"),
        ("map_search_places", {"query": "x", "colour": "red"}, "Additional properties"),
        (
            "map_compute_routes",
            {
                "origin": "39.9,116.4",
                "destination": "31.2,121.4",
                "departure_time": "2025-10-24T10:00",
                "arrival_time": "2025-10-24T12:00",
            },
            "cannot both",
        ),
        ("map_compute_routes", {"origin": "99.9,116.4", "destination": "31.2,121.4"}, "not a latitude,longitude"),
        (
            "map_compute_routes",
            {"origin": "39.9,116.4", "destination": "31.2,121.4", "modes": ["plane"]},
            "is not one of",
        ),
        ("map_search_central_places", {"query": "x", "origins": ["39.9,116.4"]}, "is too short"),
        (
            "travel_search_flights",
            {"origin": "北京市", "destination": "上海市", "date": "2025/10/30"},
            "does not match",
        ),
        (
            "travel_search_flights",
            {"origin": "北京市", "destination": "上海市", "date": "2025-10-30", "days": 16},
            "maximum of 15",
        ),
        ("travel_search_flights", {**BJ_SH, "date": "2025-11-09"}, "more than 15 days after today"),
        ("travel_search_trains", {**BJ_SH, "date": "2025-12-01", "days": 0}, "more than 15 days after today"),
        ("weather_forecast_days", {"location": "杭州市", "date": "2025-11-09"}, "more than 15 days after today"),
        ("weather_current_conditions", {"location": 3}, "is not of type 'string'"),
        ("book_hotel", {"city": "北京"}, "unknown tool 'book_hotel'"),
    ],
)
def test_invalid_calls_are_tool_call_errors(name: str, args: dict[str, object], why: str) -> None:
    with pytest.raises(ToolArgumentError, match=why.replace("(", r"\(").replace(")", r"\)")):
        validate_call(name, args, NOW)


XML = """<response>
<reasoning_planning><reasoning>好</reasoning><rating>优秀</rating></reasoning_planning>
<summarization_extraction><reasoning>一般</reasoning><rating>一般</rating></summarization_extraction>
<presentation><reasoning>差</reasoning><rating>较差</rating></presentation>
</response>"""
DIMS = ("reasoning_planning", "summarization_extraction", "presentation")


def test_ratings_parse_and_incomplete_replies_do_not() -> None:
    parsed = parse_ratings(XML, DIMS)
    assert parsed is not None and parsed[0] == {
        "reasoning_planning": 5,
        "summarization_extraction": 3,
        "presentation": 2,
    }
    assert parse_ratings(XML, (*DIMS, "user_interaction")) is None
    assert parse_ratings(XML.replace("较差", "还行"), DIMS) is None
    assert parse_meta("<meta_evaluation><reasoning>x</reasoning><rating>较好</rating></meta_evaluation>") == 4
    assert parse_meta("较好") is None
    assert list(RATINGS.values()) == [1, 2, 3, 4, 5]


def test_score_is_the_papers_product() -> None:
    judged = {"ratings": {"a": 5, "b": 3, "c": 2}, "meta": 4}
    # mean 10/3: (10/3 - 1) / 4 = 7/12; one of four calls invalid: x 3/4; meta 4: x 4/5
    assert trajectory_score(judged, 4, 1) == pytest.approx(7 / 12 * 3 / 4 * 4 / 5)
    assert trajectory_score({**judged, "meta": None}, 0, 0) == pytest.approx(7 / 12)  # no calls: no penalty
    assert trajectory_score({"ratings": {"a": 1}, "meta": 5}, 2, 0) == 0.0
    assert trajectory_score({"ratings": None, "error": "unparsed"}, 3, 0) is None
    assert trajectory_score(None, 0, 0) is None


def test_an_unread_meta_judge_keeps_the_score_unweighted_and_is_counted() -> None:
    from critics.travelbench.benchmark import TravelBenchSingleTurn
    from modulo.types import Problem

    def episode(meta: int | None, status: str) -> dict[str, object]:
        judge = {"ratings": {d: 5 for d in DIMS}, "attempts": 1, "meta": meta, "meta_status": status}
        return {"mode": "single", "messages": [], "tool_calls": 0, "tool_errors": 0, "judge": judge}

    problems = [Problem(id=f"single_turn-{i}", benchmark="travelbench/single_turn", query="q") for i in range(3)]
    plans = [episode(4, "ok"), episode(None, "unparsed"), episode(None, "off")]
    result = TravelBenchSingleTurn().evaluate(problems, plans)
    # the authors' script leaves the meta weight out when the meta-judge cannot be read: so does the score,
    # and the report says how many episodes that was
    assert [r["score_simulated_tools"] for r in result.per_problem] == [0.8, 1.0, 1.0]
    assert result.metrics["meta_unparsed"] == 1
    assert result.metrics["unjudged"] == 0
