"""The six TravelPlanner tools, ``modulo tools``, and the reference information derived with them."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.data import load_split, reference_entries
from critics.travelplanner.derive import compare_with_official, hop_days, official_route, reference_for_route
from critics.travelplanner.tools import TravelPlannerTools, before_parenthesis
from modulo.cli.main import cli
from modulo.tools import ToolArgumentError, parse_action


@pytest.fixture(scope="module")
def tools(tp: TravelPlanner) -> TravelPlannerTools:
    return tp.tools()


def test_flight_search_rows_and_no_match(tools: TravelPlannerTools) -> None:
    found = tools.call("FlightSearch", ["New York", "Reno", "2022-03-14"])
    assert found.ok and found.message is None
    assert found.rows == [
        {
            "Flight Number": "F3767722",
            "Price": 1200,
            "DepTime": "21:02",
            "ArrTime": "00:07",
            "ActualElapsedTime": "6 hours 5 minutes",
            "FlightDate": "2022-03-14",
            "OriginCityName": "New York",
            "DestCityName": "Reno",
            "Distance": 2411.0,
        }
    ]
    assert found.text.splitlines()[1].split()[:2] == ["F3767722", "1200"]  # Price prints as an integer
    none = tools.call("FlightSearch", {"origin": "Sarasota", "destination": "Chicago", "date": "2022-03-22"})
    assert none.ok and none.rows == [] and none.text == "There is no flight from Sarasota to Chicago on 2022-03-22."
    assert found.micros > 0


def test_invalid_arguments_follow_the_official_agent(tools: TravelPlannerTools) -> None:
    bad_date = tools.call("FlightSearch", ["New York", "Reno", "March 14"])
    assert not bad_date.ok and bad_date.message == "'March 14' is not in the format YYYY-MM-DD"
    bad_city = tools.call("AttractionSearch", ["Atlantis"])
    assert not bad_city.ok and bad_city.text.startswith("Atlantis is not valid city in ['San Diego', ")
    assert tools.call("CitySearch", ["Narnia"]).text == "Invalid State"
    with pytest.raises(ToolArgumentError, match="takes 3 argument"):
        tools.call("FlightSearch", ["New York", "Reno"])
    with pytest.raises(ToolArgumentError, match="unknown tool 'Teleport'"):
        tools.call("Teleport", ["x"])
    with pytest.raises(ToolArgumentError, match=r"should be non-empty|is too short"):
        tools.call("RestaurantSearch", [""])


def test_city_tools_and_distance(tools: TravelPlannerTools) -> None:
    for name, column in (("AccommodationSearch", "NAME"), ("RestaurantSearch", "Name"), ("AttractionSearch", "Name")):
        result = tools.call(name, ["Reno"])
        assert result.ok and result.rows and all(r.get("city", r.get("City")) == "Reno" for r in result.rows)
        assert column in result.rows[0]
    restaurants = tools.call("RestaurantSearch", ["Reno"])
    # the official RestaurantSearch prints its table with the CSV index: the first column is a number
    assert restaurants.text.splitlines()[1].split()[0].isdigit()
    texas = tools.call("CitySearch", ["Texas"])
    assert texas.ok and "Dallas" in [r["city"] for r in texas.rows or []] and texas.text.startswith("['")
    taxi = tools.call("DistanceMatrix", ["Moline", "Rockford", "taxi"])  # alias of GoogleDistanceMatrix
    assert taxi.tool == "GoogleDistanceMatrix"
    assert taxi.text == "taxi, from Moline to Rockford, duration: 2 hours 1 min, distance: 194 km, cost: 194"
    assert taxi.rows and taxi.rows[0]["cost"] == 194
    drive = tools.call("GoogleDistanceMatrix", ["Moline", "Rockford", "self-driving"])
    assert drive.text.endswith("cost: 9")  # int(194 km * 0.05)
    assert tools.call("GoogleDistanceMatrix", ["New York", "Reno", "self-driving"]).text == "No valid information."
    assert before_parenthesis("Paris(France)") == "Paris" and before_parenthesis("Reno") == "Reno"


def test_parse_action() -> None:
    assert parse_action("FlightSearch[Sarasota, Chicago, 2022-03-22]") == (
        "FlightSearch",
        "Sarasota, Chicago, 2022-03-22",
    )
    assert parse_action("Planner[]") is None and parse_action("just text") is None


def test_modulo_tools_command(tp: TravelPlanner) -> None:
    runner = CliRunner()
    env = {"MODULO_DATA_DIR": str(tp.data_dir)}
    result = runner.invoke(
        cli, ["tools", "travelplanner", "FlightSearch", "New York", "Reno", "2022-03-14", "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["rows"][0]["Flight Number"] == "F3767722" and payload["micros"] > 0
    listing = runner.invoke(cli, ["tools", "travelplanner"], env=env)
    assert listing.exit_code == 0 and "FlightSearch[origin, destination, date]" in listing.output
    invalid = runner.invoke(cli, ["tools", "travelplanner", "CitySearch", "Narnia"], env=env)
    assert invalid.exit_code == 1 and "Invalid State" in invalid.stdout
    wrong = runner.invoke(cli, ["tools", "travelplanner", "FlightSearch", "Reno"], env=env)
    assert wrong.exit_code == 2


# -- derivation ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_derivation_reproduces_every_official_entry_on_its_route(tp: TravelPlanner, tools: TravelPlannerTools) -> None:
    """On all 129 rows with official reference information, the tools rebuild it exactly (whole string)."""
    rows = tp.load("validation-ref")
    assert len(rows) == 129
    for p in rows:
        entries = reference_entries(p.context, p.id)
        cities, hops = official_route(entries)
        assert str(reference_for_route(tools, cities, hops)) == p.context, p.id


@pytest.mark.slow
def test_route_choice_differences_are_the_listed_ones(tp: TravelPlanner, tools: TravelPlannerTools) -> None:
    """The route chosen from the query alone equals the official one on every one-city row; on multi-city
    rows the annotators picked the cities by hand, and 69 of the 88 differ (only in the cities)."""
    kinds: Counter[str] = Counter()
    for p in tp.load("validation-ref"):
        differences = compare_with_official(tools, p, reference_entries(p.context, p.id))
        if p.constraints["visiting_city_number"] == 1:
            assert differences == [], p.id
        kinds.update(d.split(":")[0] for d in differences)
    assert kinds == Counter({"cities": 69})


def test_validation_split_has_180_rows_51_derived(tp: TravelPlanner) -> None:
    raw = {p.id: p for p in load_split(tp.root, "validation")}
    problems = tp.load("validation")
    assert len(problems) == 180 and all(p.context for p in problems)
    derived = [p for p in problems if p.metadata.get("derived")]
    assert len(derived) == 51 and {p.id for p in derived} == {i for i, p in raw.items() if not p.context}
    for p in problems:
        if not p.metadata.get("derived"):
            assert p.context == raw[p.id].context  # official rows untouched
    assert len(tp.load("validation-ref")) == 129 and not any(
        p.metadata.get("derived") for p in tp.load("validation-ref")
    )
    seven = next(p for p in derived if p.constraints["days"] == 7)
    cities = seven.metadata["derived_cities"]
    assert len(cities) == 3 and all(tp.store.city_state.get(c) == seven.constraints["dest"] for c in cities)
    assert hop_days(7, 3) == [1, 3, 5, 7] and hop_days(3, 1) == [1, 3]
