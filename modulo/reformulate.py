"""Reformulators: turn a generator's text into the benchmark's plan JSON.

``llm``     an LLM prompt (the benchmark's ``reformulate`` template, else ``core/reformulate``) whose
            reply is parsed as JSON and validated against the plan schema
``parser``  the benchmark's deterministic parser
``none``    the generator was asked for JSON directly; its reply is parsed and validated

A failure is never a crash: it becomes a failed ``format`` verdict with a backprompt.
"""

from __future__ import annotations

import json
import math
import re
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

try:
    import orjson
except ImportError:  # pragma: no cover - exercised only where orjson is missing
    orjson = None  # type: ignore[assignment]

from .benchmark import Benchmark
from .canonical import frozen_object, tree_json
from .errors import ConfigError, PlanFormatError
from .llm.base import LLMRequest, LLMSettings
from .prompts import Template
from .types import LLMCall, Message, PlanJSON, Problem, canonical_json

ReformulatorMode = Literal["llm", "parser", "none"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


@dataclass
class Reformulation:
    plan: PlanJSON = None
    error: str | None = None
    calls: list[LLMCall] = field(default_factory=list)
    #: the plan's :func:`~modulo.types.canonical_json` text, when the reformulator has it (None: the loop
    #: encodes the plan itself)
    canonical: str | None = None


#: nesting deeper than this is no plan (and would overflow the recursion of the steps after parsing)
MAX_JSON_DEPTH = 100
#: the scan for a JSON value inside prose tries at most this many starting brackets...
_MAX_STARTS = 2000
#: ...and reads at most this many characters per character of the answer in failed attempts
_SCAN_FACTOR = 20


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            break
        stack.extend((child, level + 1) for child in children)
    return deepest


def _shallow(value: Any, text: str) -> Any:
    """``value`` (read from ``text``), or PlanFormatError when it nests too deeply. A value cannot nest
    deeper than ``text`` has opening brackets (a bracket inside a string only counts one too many), so
    the walk is needed only for a text with more than MAX_JSON_DEPTH of them."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return value
    if _depth(value) > MAX_JSON_DEPTH:
        raise PlanFormatError(f"the JSON value is nested more than {MAX_JSON_DEPTH} levels deep")
    return value


class _Reading(threading.local):
    #: the numbers read as floats (and NaN, Infinity, -Infinity) by this thread's JSON reads so far
    floats = 0


_READING = _Reading()
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _float(token: str) -> float:
    """The decoder's float, counted (what the scanner calls for a number with a fraction or an exponent only:
    a value read without one holds no float)."""
    _READING.floats += 1
    return float(token)


def _constant(name: str) -> float:
    """The decoder's NaN and infinities (as the standard decoder reads them), counted as floats."""
    _READING.floats += 1
    return _CONSTANTS[name]


#: the standard decoder (C scanner), counting the floats it reads: reads one JSON value at a position
_DECODER = json.JSONDecoder(parse_float=_float, parse_constant=_constant)
_SCAN_ONCE: Any = _DECODER.scan_once  # type: ignore[attr-defined]


