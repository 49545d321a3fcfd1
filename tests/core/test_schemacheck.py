"""modulo.schemacheck: the fast yes/no check agrees with jsonschema on every value, for the built-in
benchmarks' plan schemas and for schemas using each keyword it handles; beyond it, it declines."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, TypeAdapter

from modulo.schemacheck import compile_check

ODD_VALUES: list[Any] = [None, True, False, 0, 1, -3, 1.0, 2.5, "", "x", "1", [], [1], {}, {"a": 1}]


def sample(schema: Any, root: dict[str, Any], rng: random.Random, depth: int = 0, wrong: float = 0.08) -> Any:
    """A value shaped like ``schema``, slightly wrong at a rate ``wrong`` (a wrong type, a missing or extra key)."""
    if rng.random() < wrong or depth > 6 or isinstance(schema, bool):
        return rng.choice(ODD_VALUES)
    if not wrong:  # a value meant to be valid: plain choices
        rng = _Plain(rng)
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return sample(root["#"] if schema["$ref"] == "#" else root["$defs"][name], root, rng, depth + 1, wrong)
    for key in ("anyOf", "allOf"):
        if key in schema:
            return sample(rng.choice(schema[key]), root, rng, depth + 1, wrong)
    if "enum" in schema:
        return rng.choice([*schema["enum"], "not-listed", 1])
    if "const" in schema:
        return rng.choice([schema["const"], "other"])
    kind = schema.get("type", rng.choice(["object", "array", "string", "integer"]))
    kind = rng.choice(kind) if isinstance(kind, list) else kind
    if kind == "object":
        props = schema.get("properties", {}).items()
        out = {
            k: sample(s, root, rng, depth + 1, wrong) for k, s in props if rng.random() < 1 - wrong and s is not False
        }
        if rng.random() < wrong:
            out["extra"] = rng.choice(ODD_VALUES)
        return out
    if kind == "array":
        return [sample(schema.get("items", {}), root, rng, depth + 1, wrong) for _ in range(rng.randrange(0, 5))]
    if kind == "integer":
        return rng.choice([0, 7, -2, 3.0, 3.5, True, 10**20])
    if kind == "number":
        return rng.choice([0, 1.5, -2, float("inf"), False])
    if kind == "boolean":
        return rng.choice([True, False, 0, 1])
    if kind == "null":
        return rng.choice([None, 0, ""])
    return rng.choice(["9:30", "a", "abc", "x" * 12, "", "A1", "14:00", "25:61"])


class _Plain(random.Random):
    """Picks the first choice (the valid one in :func:`sample`'s lists), draws numbers as ``rng`` does."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def random(self) -> float:
        return self.rng.random()

    def randrange(self, *args: Any) -> int:  # type: ignore[override]
        return self.rng.randrange(*args)

    def choice(self, seq: Any) -> Any:
        return seq[0]


def agree(schema: dict[str, Any], n: int = 400, seed: int = 0) -> None:
    check = compile_check(schema)
    assert check is not None, schema
    validator = jsonschema.validators.validator_for(schema)(schema)
    rng = random.Random(seed)
    root = {**schema, "#": schema}
    verdicts = set()
    for i in range(n):
        value = sample(schema, root, rng, wrong=0.0 if i % 4 == 0 else 0.08)  # every fourth meant to be valid
        expected = validator.is_valid(value)
        assert check(value) is expected, (value, expected)
        verdicts.add(expected)
    assert verdicts == {True, False}  # both kinds of value were tried


def builtin_plan_models() -> list[type[BaseModel]]:
    """The plan models of the built-in benchmark classes (each once)."""
    import critics.natural_plan.benchmark as natural_plan
    import critics.synth.calendar as synth_calendar
    import critics.synth.tasks as synth_tasks
    import critics.synth.trip as synth_trip
    import critics.travelbench.benchmark as travelbench
    import critics.travelplanner.benchmark as travelplanner

    models: dict[str, type[BaseModel]] = {}
    for module in (natural_plan, synth_calendar, synth_tasks, synth_trip, travelbench, travelplanner):
        for value in vars(module).values():
            model = getattr(value, "plan_model", None) if isinstance(value, type) else None
            if isinstance(model, type) and issubclass(model, BaseModel):
                models[f"{model.__module__}.{model.__qualname__}"] = model
    assert len(models) >= 6
    return list(models.values())


@pytest.mark.parametrize("model", builtin_plan_models(), ids=lambda m: m.__qualname__)
def test_the_fast_check_agrees_with_jsonschema_on_the_builtin_plan_schemas(model: type[BaseModel]) -> None:
    schema = TypeAdapter(model).json_schema()
    if compile_check(schema) is None:  # beyond the fast check: jsonschema does it all, nothing to compare
        pytest.skip(f"{model.__qualname__}'s schema uses a keyword the fast check leaves to jsonschema")
    agree(schema)


KEYWORDS = {
    "$defs": {"Leg": {"type": "object", "properties": {"to": {"type": "string", "minLength": 2}}, "required": ["to"]}},
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 0},
        "x": {"type": ["number", "null"]},
        "flag": {"type": "boolean"},
        "kind": {"enum": ["a", "b", 1]},
        "fixed": {"const": "abc"},
        "legs": {"type": "array", "items": {"$ref": "#/$defs/Leg"}, "maxItems": 4},
        "maybe": {"anyOf": [{"type": "string", "pattern": "^[0-9]"}, {"type": "null"}]},
        "both": {"allOf": [{"type": "integer"}, {"maximum": 5}]},
        "free": {},
        "never": False,
    },
    "required": ["n", "legs"],
    "additionalProperties": {"type": "string"},
}

RECURSIVE = {
    "$defs": {"Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
    "$ref": "#/$defs/Node",
}


@pytest.mark.parametrize("schema", [KEYWORDS, RECURSIVE], ids=["keywords", "recursive"])
def test_the_fast_check_agrees_with_jsonschema_keyword_by_keyword(schema: dict[str, Any]) -> None:
    for seed in range(3):
        agree(schema, seed=seed)


def test_integers_booleans_and_floats_follow_jsonschema() -> None:
    check = compile_check({"type": "integer"})
    assert check is not None
    assert check(3) and check(3.0) and not check(3.5) and not check(True) and not check("3")
    number = compile_check({"type": "number"})
    assert number is not None and number(1) and number(1.5) and not number(False)


@pytest.mark.parametrize(
    "schema",
    [
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        {"not": {"type": "string"}},
        {"type": "array", "prefixItems": [{"type": "string"}]},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"$ref": "https://example.org/schema.json"},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"},
    ],
)
def test_a_schema_beyond_the_fast_check_is_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_check(schema) is None
