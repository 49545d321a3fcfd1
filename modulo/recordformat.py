"""The line format of ``records.jsonl``: one :class:`~modulo.types.ProblemResult` per line, compact.

A problem's iterations repeat their texts: each iteration's ``prompt`` is the backprompt the previous
one built, its generator call sends those messages again, ``raw_reply`` is that call's ``reply``, and a
backprompt usually starts with the whole first prompt (TravelPlanner's 17 KB of reference information).
Most critics also give the same verdict on one iteration's plan as on the last. Format 1 (every line
written before formats were numbered) wrote each of them every time; format 2 stores each once per
record:

``record_format``
    2, written right after ``problem_id``. A line without it is format 1 (the plain ``model_dump_json``
    of the record). A number above :data:`RECORD_FORMAT` is a :class:`RecordFormatError` ("upgrade
    modulo"), never mistaken for a damaged line.
``text_table``
    The record's texts, each stored once: an entry is a string, or ``[i, "suffix"]`` for the text that
    is entry ``i`` (an earlier one, itself resolved) followed by ``suffix`` (a backprompt that extends
    the first prompt).
``verdict_table``
    The record's distinct verdicts (each one's full JSON object, as format 1 writes it).
References
    In every iteration, ``raw_reply``, ``backprompt``, each ``prompt`` message's ``content``, and each
    call's ``reply`` and messages' ``content``: an integer is an index into ``text_table``, a string is
    the text itself (texts shorter than :data:`MIN_SHARED_TEXT` stay inline). An iteration's
    ``verdicts`` list holds indexes into ``verdict_table``. Nothing else changes: every other field is
    written as format 1 writes it, all of them, in the same order.

:func:`encode_record` writes format 2 (the line built by hand of the record's objects, encoded
once; :func:`record_pieces` gives it in pieces, for ``os.writev``). The bytes are pydantic_core's
``to_json`` of those objects (``inf_nan_mode="null"``), written by orjson where orjson writes the same
bytes (plain JSON data and the record's own models: :func:`_json`) and by pydantic_core for anything
else; :func:`expand_record` turns a parsed
line of either format into the dict of format 1, which :class:`~modulo.types.ProblemResult` validation
does itself (so ``ProblemResult.model_validate_json(line)``
reads both formats and gives the same object for a record written in either). ``modulo export RUN_DIR
--format records`` writes a run's records expanded, one format-1 line each, for jq and other tools.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pydantic_core
from pydantic import BaseModel

from .errors import RunError

try:  # a dependency; an environment installed before it came writes the same bytes by pydantic_core alone
    import orjson
except ImportError:  # pragma: no cover - exercised only where orjson is missing
    orjson = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from .types import IterationRecord, Message, ProblemResult, Usage, Verdict

#: the format :func:`encode_record` writes; readers read every format up to it
RECORD_FORMAT = 2
FORMAT_KEY = "record_format"
TEXT_TABLE = "text_table"
VERDICT_TABLE = "verdict_table"
#: texts shorter than this stay inline (a reference would save nothing)
MIN_SHARED_TEXT = 64
#: a new text is written as an earlier one plus a suffix when it starts with an earlier text this long
MIN_SHARED_PREFIX = 256

#: the iteration fields and call fields holding one text each
ITERATION_TEXTS = ("raw_reply", "backprompt")
CALL_TEXTS = ("reply",)


class RecordFormatError(RunError):
    """A record line of a format newer than this modulo reads (not a damaged line: upgrade to read it)."""


#: "not seen yet" (None is a text field's value)
_UNSEEN: Any = object()


class _TextTable:
    """The texts of one record being written: each distinct text once, in order of first use.

    A text object met again (a prompt's content is the previous iteration's backprompt, a call's reply
    is the iteration's ``raw_reply``, a call sends the prompt's very messages) is found by identity: the
    record holds every text while it is encoded, so no identity is reused meanwhile. A new object is
    found again by a cheap key (length and ends) and compared whole, never hashed whole: a record's
    texts are fresh strings, and hashing each 20 KB prompt would cost more than the rest of the encoding.
    """

    __slots__ = ("entries", "keys", "known", "prefixes", "scrub", "texts")

    def __init__(self, scrub: Callable[[str], str] | None) -> None:
        self.entries: list[str | list[Any]] = []
        #: the whole text of each entry
        self.texts: list[str] = []
        self.keys: dict[tuple[int, str, str], list[int]] = {}
        #: the entries long enough to be another text's prefix, by their first characters (a text's
        #: prefixes all start as it does), in order of first use
        self.prefixes: dict[str, list[int]] = {}
        #: what :meth:`ref` gave for each text object met (by identity)
        self.known: dict[int, str | int | None] = {id(None): None}
        self.scrub = scrub

    def ref(self, text: str | None) -> str | int | None:
        """What a field holding ``text`` holds in the line: an entry's index, or the (short) text itself."""
        done = self.known.get(id(text), _UNSEEN)
        if done is _UNSEEN:
            done = self.known[id(text)] = self._new(text)  # type: ignore[arg-type]
        return done  # type: ignore[no-any-return]

    def _new(self, text: str) -> str | int:
        if self.scrub is not None:
            # each whole text before it is shared: a secret is never split between a prefix and its suffix
            text = self.scrub(text)
        if len(text) < MIN_SHARED_TEXT:
            return text
        texts = self.texts
        start = text[:16]
        same = self.keys.setdefault((len(text), start, text[-16:]), [])
        for at in same:
            if texts[at] == text:
                return at
        at = len(self.entries)
        base = self._longest_prefix(text, start)
        self.entries.append(text if base < 0 else [base, text[len(texts[base]) :]])
        self.texts.append(text)
        same.append(at)
        if len(text) >= MIN_SHARED_PREFIX:
            self.prefixes.setdefault(start, []).append(at)
        return at

    def _longest_prefix(self, text: str, start: str) -> int:
        """The longest entry ``text`` starts with (-1: none).

        An entry stored as another plus a suffix is a prefix of ``text`` when that other one is and ``text``
        goes on with the suffix: its base (an earlier entry, met first in the list) is compared once, and each
        entry built on it only by its suffix (the backprompts extending a 17 KB first prompt are not each
        compared whole)."""
        texts = self.texts
        entries = self.entries
        best = -1
        starts: dict[int, bool] = {}  # entry -> whether text starts with it (only entries of this list)
        for at in self.prefixes.get(start, ()):
            entry = entries[at]
            if type(entry) is list and entry[0] in starts:
                base = entry[0]
                found = starts[at] = starts[base] and text.startswith(entry[1], len(texts[base]))
            else:
                found = starts[at] = text.startswith(texts[at])
            if found and (best < 0 or len(texts[at]) > len(texts[best])):
                best = at
        return best


