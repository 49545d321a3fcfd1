"""The LLM protocol: messages and decoding parameters in, text plus usage out.

A backend is registered under ``modulo.llms`` as a factory ``factory(settings: LLMSettings, **args)``
returning an object with ``async complete(request) -> LLMResponse`` and ``async aclose()``.
Backends raise :class:`~modulo.errors.TransientLLMError` (retry) or
:class:`~modulo.errors.PermanentLLMError` (do not) for transport failures; the retry, rate-limit,
cache and accounting layers in :mod:`modulo.llm.client` wrap every backend the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, WrapValidator

from ..canonical import FrozenObject, messages_bytes, plain
from ..config import LLMSettings as LLMSettings  # the llm config section: re-exported for the backends
from ..hashing import feed
from ..types import Message, ToolCall, Usage, canonical_json


class ToolDecl(BaseModel):
    """A tool offered to the model: its name, description and a JSON Schema of its arguments."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class ToolTurn(BaseModel):
    """One earlier assistant turn that called tools, and the results sent back (aligned with ``calls``).

    A request's ``turns`` follow its ``messages``: the conversation of a native tool-calling agent.
    """

    model_config = ConfigDict(frozen=True)

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    results: tuple[str, ...] = ()
    #: a user message after the results (the agent's note on a reply without a tool call, or feedback)
    feedback: str = ""


