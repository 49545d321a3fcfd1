"""Tools a benchmark offers an agent: declared by JSON Schema, called by name, timed in microseconds.

A benchmark that has tools returns a :class:`Toolbox` from :meth:`modulo.benchmark.Benchmark.tools`.
Each tool is a :class:`ToolSpec`: a name, a description and a JSON Schema of its arguments (an object
whose ``positional`` order is also the order of the text action syntax ``Name[arg1, arg2]``). A call
returns a :class:`ToolResult`: the rows it found (JSON objects with the benchmark's own column names),
or none and the benchmark's message for "nothing matches"; the observation text an agent reads; and
how long the lookup took.

The core knows nothing about any benchmark's tools: ``modulo tools BENCHMARK NAME ARG...`` and the
tool-using generator reach them only through this interface.
"""

from __future__ import annotations

import copy
import re
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from .errors import ConfigError
from .types import attributes


class ToolArgumentError(ConfigError):
    """A tool was called with arguments its schema rejects (or by a name nobody offers)."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool: ``parameters`` is a JSON Schema object; ``positional`` orders its properties for text syntax."""

    name: str
    description: str
    parameters: dict[str, Any]
    positional: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    @classmethod
    def strings(cls, name: str, description: str, /, *, aliases: tuple[str, ...] = (), **params: str) -> ToolSpec:
        """A tool whose arguments are all non-empty strings, in the order given (``param=description``)."""
        properties = {p: {"type": "string", "minLength": 1, "description": d} for p, d in params.items()}
        schema = {"type": "object", "properties": properties, "required": list(params), "additionalProperties": False}
        return cls(name, description, schema, tuple(params), aliases)

    def schema(self) -> dict[str, Any]:
        """A copy of the parameters schema (callers may mutate it, e.g. for an SDK's tool declaration)."""
        return copy.deepcopy(self.parameters)

    def bind(self, arguments: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
        """Keyword arguments from a mapping or a positional list, validated against the schema."""
        if isinstance(arguments, Mapping):
            bound = dict(arguments)
        else:
            args = list(arguments)
            if len(args) != len(self.positional):
                raise ToolArgumentError(
                    f"{self.name} takes {len(self.positional)} argument(s) ({', '.join(self.positional)}), "
                    f"got {len(args)}: {args!r}"
                )
            bound = dict(zip(self.positional, args, strict=True))
        error = jsonschema.exceptions.best_match(_validator(self).iter_errors(bound))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the arguments"
            raise ToolArgumentError(f"{self.name}: {where}: {error.message}")
        return bound

    def split_text(self, inner: str) -> list[str]:
        """The positional arguments of ``Name[inner]``: a one-argument tool takes the whole text, the
        others split it on ', ' (as the ReAct agents of the TravelPlanner paper do)."""
        return [inner] if len(self.positional) == 1 else inner.split(", ")

    def signature(self) -> str:
        """``Name[arg1, arg2]``: the text action syntax."""
        return f"{self.name}[{', '.join(self.positional)}]"


#: schema validators by the schema's identity, most recent last; bounded, for a toolbox whose ``specs()``
#: makes its specs anew at every call would otherwise add one per tool call
_VALIDATORS: OrderedDict[int, Any] = OrderedDict()
_VALIDATORS_KEPT = 256


def _validator(spec: ToolSpec) -> Any:
    key = id(spec.parameters)
    validator = _VALIDATORS.get(key)
    if validator is None:
        cls = jsonschema.validators.validator_for(spec.parameters)
        cls.check_schema(spec.parameters)
        validator = _VALIDATORS[key] = cls(spec.parameters)  # it holds the schema: the id stays its own
        while len(_VALIDATORS) > _VALIDATORS_KEPT:
            _VALIDATORS.popitem(last=False)
    else:
        _VALIDATORS.move_to_end(key)
    return validator


@dataclass
class ToolResult:
    """What one call returned.

    ``rows`` holds the matching rows (None for tools whose answer is not a table); ``message`` is set
    when the tool answered with a sentence instead (nothing matched, invalid input), ``ok`` is False
    when the call itself was invalid (an unknown city, a malformed date); ``micros`` is the wall-clock
    time of the lookup; ``render`` builds the observation text an agent reads, on demand.
    """

    tool: str
    arguments: dict[str, Any]
    rows: list[dict[str, Any]] | None = None
    message: str | None = None
    ok: bool = True
    micros: float = 0.0
    render: Callable[[], str] | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The observation text: the rendered rows, or the message."""
        if self.render is not None:
            return self.render()
        if self.message is not None:
            return self.message
        return "" if self.rows is None else "\n".join(str(r) for r in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {**attributes(self, "tool", "arguments", "ok", "rows", "message"), "micros": round(self.micros, 1)}


class Toolbox(ABC):
    """The tools of one benchmark."""

    @abstractmethod
    def specs(self) -> list[ToolSpec]:
        """Every tool offered, in a stable order."""

    @abstractmethod
    def _call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run tool ``name`` on validated ``arguments`` (``micros`` is filled in by :meth:`call`)."""

    def spec(self, name: str) -> ToolSpec:
        for spec in self.specs():
            if name == spec.name or name in spec.aliases:
                return spec
        known = ", ".join(s.name for s in self.specs())
        raise ToolArgumentError(f"unknown tool {name!r}; known: {known}")

    def call(self, name: str, arguments: Mapping[str, Any] | Sequence[Any]) -> ToolResult:
        """Validate and run one call; raises :class:`ToolArgumentError` for an unknown tool or bad arguments."""
        spec = self.spec(name)
        bound = spec.bind(arguments)
        start = time.perf_counter()
        result = self._call(spec.name, bound)
        result.micros = (time.perf_counter() - start) * 1e6
        return result


_ACTION = re.compile(r"^(\w+)\[(.+)\]$", re.DOTALL)


def parse_action(text: str) -> tuple[str, str] | None:
    """``Name[a, b, c]`` -> ("Name", "a, b, c"), or None when the text is not an action."""
    m = _ACTION.match(text.strip())
    return None if m is None else (m.group(1), m.group(2))