class _VerdictTable:
    """The distinct verdicts of one record being written, each kept as its JSON (what the line holds).

    Two verdicts are the same entry when their JSON is the same (Python's == would also merge 1, 1.0 and
    True, which read back as different values); each verdict is encoded once, and the line holds these
    encodings as they are. A verdict object met again (one a critic hands out every time it passes) is
    found by identity, not encoded again: the record holds every verdict while it is encoded, so no
    identity is reused meanwhile."""

    __slots__ = ("by_id", "by_length", "entries")

    def __init__(self) -> None:
        #: the JSON of each entry, in order of first use
        self.entries: list[bytes] = []
        #: the entries of each length (a new encoding is compared with these, never hashed whole)
        self.by_length: dict[int, list[int]] = {}
        self.by_id: dict[int, int] = {}

    def refs(self, verdicts: list[Verdict]) -> list[int]:
        """The entry of each verdict, in order."""
        by_id = self.by_id
        return [by_id[key] if (key := id(v)) in by_id else self._new(v) for v in verdicts]

    def _new(self, verdict: Verdict) -> int:
        data = _model_json(verdict)
        entries = self.entries
        same = self.by_length.setdefault(len(data), [])
        for at in same:
            if entries[at] == data:
                break
        else:
            at = len(entries)
            entries.append(data)
            same.append(at)
        self.by_id[id(verdict)] = at
        return at