def _keep_frozen(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A :class:`~modulo.canonical.FrozenObject` is kept as it is (the same object: its canonical JSON is made
    once for every request that carries it); anything else is validated (and copied) as a dict."""
    return value if type(value) is FrozenObject else handler(value)


class LLMRequest(BaseModel):
    """Everything that determines a reply. Its :meth:`key` addresses the response cache."""

    model_config = ConfigDict(frozen=True)

    messages: tuple[Message, ...]
    model: str = ""
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    #: JSON Schema the reply must follow (structured output), when the caller wants one. A caller that sends
    #: one schema with many requests hands a :class:`~modulo.canonical.FrozenObject` of it
    #: (:func:`~modulo.canonical.frozen_object`): read-only, carried by identity, encoded for the cache
    #: key once; a plain dict is copied, and encoded for each key.
    response_schema: Annotated[dict[str, Any] | None, WrapValidator(_keep_frozen)] = None
    #: "schema": constrain to response_schema; "json": any JSON object; "off": free text
    structured_output: Literal["schema", "json", "off"] = "off"
    #: sample number of the run (``run.sample``): another index is a deliberate fresh sample
    sample_index: int = 0
    #: tools the model may call (native tool calling); part of the cache key
    tools: tuple[ToolDecl, ...] = ()
    #: earlier tool-calling turns after ``messages`` (see :class:`ToolTurn`)
    turns: tuple[ToolTurn, ...] = ()
    #: draw number inside one problem: the n-th time the same messages are sent (at temperature > 0,
    #: a new sample with its own cache entry, replayed exactly on a re-run)
    draw: int = 0
    #: where the request comes from (problem_id, iteration, stage); NOT part of the cache key
    tags: dict[str, str] = Field(default_factory=dict)

    def key(self, backend: str) -> str:
        """Content address of (backend, request), tags excluded. The tools offered, the tool turns and
        the draw number are part of it; requests without them (draw 0) keep the keys they had before
        those existed: the SHA-256 of the canonical JSON of ``{"backend": backend, **the request's fields}``."""
        parts = self.key_parts(backend)
        if parts is None:
            exclude = {"tags"} | {name for name in ("tools", "turns", "draw") if not getattr(self, name)}
            payload = {"backend": backend, **self.model_dump(mode="json", exclude=exclude)}
            return hashlib.sha256(canonical_json(payload).encode()).hexdigest()
        head, tail = parts
        h = hashlib.sha256(head)
        feed(h, messages_bytes(self.messages))
        h.update(tail)
        return h.hexdigest()

    def key_parts(self, backend: str) -> tuple[bytes, bytes] | None:
        """The text :meth:`key` hashes, but for the messages' list: what comes before it and after it (the
        members of the object in the sorted order canonical_json writes them, each value as it writes
        it), so that the messages (most of it) can be written and hashed by :mod:`modulo.canonical`.
        None when a message is not a plain :class:`Message` (then the whole is encoded as JSON)."""
        if not all(map(plain, self.messages)):
            return None
        return self._kept_parts(backend)

    def _kept_parts(self, backend: str | None) -> tuple[bytes, bytes]:
        """:meth:`_members_parts`, made once for requests alike but for their messages and tags."""
        signature = self._members_signature(backend)
        if signature is not None:
            known = _KEY_PARTS.get(signature)
            if known is not None and known[2] is self.response_schema:
                return known[0], known[1]
        parts = self._members_parts(backend)
        if signature is not None:
            if len(_KEY_PARTS) >= _KEY_PARTS_KEPT:
                _KEY_PARTS.clear()
            _KEY_PARTS[signature] = (*parts, self.response_schema)
        return parts

    def _members_signature(self, backend: str | None) -> tuple[Any, ...] | None:
        """What :meth:`key_parts` makes its text of, besides the messages, as a dict key: the backend, the
        schema (a :class:`~modulo.canonical.FrozenObject`, by identity), and every other member as its type
        and ``repr`` (which tell apart what JSON writes apart: 1 and 1.0 and True, 0.0 and -0.0). None for a
        request whose parts are not kept: a subclass, tools or tool turns offered, a plain dict as schema."""
        if type(self) is not LLMRequest or self.tools or self.turns:
            return None
        schema = self.response_schema
        if schema is not None and type(schema) is not FrozenObject:
            return None
        values = list(map(self.__dict__.__getitem__, _SIGNED_MEMBERS))
        kinds = tuple(map(type, values))
        if not _SIGNED_KINDS.issuperset(kinds) or (
            tuple in kinds and not all(type(v) is str for value in values if type(value) is tuple for v in value)
        ):
            return None  # a value whose repr might not tell it apart (a model_copy may hold anything)
        return (backend, id(schema), kinds, *map(repr, values))

    def stored_json(self, messages_json: bytes | Sequence[bytes] | None = None) -> str:
        """``canonical_json(self.model_dump(mode="json", exclude={"tags"}))``: the request as the response cache
        stores it, with its messages (most of it) written by :mod:`modulo.canonical` (the standard encoder
        escapes a text holding one non-ASCII character character by character: ~150 us for a TravelPlanner
        prompt), or given: ``messages_json``, their list's canonical JSON in UTF-8 (as the client's keys
        made it), whole or in pieces to join."""
        parts = self.stored_parts(messages_json)
        if parts is None:
            return canonical_json(self.model_dump(mode="json", exclude={"tags"}))
        return b"".join(parts).decode()

    def stored_parts(self, messages_json: bytes | Sequence[bytes] | None = None) -> tuple[bytes, bytes, bytes] | None:
        """:meth:`stored_json` in UTF-8 in three parts: what comes before the messages' list (kept for requests
        alike: the same object), the list, what comes after it (kept too). None when a message is not a
        plain :class:`Message`."""
        if not all(map(plain, self.messages)):
            return None
        head, tail = self._kept_parts(None)
        if messages_json is None:
            return head, messages_bytes(self.messages), tail
        return head, messages_json if isinstance(messages_json, bytes) else b"".join(messages_json), tail

    def _members_parts(self, backend: str | None) -> tuple[bytes, bytes]:
        """The request's canonical JSON before and after its messages' list: with ``backend``, the text
        :meth:`key` hashes (tools, turns and draw only when set); without, every field (:meth:`stored_json`)."""
        exclude = {"tags", "messages"}
        if backend is not None:
            exclude |= {name for name in ("tools", "turns", "draw") if not getattr(self, name)}
        schema = self.response_schema
        if type(schema) is FrozenObject:  # its canonical JSON, made once (the text below would make)
            exclude.add("response_schema")
        payload = self.model_dump(mode="json", exclude=exclude)
        if backend is not None:
            payload["backend"] = backend
        texts = {name: canonical_json(value) for name, value in payload.items()}
        if type(schema) is FrozenObject:
            texts["response_schema"] = schema.canonical
        names = sorted(texts)
        at = sum(1 for name in names if name < "messages")
        members = [encode_basestring(name) + ":" + texts[name] for name in names]
        before, after = members[:at], members[at:]
        head = "{" + "".join(m + "," for m in before) + '"messages":'
        tail = "".join("," + m for m in after) + "}"
        return head.encode(), tail.encode()


#: the members of an :class:`LLMRequest` (but the messages, tags, schema, tools and turns) a key is made of
_SIGNED_MEMBERS = tuple(
    name for name in LLMRequest.model_fields if name not in ("messages", "tags", "response_schema", "tools", "turns")
)
#: the types of the members' values a signature takes (a tuple: of strings)
_SIGNED_KINDS = frozenset({str, int, float, bool, type(None), tuple})
#: :meth:`LLMRequest._members_signature` -> (head, tail, the schema they were made with): a run's requests
#: differ in their messages (and tags) but share the rest, whose text is then made once, not per request
_KEY_PARTS: dict[tuple[Any, ...], tuple[bytes, bytes, Any]] = {}
_KEY_PARTS_KEPT = 256


class LLMResponse(BaseModel):
    text: str
    #: the tools the model asked to call (finish_reason "tool_calls"); empty for a plain reply
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    #: False when the server's reply carried no usage: its tokens (and dollars) are unknown, not zero
    usage_reported: bool = True
    #: of ``usage.input_tokens``, those the provider read from its prompt cache, and those it wrote to it
    #: (priced apart: :class:`~modulo.llm.pricing.Price`)
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    model: str = ""
    finish_reason: str | None = None
    cached: bool = False


@dataclass(frozen=True)
class Capabilities:
    """What a backend declares about itself, as a class attribute ``capabilities`` (an instance may
    override it). The client and the build read it through :func:`capabilities_of`; nothing probes
    a backend for loose attributes."""

    #: costs no dollars: no warning about a model missing from the price table
    free: bool = False
    #: answers come from a recording, not a paid call: accounted like cache hits
    recorded: bool = False
    #: its answers depend on the request alone, so the response cache may store them
    cacheable: bool = True
    #: writes usable plans only under schema-constrained decoding: ``generator.prompt=auto`` picks
    #: the json prompt (and ``reformulator=auto`` then none)
    prefers_json: bool = False
    #: ``complete`` returns or raises within ``llm.timeout_s`` by construction (a script with no function
    #: to call and a latency below it): the client sets no outer guard of its own around the call
    bounded: bool = False


#: a backend that declares nothing: a paid, cacheable API with no preference
DEFAULT_CAPABILITIES = Capabilities()


def capabilities_of(backend: Any) -> Capabilities:
    """The declared :class:`Capabilities` of a backend class or instance (the defaults when it declares none)."""
    caps = getattr(backend, "capabilities", DEFAULT_CAPABILITIES)
    if not isinstance(caps, Capabilities):
        raise TypeError(f"{backend!r}.capabilities is {type(caps).__name__}, not modulo.llm.base.Capabilities")
    return caps


@runtime_checkable
class LLM(Protocol):
    """What every backend implements (and, optionally, ``capabilities``: a :class:`Capabilities`)."""

    name: str

    async def complete(self, request: LLMRequest) -> LLMResponse: ...

    async def aclose(self) -> None: ...
