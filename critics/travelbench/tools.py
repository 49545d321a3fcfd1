"""TravelBench's ten tools, declared by JSON Schema, with the benchmark's strict argument checks.

The real services behind them are not public, and the authors' cache of about 200K real responses is
not available: an LLM tool simulator (:mod:`critics.travelbench.episode`) writes each response, and
every score is labelled "simulated tools". What is exact here is the *validation*: a call with an
unknown name, a missing or mistyped argument, a value out of range, ``price_min > price_max``, a price
filter without ``price_category``, a centre that is not ``"lat,lon"``, both a departure and an arrival
time, a date that is not ``YYYY-MM-DD`` or more than 15 days after the query's day: each is a tool-call
error that counts against the score (score x (1 - errors / calls)), and the simulator is never asked.
The ranges and the date window are the authors' (their tools' own checks): ``limit`` has no upper bound,
a route search's ``buffer_radius`` none at all, a ``radius`` without a ``center`` is ignored rather than
refused, and a date before the query's day is not refused.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from modulo.tools import ToolArgumentError, ToolSpec

_LATLON = r"^-?\d{1,2}(\.\d+)?,\s*-?\d{1,3}(\.\d+)?$"
_DATE = r"^\d{4}-\d{2}-\d{2}$"
_ISO = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$"
_COORD: dict[str, Any] = {"type": "string", "pattern": _LATLON, "description": '坐标 "latitude,longitude"'}
_NUM = "number"
#: the latest date a flight, train or forecast search may ask for, in days after the query's day
HORIZON_DAYS = 15


def _obj(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def _s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "description": description, **extra}


def _n(description: str, minimum: float | None = None, maximum: float | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": _NUM, "description": description}
    if minimum is not None:
        spec["minimum"] = minimum
    if maximum is not None:
        spec["maximum"] = maximum
    return spec


_PRICE = {
    "price_min": _n("价格下限（元）", 0),
    "price_max": _n("价格上限（元）", 0),
    "price_category": {"type": "string", "enum": ["average_cost", "price"], "description": "人均消费或商品价格"},
}
_DAY = {"type": "string", "pattern": _DATE, "description": "YYYY-MM-DD"}
_LIMIT = _n("返回数量", 1)
#: the filters of a place search: a minimum rating, how many results, a price range
_PLACE_FILTERS = {"min_rating": _n("最低评分", 0, 10), "limit": _LIMIT, **_PRICE}
#: flights and trains take the same arguments
_TRANSPORT = _obj(
    ["origin", "destination", "date"],
    origin=_s("出发地行政区名称"),
    destination=_s("目的地行政区名称"),
    date=_DAY,
    days=_n("额外查询的天数", 0, 15),
)
_PLACE_SORT = ["weight", "distance", "rating:d", "price:a", "price:d"]
_MODES = ["driving", "walking", "bicycling", "transit", "motorcycle", "truck"]
_PREFERENCES = ["prefer_highways", "avoid_highways", "avoid_tolls", "prefer_main_roads", "avoid_highways+avoid_tolls"]

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "map_search_places",
        "地点搜索：按关键词、类别或地址找地点，可限定中心点半径或行政区，可按距离、评分、价格排序和筛选。",
        _obj(
            ["query"],
            query=_s("关键词、类别或地址"),
            center=_COORD,
            radius=_n("搜索半径（米），仅在给出 center 时有效", 100, 20000),
            region=_s("行政区划，如 北京市朝阳区"),
            sort_by={"type": "string", "enum": _PLACE_SORT},
            **_PLACE_FILTERS,
        ),
    ),
    ToolSpec(
        "map_compute_routes",
        "路线规划：起点到终点（可含途经点）的路线，六种出行方式，可设出发或到达时间、实时路况与道路偏好。",
        _obj(
            ["origin", "destination"],
            origin=_COORD,
            destination=_COORD,
            intermediates={"type": "array", "items": _COORD},
            modes={"type": "array", "items": {"type": "string", "enum": _MODES}, "minItems": 1},
            departure_time={"type": "string", "pattern": _ISO, "description": "ISO8601 出发时间"},
            arrival_time={"type": "string", "pattern": _ISO, "description": "ISO8601 到达时间"},
            traffic_aware={"type": "boolean"},
            preference={"type": "string", "enum": _PREFERENCES},
        ),
    ),
    ToolSpec(
        "map_search_along_route",
        "沿途搜索：在起点到终点的默认路线两侧找地点（如顺路加油）。",
        _obj(
            ["query", "origin", "destination"],
            query=_s("关键词"),
            origin=_COORD,
            destination=_COORD,
            transport_mode={"type": "string", "enum": ["driving", "walking"]},
            buffer_radius=_n("离路线的最大距离（米）"),
            limit=_LIMIT,
        ),
    ),
    ToolSpec(
        "map_search_central_places",
        "多点中心搜索：为两个或更多出发点找都方便的地点（聚会选址）。",
        _obj(
            ["query", "origins"],
            query=_s("关键词"),
            origins={"type": "array", "items": _COORD, "minItems": 2},
            radius=_n("每个出发点的搜索半径（米）", 100, 20000),
            sort_by={"type": "string", "enum": ["balanced", "min_max_distance", "total_distance"]},
            **_PLACE_FILTERS,
        ),
    ),
    ToolSpec(
        "map_search_ranking_list",
        "榜单搜索：某行政区内的推荐榜单（美食榜、必吃榜等）。",
        _obj(
            ["query", "region"],
            query=_s("榜单类别或关键词"),
            region=_s("行政区，如 杭州市"),
            max_lists=_n("榜单数量", 1, 10),
            max_items=_n("每个榜单的地点数", 1, 20),
        ),
    ),
    ToolSpec("travel_search_flights", "国内航班搜索：出发城市到到达城市的航班，可连续查询多天比价。", _TRANSPORT),
    ToolSpec("travel_search_trains", "国内火车/高铁搜索：车次、票价、时刻，可连续查询多天。", _TRANSPORT),
    ToolSpec(
        "weather_current_conditions",
        "实时天气：温度、天气现象、风力风向、空气质量（不做预报）。",
        _obj(["location"], location=_s("行政区划名称")),
    ),
    ToolSpec(
        "weather_forecast_days",
        "天气预报：从 date 起若干天，最多到今天起 15 天内。",
        _obj(
            ["location", "date"],
            location=_s("行政区划名称或地标"),
            date=_DAY,
            days=_n("从 date 起的天数", 1, 15),
        ),
    ),
    ToolSpec("web_search", "网页搜索：通用、开放、时效性强的公开信息。", _obj(["query"], query=_s("搜索查询词"))),
)
TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in TOOLS)
_BY_NAME = {t.name: t for t in TOOLS}


def tool_spec(name: str) -> ToolSpec:
    spec = _BY_NAME.get(name)
    if spec is None:
        raise ToolArgumentError(f"unknown tool {name!r}; the ten tools: {', '.join(TOOL_NAMES)}")
    return spec


def validate_call(name: str, arguments: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The call's arguments when valid, else :class:`ToolArgumentError` saying why (a tool-call error).

    ``now`` is the query time (``YYYY-MM-DD HH:MM``): a flight, train or forecast ``date`` may be at most
    15 days after its day (the authors' window; ``days`` has its own range and does not move it).
    """
    bound = tool_spec(name).bind(arguments)
    if "price_min" in bound and "price_max" in bound and bound["price_min"] > bound["price_max"]:
        raise ToolArgumentError(f"{name}: price_min {bound['price_min']} > price_max {bound['price_max']}")
    priced = "price_min" in bound or "price_max" in bound or bound.get("sort_by") in ("price:a", "price:d")
    if priced and "price_category" not in bound:
        raise ToolArgumentError(f"{name}: a price filter or price sort needs price_category")
    if "departure_time" in bound and "arrival_time" in bound:
        raise ToolArgumentError(f"{name}: departure_time and arrival_time cannot both be given")
    for key in ("center", "origin", "destination"):
        if key in bound and re.match(_LATLON, str(bound[key])):
            _check_latlon(name, key, str(bound[key]))
    today = dt.date.fromisoformat(now[:10])
    for key in ("date",):
        if key in bound:
            try:
                day = dt.date.fromisoformat(bound[key])
            except ValueError:
                raise ToolArgumentError(f"{name}: {key} {bound[key]!r} is not a calendar date") from None
            if (day - today).days > HORIZON_DAYS:
                raise ToolArgumentError(
                    f"{name}: {key} {bound[key]} is more than {HORIZON_DAYS} days after today ({today})"
                )
    return bound


def _check_latlon(name: str, key: str, text: str) -> None:
    lat, lon = (float(x) for x in text.split(","))
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ToolArgumentError(f"{name}: {key} {text!r} is not a latitude,longitude pair")


def tools_text() -> str:
    """The tool declarations as the agent and the judge read them (JSON, Chinese kept readable)."""
    import json

    return json.dumps(
        [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in TOOLS],
        ensure_ascii=False,
        indent=1,
    )
