"""Loading the splits, malformed rows, and the sole-planning guard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.data import load_split, require_reference, structured_query
from modulo.errors import DataError


def test_splits_sizes_ids_and_fields(tp: TravelPlanner) -> None:
    assert tp.splits() == ["train", "validation", "validation-ref"]
    train, val, ref = tp.load("train"), tp.load("validation"), tp.load("validation-ref")
    assert (len(train), len(val), len(ref)) == (45, 180, 129)
    p = next(p for p in val if p.id == "validation-61")
    assert p.constraints["org"] == "New York" and p.constraints["dest"] == "Reno"
    assert p.constraints["date"] == ["2022-03-14", "2022-03-15", "2022-03-16"]
    assert p.constraints["local_constraint"]["house rule"] == "children under 10"
    assert p.constraints["people_number"] == 4 and p.constraints["budget"] == 11300
    assert p.metadata == {"level": "medium", "days": 3, "split": "validation", "idx": 61, "has_reference": True}
    assert p.context.startswith("[{'Description': 'Attractions in Reno'")
    assert {q.id for q in ref} <= {q.id for q in val}
    assert all(q.metadata["split"] == "validation-ref" and q.context for q in ref)
    assert train[0].id == "train-1" and train[0].query.startswith("Please help me plan a trip from St. Petersburg")


def test_context_is_the_given_information_of_the_official_prompt(tp: TravelPlanner, tp_dir: Path) -> None:
    first = json.loads((tp_dir / "std_travelplanner.jsonl").read_text().splitlines()[0])
    user = first["messages"][1]["content"]
    assert tp.load("train")[0].context in user


def test_planning_a_row_without_reference_information_is_a_clear_error(tp: TravelPlanner) -> None:
    derived = [p for p in load_split(tp.root, "validation") if not p.context]  # the rows as the file has them
    assert len(derived) == 51
    with pytest.raises(DataError, match=r"validation-1.*validation-ref"):
        tp.prompt_variables(derived[0])
    with pytest.raises(DataError, match="51 TravelPlanner problem"):
        require_reference(derived)
    assert tp.prompt_variables(tp.load("validation-ref")[0])["context"]


def _write(tmp: Path, rows: list[Any]) -> Path:
    root = tmp / "travelplanner"
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.jsonl").write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return root


def _row(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "idx": 1,
        "org": "A",
        "dest": "B",
        "days": 3,
        "visiting_city_number": 1,
        "date": "['2022-03-01', '2022-03-02', '2022-03-03']",
        "people_number": 1,
        "local_constraint": "{'house rule': None, 'cuisine': None, 'room type': None, 'transportation': None}",
        "budget": 100,
        "query": "go",
        "level": "easy",
        "reference_information": None,
    }
    row.update(changes)
    return row


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"date": "['2022-03-01', "}, "line 2 \\(idx 2\\): field 'date': not a Python literal"),
        ({"date": "__import__('os')"}, "field 'date': not a Python literal"),
        ({"local_constraint": "{'house rule': None, 'pool': True}"}, "unknown local constraint"),
        ({"local_constraint": "{'cuisine': 'Indian'}"}, "'cuisine' must be None or a list"),
        ({"days": "three"}, "'days' must be a positive integer"),
        ({"level": "extreme"}, "'level' must be one of"),
        ({"reference_information": "[{'Description': 'x'}]"}, "Description.*Content"),
        ({"query": ""}, "'query' must be a non-empty string"),
    ],
)
def test_malformed_rows_name_the_row(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    root = _write(tmp_path, [_row(), _row(idx=2, **change)])
    with pytest.raises(DataError, match=message):
        load_split(root, "train")


def test_bad_json_and_missing_files(tmp_path: Path) -> None:
    root = _write(tmp_path, [_row(), "{not json"])
    with pytest.raises(DataError, match=r"train\.jsonl line 2: not valid JSON"):
        load_split(root, "train")
    with pytest.raises(DataError, match="validation split not found"):
        load_split(root, "validation")
    with pytest.raises(DataError, match="unknown TravelPlanner split 'dev'"):
        load_split(root, "dev")
    with pytest.raises(DataError, match="duplicate idx"):
        load_split(_write(tmp_path / "dup", [_row(), _row()]), "train")


def test_structured_query_accepts_dicts_and_strings() -> None:
    q = structured_query(_row(local_constraint={"cuisine": ["Indian"], "house rule": "pets"}), "here")
    assert q["local_constraint"] == {
        "house rule": "pets",
        "cuisine": ["Indian"],
        "room type": None,
        "transportation": None,
    }
    assert q["date"] == ["2022-03-01", "2022-03-02", "2022-03-03"]
    with pytest.raises(DataError, match="here: missing field"):
        structured_query({"org": "A"}, "here")
