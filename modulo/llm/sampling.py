"""Seeded stand-in replies: a small JSON value for a schema, or a few plausible words.

Used by the fake provider (``modulo.testing.fake_server``) and by the scripted backend when it is
given no script, so that a pipeline can run end to end with no model at all.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

WORDS = (
    "plan visit city day hotel flight dinner museum budget route morning evening train "
    "arrive depart lunch tour stay park meeting friend schedule"
).split()


def sample_from_schema(schema: Mapping[str, Any], rng: random.Random, root: Mapping[str, Any] | None = None) -> Any:
    """A small JSON value that follows ``schema`` (objects get every listed property)."""
    root = root if root is not None else schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, Mapping) else {}
        return sample_from_schema(target, rng, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return rng.choice(list(schema["enum"]))
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = schema.get(combinator)
        if options:
            usable = [o for o in options if o.get("type") != "null"] or list(options)
            return sample_from_schema(usable[0], rng, root)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: sample_from_schema(sub, rng, root) for name, sub in props.items()}
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        items = schema.get("items", {"type": "string"})
        return [sample_from_schema(items, rng, root) for _ in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", rng.randint(1, 9)))
    if kind == "number":
        return float(schema.get("minimum", rng.randint(1, 99)))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if schema.get("format") == "date":
        return "2024-03-0" + str(rng.randint(1, 9))
    return " ".join(rng.choice(WORDS) for _ in range(2))


def seeded_rng(*parts: Any) -> random.Random:
    """A random generator seeded by the JSON of ``parts`` (deterministic across processes)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return random.Random(digest)


def stand_in_reply(messages: Sequence[Any], schema: Mapping[str, Any] | None, json_mode: bool, seed: int = 0) -> str:
    """A deterministic reply for ``messages``: schema-shaped JSON, a JSON object, or a sentence."""
    rng = seeded_rng(seed, [getattr(m, "content", m) for m in messages], schema)
    if schema is not None:
        return json.dumps(sample_from_schema(schema, rng))
    if json_mode:
        return json.dumps({"answer": " ".join(rng.choice(WORDS) for _ in range(6))})
    return " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "."