#: orjson hands these to :func:`_nested` instead of writing them its own way (which could differ from
#: pydantic_core's): subclasses of str, int, dict and list other than enums, datetimes, dataclasses
_ORJSON_OPTIONS = (
    orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
    if orjson is not None
    else 0
)


def _json(value: Any) -> bytes:
    """``pydantic_core.to_json(value, inf_nan_mode="null")``, byte for byte, about three times faster where the
    value is plain JSON data and the record's own models: orjson writes those (dicts with string keys,
    lists, tuples, strings, integers of 64 bits, floats, booleans, None, enums, :data:`_RECORD_MODELS`)
    exactly as pydantic_core does (the same escapes, the same shortest floats, NaN and infinities as null);
    any other value in it (a datetime, a numpy number, a critic's own model, ...) is written by pydantic_core
    and spliced in; a key that is not a string or an integer over 64 bits makes orjson give up, and
    pydantic_core writes the whole value as before."""
    if orjson is not None:
        try:
            return orjson.dumps(value, default=_nested, option=_ORJSON_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError: not only plain data
            pass
    return pydantic_core.to_json(value, inf_nan_mode="null")


def _nested(value: Any) -> Any:
    """orjson's fallback: one of the record's own models as its fields (what its JSON holds); anything else
    (a datetime, a numpy number, a critic's own model, ...) as pydantic_core writes it, spliced in as it is
    (a value it cannot write raises, and :func:`_json` leaves the whole value to pydantic_core, which says
    so)."""
    if type(value) in _record_models():
        return _fields(value)
    return orjson.Fragment(pydantic_core.to_json(value, inf_nan_mode="null"))


def _model_json(model: BaseModel) -> bytes:
    """:func:`_json` of a model (the record's own models written from their fields, as :func:`_nested` does,
    without orjson calling back for the model itself)."""
    values = model.__dict__
    # a record model whose __dict__ holds its fields and nothing else (validation fills every field, in the
    # model's order: see _fields)
    return _json(values if _record_models().get(type(model)) == len(values) else model)


@functools.cache
def _record_models() -> dict[type[BaseModel], int]:
    """The models a record holds whose JSON is their fields' values as they are (no aliases, no custom
    serialisers, no computed fields), each with its number of fields: their fields are written without
    asking their serialisers."""
    from . import types

    models: tuple[type[BaseModel], ...] = (
        types.ProblemResult,
        types.IterationRecord,
        types.LLMCall,
        types.Message,
        types.ToolCall,
        types.Fault,
        types.Usage,
        types.Verdict,
        types.Judgement,
        types.UserAnswer,
        types.ProblemUpdate,
        types.Abstention,
    )
    return {model: len(model.model_fields) for model in models}


def _fields(model: BaseModel) -> dict[str, Any]:
    """A model's field values by name, in the model's order (what its JSON has, before encoding)."""
    values = model.__dict__
    names = _field_names(type(model))
    if len(values) == len(names):  # validation fills every field, in the model's order: a copy will do
        return values.copy()
    return {key: values[key] for key in names}


@functools.cache
def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(model.model_fields)


class _Encoder:
    """One record's line being built: its tables, and each message met (by identity: a call sends the
    prompt's very messages) built once."""

    __slots__ = ("messages", "texts", "usages", "verdicts")

    def __init__(self, scrub: Callable[[str], str] | None) -> None:
        self.texts = _TextTable(scrub)
        self.verdicts = _VerdictTable()
        self.messages: dict[int, dict[str, Any]] = {}
        #: each usage met (an iteration with one call records that call's usage: the same object) as its fields
        self.usages: dict[int, Any] = {}

    def usage(self, usage: Usage) -> Any:
        """``usage`` as the line holds it: its fields (the same dict for the same object), or the model itself
        where its fields might not be its JSON (:func:`_nested` then decides)."""
        done = self.usages.get(id(usage))
        if done is None:
            values = usage.__dict__
            plain = _record_models().get(type(usage)) == len(values)  # see _model_json
            done = self.usages[id(usage)] = values if plain else usage
        return done

    def message_list(self, messages: list[Message]) -> list[dict[str, Any]]:
        known = self.messages
        return [known[key] if (key := id(m)) in known else self._message(m) for m in messages]

    def _message(self, m: Message) -> dict[str, Any]:
        out = self.messages[id(m)] = _fields(m)
        out["content"] = self.texts.ref(m.content)
        return out

    def iteration(self, it: IterationRecord) -> dict[str, Any]:
        ref = self.texts.ref
        out = _fields(it)
        out["prompt"] = self.message_list(it.prompt)
        out["raw_reply"] = ref(it.raw_reply)
        out["backprompt"] = ref(it.backprompt)
        out["verdicts"] = self.verdicts.refs(it.verdicts)
        out["usage"] = self.usage(it.usage)
        calls = []
        for call in it.calls:
            fields = _fields(call)
            fields["messages"] = self.message_list(call.messages)
            fields["reply"] = ref(call.reply)
            fields["usage"] = self.usage(call.usage)
            calls.append(fields)
        out["calls"] = calls
        return out


def encode_record(result: ProblemResult, scrub: Callable[[str], str] | None = None) -> bytes:
    """``result`` as one line of format :data:`RECORD_FORMAT` (UTF-8 JSON, no newline): the pieces of
    :func:`record_pieces`, joined."""
    return b"".join(record_pieces(result, scrub))


#: what the line holds between the record's JSON (less its closing brace) and the verdict table's entries
_VERDICT_TABLE_START = b',"' + VERDICT_TABLE.encode() + b'":['


def record_pieces(result: ProblemResult, scrub: Callable[[str], str] | None = None) -> list[bytes | memoryview]:
    """``result``'s line of format :data:`RECORD_FORMAT`, in pieces that join into it (a writer hands them
    to ``os.writev`` as they are: the line is never copied into one buffer).

    The line is built of the record's own objects (each model below an iteration, and each distinct
    verdict, is encoded by its pydantic serialiser) and encoded once. ``scrub`` (the writer's
    redaction) is applied to each shared text whole, before it is shared; the caller still scrubs the
    line for everything else."""
    encoder = _Encoder(scrub)
    line = {"problem_id": result.problem_id, FORMAT_KEY: RECORD_FORMAT, **_fields(result)}
    line["iterations"] = [encoder.iteration(it) for it in result.iterations]
    line[TEXT_TABLE] = encoder.texts.entries
    # null for NaN and infinities, as model_dump_json writes them (format 1), so that the line stays JSON;
    # the verdict table, last, follows as its entries were encoded (each once, when it was compared)
    head = _json(line)
    return [memoryview(head)[:-1], _VERDICT_TABLE_START, b",".join(encoder.verdicts.entries), b"]}"]


def record_format(data: dict[str, Any]) -> int:
    """The format of a parsed record line (1 when it names none); RecordFormatError above this modulo's."""
    fmt = data.get(FORMAT_KEY, 1)
    if type(fmt) is not int or fmt < 1:
        raise ValueError(f"{FORMAT_KEY} is {fmt!r}, not a format number")
    if fmt > RECORD_FORMAT:
        raise RecordFormatError(
            f"record {data.get('problem_id', '?')!r} is in record format {fmt}, written by a newer modulo; this "
            f"one reads formats 1 to {RECORD_FORMAT}: upgrade modulo to read it"
        )
    return fmt


class _Texts:
    """The texts of one record being read, each resolved when first referenced."""

    __slots__ = ("entries", "resolved")

    def __init__(self, entries: Any) -> None:
        if not isinstance(entries, list):
            raise ValueError(f"{TEXT_TABLE} is not a list")
        self.entries: list[Any] = entries
        self.resolved: dict[int, str] = {}

    def text(self, value: Any) -> Any:
        """The text a field holds: a reference resolved, anything else as it is (validation judges it)."""
        if type(value) is not int:
            return value
        return self._entry(value, len(self.entries))

    def _entry(self, at: int, below: int) -> str:
        done = self.resolved.get(at)
        if done is not None:
            return done
        if not 0 <= at < below:
            raise ValueError(f"text reference {at} is not an entry of {TEXT_TABLE} before it")
        entry = self.entries[at]
        if isinstance(entry, str):
            text = entry
        elif isinstance(entry, list) and len(entry) == 2 and type(entry[0]) is int and isinstance(entry[1], str):
            text = self._entry(entry[0], at) + entry[1]  # a prefix is an earlier entry: no cycle
        else:
            raise ValueError(f"{TEXT_TABLE} entry {at} is neither a text nor [entry, suffix]")
        self.resolved[at] = text
        return text


def _expanded_messages(messages: Any, texts: _Texts) -> Any:
    if not isinstance(messages, list):
        return messages
    return [
        {**m, "content": texts.text(m["content"])} if isinstance(m, dict) and "content" in m else m for m in messages
    ]


def _with_texts(item: dict[str, Any], messages: str, keys: tuple[str, ...], texts: _Texts) -> dict[str, Any]:
    """A copy of an iteration's or a call's dict with its message list (key ``messages``) and its text
    fields (``keys``) resolved."""
    out = dict(item)
    if messages in out:
        out[messages] = _expanded_messages(out[messages], texts)
    for key in keys:
        if key in out:
            out[key] = texts.text(out[key])
    return out


def _expanded_iteration(it: Any, texts: _Texts, verdicts: list[Any]) -> Any:
    if not isinstance(it, dict):
        return it
    out = _with_texts(it, "prompt", ITERATION_TEXTS, texts)
    calls = out.get("calls")
    if isinstance(calls, list):
        out["calls"] = [_with_texts(c, "messages", CALL_TEXTS, texts) if isinstance(c, dict) else c for c in calls]
    refs = out.get("verdicts")
    if isinstance(refs, list):
        out["verdicts"] = [_verdict(v, verdicts) for v in refs]
    return out


def _verdict(ref: Any, verdicts: list[Any]) -> Any:
    if type(ref) is not int:
        return ref
    if not 0 <= ref < len(verdicts):
        raise ValueError(f"verdict reference {ref} is not an entry of {VERDICT_TABLE}")
    return verdicts[ref]


def expand_record(data: Any) -> Any:
    """A parsed record line of any format as the dict format 1 writes (the same keys, in order, every text
    and verdict in place); ``data`` itself when it is format 1 (or no record at all: validation judges it).

    The input is left unchanged (a format-2 record's dicts are copied where they change); texts are
    resolved only where referenced, so a reader that drops the text fields first (the reports' light
    records) never builds them. ValueError for a damaged reference, RecordFormatError for a newer format.
    """
    if not isinstance(data, dict) or FORMAT_KEY not in data:
        return data
    record_format(data)
    out = {k: v for k, v in data.items() if k not in (FORMAT_KEY, TEXT_TABLE, VERDICT_TABLE)}
    texts = _Texts(data.get(TEXT_TABLE, []))
    verdicts = data.get(VERDICT_TABLE, [])
    if not isinstance(verdicts, list):
        raise ValueError(f"{VERDICT_TABLE} is not a list")
    iterations = out.get("iterations")
    if isinstance(iterations, list):
        out["iterations"] = [_expanded_iteration(it, texts, verdicts) for it in iterations]
    return out