def _whole_json(text: str) -> Any:
    """``json.loads(text)`` for a text with no whitespace at either end (``str.strip``'s, which holds JSON's):
    the value, read by the decoder's scanner at once (json.loads skips whitespace by two regular-expression
    matches first); ValueError when the text is not one JSON value."""
    try:
        value, end = _SCAN_ONCE(text, 0)
    except StopIteration:
        raise ValueError("no JSON value") from None
    if end != len(text):
        raise ValueError("more than one JSON value")
    return value


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: the whole text, a fenced block, or the first balanced object/array.

    Raises PlanFormatError with a short reason when there is none. The scan inside prose is bounded
    (starting points and characters read), so that no answer, however long or degenerate, takes more
    than linear time; a value nested more than MAX_JSON_DEPTH levels deep is refused.
    """
    return read_json(text)[0]


def read_json(text: str) -> tuple[Any, bool]:
    """:func:`extract_json`'s value, and whether it holds no float (no number with a fraction or an exponent,
    no NaN or infinity was read): then it is made of objects, arrays, strings, integers, booleans and nulls
    alone (:func:`validated`'s ``plain``)."""
    before = _READING.floats
    value = _extracted(text)
    return value, _READING.floats == before


def _extracted(text: str) -> Any:
    whole = text.strip()
    if not whole:
        raise PlanFormatError("the answer is empty")
    if "\x00" in text:
        raise PlanFormatError("the answer contains binary data")
    # the whole text first; the fenced blocks are looked for only when it is not JSON
    try:
        return _shallow(_whole_json(whole), whole)
    except (ValueError, RecursionError):  # JSONDecodeError, or a number too long to convert
        pass
    for m in _FENCE.finditer(text):
        block = m.group(1).strip()
        try:
            return _shallow(_whole_json(block), block)
        except (ValueError, RecursionError):
            pass
    decoder = _DECODER
    starts, budget = 0, _SCAN_FACTOR * len(text) + 1_000_000
    for i, ch in enumerate(text):
        if ch in "[{":
            starts += 1
            if starts > _MAX_STARTS or budget <= 0:
                raise PlanFormatError(
                    f"no JSON value could be read from the answer (gave up after {starts - 1} starting brackets)"
                )
            try:
                value, _ = decoder.raw_decode(text, i)
                return _shallow(value, text)
            except json.JSONDecodeError as exc:
                budget -= exc.pos - i + 1
            except (ValueError, RecursionError):
                budget -= 1000
    raise PlanFormatError("no JSON value could be read from the answer (it may be cut off or not JSON)")


#: a format error longer than this is cut: it goes into traces and into the next prompt
MAX_REASON_CHARS = 500


def short_reason(reason: str) -> str:
    """``reason`` cut to MAX_REASON_CHARS (a schema error can quote a whole, huge answer)."""
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 3] + "..."


#: the reason given for a plan holding NaN or an infinity (which Python's JSON reader accepts, as ``NaN``,
#: ``Infinity`` or a number too large for a float, and which records, written as standard JSON, would turn
#: into null: the plan the critics judged would not be the plan recorded)
NON_FINITE = "the plan holds a number JSON cannot hold (NaN or an infinity): write finite numbers only"


def _non_finite(value: Any) -> bool:
    """Whether ``value`` holds a float that is NaN or infinite (asked only when its canonical text shows one
    of their names, which a string may hold too). Walked without recursion: the value was just encoded, so
    it holds no cycle, but it may be deep."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())  # a key may be a float too (written as its text)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def validated(benchmark: Benchmark, value: Any, *, plain: bool = False) -> Reformulation:
    """``value`` validated by the benchmark, with its canonical JSON text: the value is encoded once, for
    the Unicode check and as the key of the benchmark's validation memo. ``plain``: the value was read from
    JSON text and holds no float (:func:`read_json`): orjson writes such a value's canonical text, byte for
    byte the standard encoder's, in a tenth of its time; one it cannot write (an integer past 64 bits, a
    lone surrogate) is written by the standard encoder."""
    try:  # text that cannot be written as UTF-8 (a lone surrogate escape) would break hashing and records
        key = _plain_json(value) if plain else None
        if key is None:  # (orjson's text is UTF-8, and a plain value holds no float: it needs neither check)
            try:
                key = tree_json(value)  # a value read from JSON text (the usual case) holds no cycle
            except (RecursionError, ValueError):
                key = canonical_json(value)  # a cycle or too deep (a parser's value): checked, and told apart
            if not key.isascii():
                key.encode("utf-8")
            if ("NaN" in key or "Infinity" in key) and _non_finite(value):
                return Reformulation(error=NON_FINITE)
    except UnicodeEncodeError:
        return Reformulation(error="the plan holds text that is not valid Unicode (a lone surrogate escape)")
    except RecursionError:
        return Reformulation(error=f"the plan is nested more than {MAX_JSON_DEPTH} levels deep")
    except (TypeError, ValueError) as exc:
        return Reformulation(error=short_reason(f"the plan is not JSON data: {exc}"))
    try:
        plan, canonical = benchmark.checked_plan(value, key)
    except PlanFormatError as exc:
        return Reformulation(error=short_reason(str(exc)))
    return Reformulation(plan=plan, canonical=canonical)


def _plain_json(value: Any) -> str | None:
    """``canonical_json(value)`` for a value of objects, arrays, strings, integers, booleans and nulls alone, by
    orjson (sorted keys, no spaces, text as is: the same bytes); None where orjson cannot write it (an integer
    past 64 bits, a lone surrogate) or is missing. A float is left out: orjson writes some apart (1e+16)."""
    if orjson is None:
        return None
    try:
        text: str = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return None
    return text


class Reformulator(ABC):
    mode: ReformulatorMode

    def __init__(self, benchmark: Benchmark) -> None:
        self.benchmark = benchmark

    def templates(self) -> dict[str, str]:
        return {}

    @abstractmethod
    async def reformulate(
        self, problem: Problem, text: str, *, truncated: bool = False, tags: dict[str, str] | None = None
    ) -> Reformulation:
        """Plan JSON from ``text``, or an error message for the format critic."""


class JSONReformulator(Reformulator):
    """``reformulator=none``: the generator's reply itself must be the plan JSON."""

    mode: ReformulatorMode = "none"

    async def reformulate(
        self, problem: Problem, text: str, *, truncated: bool = False, tags: dict[str, str] | None = None
    ) -> Reformulation:
        try:
            value, plain = read_json(text)
        except PlanFormatError as exc:
            reason = short_reason(str(exc)) + (" (the reply was cut off at the token limit)" if truncated else "")
            return Reformulation(error=reason)
        return validated(self.benchmark, value, plain=plain)


