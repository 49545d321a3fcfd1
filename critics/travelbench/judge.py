"""The paper's judge: a 1-5 rating per dimension, the tool-call penalty and the meta-judge weight.

An LLM judge rates a finished trajectory on three dimensions (single-turn: reasoning and planning,
summarisation and extraction, presentation) or four (multi-turn adds user interaction), each one of
极差 / 较差 / 一般 / 较好 / 优秀 (1 to 5). A second call, the meta-judge, rates the judge's own
evaluation 1 to 5. The score of one trajectory, as a fraction of 100::

    S = (mean rating - 1) / 4  x  (1 - tool-call errors / tool calls)  x  meta-judge rating / 5

(the meta factor is 1 when the meta-judge is switched off, and, as in the authors' script, when its
reply could not be read: such trajectories are counted, ``meta_unparsed``). The ratings come back as
XML; a reply without a rating for every dimension is unparsed and the judge is asked again (at most
``judge_retries`` more times, the retries sampled at temperature 0.7 as new draws); a trajectory
still without ratings is recorded as unjudged and left out of the score, and counted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

RATINGS: dict[str, int] = {"极差": 1, "较差": 2, "一般": 3, "较好": 4, "优秀": 5}
SINGLE_DIMENSIONS = ("reasoning_planning", "summarization_extraction", "presentation")
MULTI_DIMENSIONS = (*SINGLE_DIMENSIONS, "user_interaction")


def dimensions(mode: str) -> tuple[str, ...]:
    return MULTI_DIMENSIONS if mode == "multi" else SINGLE_DIMENSIONS


def rating_value(text: str) -> int | None:
    """1-5 from a rating word (or a bare digit 1-5); None when it is neither."""
    word = text.strip().strip("*").strip()
    if word in RATINGS:
        return RATINGS[word]
    if word in {"1", "2", "3", "4", "5"}:
        return int(word)
    return None


def parse_ratings(reply: str, dims: tuple[str, ...]) -> tuple[dict[str, int], dict[str, str]] | None:
    """{dimension: 1-5} and {dimension: reasoning} from the judge's XML, or None when any is missing."""
    ratings: dict[str, int] = {}
    reasons: dict[str, str] = {}
    for dim in dims:
        block = re.search(rf"<{dim}>(.*?)</{dim}>", reply, re.DOTALL)
        if block is None:
            return None
        rating = re.search(r"<rating>(.*?)</rating>", block.group(1), re.DOTALL)
        value = rating_value(rating.group(1)) if rating else None
        if value is None:
            return None
        ratings[dim] = value
        reason = re.search(r"<reasoning>(.*?)</reasoning>", block.group(1), re.DOTALL)
        reasons[dim] = reason.group(1).strip() if reason else ""
    return ratings, reasons


def parse_meta(reply: str) -> int | None:
    """The meta-judge's 1-5 rating, or None."""
    block = re.search(r"<meta_evaluation>(.*?)</meta_evaluation>", reply, re.DOTALL)
    rating = re.search(r"<rating>(.*?)</rating>", block.group(1) if block else "", re.DOTALL)
    return rating_value(rating.group(1)) if rating else None


def evaluation_text(ratings: Mapping[str, int], reasons: Mapping[str, str]) -> str:
    """The judge's ratings and reasons as the meta-judge reads them."""
    names = {v: k for k, v in RATINGS.items()}
    lines = []
    for dim, value in ratings.items():
        lines += [f"### {dim}", f"评级：{names[value]}", f"理由：{reasons.get(dim, '')}", ""]
    return "\n".join(lines).strip()


def trajectory_score(judgement: Mapping[str, Any] | None, tool_calls: int, tool_errors: int) -> float | None:
    """S / 100 for one trajectory from its recorded judgement, or None when it was not judged."""
    if not judgement or not judgement.get("ratings"):
        return None
    values = list(judgement["ratings"].values())
    mean = sum(values) / len(values)
    base = (mean - 1) / 4
    penalty = 1 - tool_errors / tool_calls if tool_calls else 1.0
    meta = judgement.get("meta")
    weight = meta / 5 if isinstance(meta, int) else 1.0
    return float(base * penalty * weight)