class ParserReformulator(Reformulator):
    """``reformulator=parser``: the benchmark's deterministic parser."""

    mode: ReformulatorMode = "parser"

    def __init__(self, benchmark: Benchmark) -> None:
        if not benchmark.has_parser:
            raise ConfigError(
                f"reformulator=parser: benchmark {benchmark.name!r} has no deterministic parser; use llm or none"
            )
        super().__init__(benchmark)

    async def reformulate(
        self, problem: Problem, text: str, *, truncated: bool = False, tags: dict[str, str] | None = None
    ) -> Reformulation:
        try:
            value = self.benchmark.parse(text, problem)
        except PlanFormatError as exc:
            cut = " (the reply was cut off at the token limit)" if truncated else ""
            return Reformulation(error=short_reason(str(exc)) + cut)
        return validated(self.benchmark, value)


class LLMReformulator(Reformulator):
    """``reformulator=llm``: ask a model to rewrite the text as plan JSON (schema-constrained when possible)."""

    mode: ReformulatorMode = "llm"

    def __init__(self, benchmark: Benchmark, client: Any, settings: LLMSettings) -> None:
        super().__init__(benchmark)
        self.client = client
        self.settings = settings
        self.template: Template = benchmark.template("reformulate")
        #: the plan's JSON Schema, read-only and shared by every request (encoded for the cache key once),
        #: and as the prompt shows it
        self.schema = frozen_object(benchmark.plan_json_schema())
        self.schema_text = json.dumps(self.schema, indent=1) if self.schema else "(any JSON)"

    def templates(self) -> dict[str, str]:
        return {"reformulate": self.template.label}

    async def reformulate(
        self, problem: Problem, text: str, *, truncated: bool = False, tags: dict[str, str] | None = None
    ) -> Reformulation:
        if not text or not text.strip():
            return Reformulation(error="the answer is empty")
        schema = self.schema
        variables = {**self.benchmark.prompt_variables(problem), "problem": problem, "reply": text}
        variables["schema"] = self.schema_text
        prompt = self.template.render(**variables)
        request = LLMRequest(
            messages=(Message(role="user", content=prompt),),
            model=self.settings.model,
            temperature=0.0,
            max_tokens=self.settings.max_tokens,
            seed=self.settings.seed,
            response_schema=schema,
            structured_output=self.settings.structured_output if schema else "off",
            tags={**(tags or {}), "stage": "reformulate"},
        )
        # transport failures (LLMError) propagate: the loop records them and never pastes them into a prompt
        call: LLMCall = await self.client.call(request, "reformulate")
        result = JSONReformulator(self.benchmark)
        out = await result.reformulate(problem, call.reply or "", truncated=call.finish_reason == "length")
        out.calls.append(call)
        return out


def build_reformulator(mode: str, benchmark: Benchmark, client: Any, settings: LLMSettings | None) -> Reformulator:
    if mode == "none":
        return JSONReformulator(benchmark)
    if mode == "parser":
        return ParserReformulator(benchmark)
    if mode == "llm":
        if client is None or settings is None:
            raise ConfigError("reformulator=llm needs an llm backend; with a search generator use reformulator=none")
        return LLMReformulator(benchmark, client, settings)
    raise ConfigError(f"reformulator must be llm, parser or none, not {mode!r}")
