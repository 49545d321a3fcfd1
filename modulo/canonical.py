"""Pieces of :func:`~modulo.types.canonical_json`, written straight to UTF-8 bytes and hashed.

The loop hashes every prompt (``prompt_sha256``) and the LLM client every request (the cache key): both are
SHA-256 digests of canonical JSON holding the prompt's messages, often tens of kilobytes of text. The
standard encoder escapes such a text character by character (slowly when it holds one non-ASCII
character), and the digest is then taken of its UTF-8 encoding. Here orjson writes the text's JSON body
straight to UTF-8 (where it is missing, the text is encoded to UTF-8 once and escaped there: the characters
JSON escapes are single bytes in UTF-8, found by fast byte scans). The bytes are exactly
``canonical_json(...).encode()``'s.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any

from pydantic import TypeAdapter

try:
    import orjson
except ImportError:  # pragma: no cover - exercised only where orjson is missing
    orjson = None  # type: ignore[assignment]

from .hashing import feed
from .types import Message, canonical_json

#: :func:`~modulo.types.canonical_json`'s encoder without the check for cycles (a dict of the ids of the
#: containers being written, kept for every list and object): for a value that holds none
_TREE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str, check_circular=False)


def tree_json(value: Any) -> str:
    """``canonical_json(value)`` for a value that is a tree (what a JSON decoder returns: no container holds
    itself); a value with a cycle raises RecursionError instead of canonical_json's ValueError."""
    return _TREE.encode(value)


#: Message's fields are exactly these two: its canonical JSON is then ``{"content":...,"role":...}``
TWO_FIELDS = set(Message.model_fields) == {"role", "content"}
#: the control characters JSON writes as ``\u00XX`` (the other three have short escapes, made below)
_OTHER_CONTROLS = bytes(c for c in range(32) if c not in b"\n\r\t")
#: the start of a message's canonical JSON, up to its content
CONTENT_START = b'{"content":"'


def escaped(text: str) -> bytes:
    """``encode_basestring(text)[1:-1].encode()``: the body of ``text`` as a JSON string (what
    :func:`~modulo.types.canonical_json` writes: non-ASCII as is), in UTF-8. Written by orjson (the same
    bytes: a 17,000-character TravelPlanner prompt in about 2 us, against 24 by the byte scans below), else
    (no orjson; a lone surrogate, which orjson refuses and UTF-8 cannot hold: raises UnicodeEncodeError) by
    byte scans; a text holding a rare control character is escaped by ``encode_basestring``."""
    if orjson is not None:
        try:
            body: bytes = orjson.dumps(text)[1:-1]
        except TypeError:  # orjson.JSONEncodeError is one
            pass
        else:
            return body
    raw = text.encode()
    if len(raw.translate(None, _OTHER_CONTROLS)) != len(raw):
        return encode_basestring(text)[1:-1].encode()
    return (
        raw.replace(b"\\", b"\\\\")
        .replace(b'"', b'\\"')
        .replace(b"\n", b"\\n")
        .replace(b"\r", b"\\r")
        .replace(b"\t", b"\\t")
    )


_ENDS: dict[str, bytes] = {}


def message_end(role: str) -> bytes:
    """The end of a message's canonical JSON after its content's body: ``","role":"<role>"}``."""
    end = _ENDS.get(role)
    if end is None:
        end = _ENDS[role] = ('","role":' + encode_basestring(role) + "}").encode()
    return end


def plain(m: Any) -> bool:
    """Whether ``m`` is a :class:`Message` whose canonical JSON is its content and role alone."""
    return TWO_FIELDS and type(m) is Message


def message_bytes(m: Message) -> bytes:
    """``canonical_json(m.model_dump()).encode()``."""
    if not plain(m):
        return canonical_json(m.model_dump()).encode()
    return b"".join((CONTENT_START, escaped(m.content), message_end(m.role)))


def messages_bytes(messages: Any) -> bytes:
    """``canonical_json([m.model_dump() for m in messages]).encode()``."""
    return b"[" + b",".join(map(message_bytes, messages)) + b"]"


#: a message text at least this long is kept in its JSON-escaped form for the messages that quote it
QUOTED_CHARS = 2048


class PromptHasher:
    """SHA-256 of ``head`` and the canonical JSON of a list of messages (with no head: a prompt's
    ``prompt_sha256``, :func:`modulo.metacontroller._sha`), for one problem's prompts iteration after
    iteration, hashing as little as it can:

    * the prompt of iteration k often starts with the very messages of iteration k-1 (the system
      message, the first prompt a conversation keeps): the hash state after each message of the last
      prompt is kept, and a prompt that starts with the same message objects resumes from it;
    * a new message that *starts with* a long text seen before (the ``all`` backprompt puts the original
      request first) resumes from the hash state kept after that text, so the request is neither
      escaped nor hashed again: only the feedback after it is;
    * a message seen before (the same object, in another place) reuses its encoding, and a new message
      that quotes a long text seen before elsewhere reuses that text's escaped form (JSON escapes
      character by character, so the escaped parts join into the whole's).

    The value is exactly that of the whole text. It keeps the last prompt's messages with their hash states and
    two long texts (the first, usually the request, and the latest) with theirs: bounded memory."""

    def __init__(self, head: bytes = b"") -> None:
        #: what the hashed text starts with before the messages' list (the LLM cache key's first members)
        self.head = head
        #: message id -> (the message, its encoding; None when it was hashed by resuming: encode again)
        self._pieces: dict[int, tuple[Message, bytes | None]] = {}
        #: the last prompt's messages, each with the hash state after it
        self._states: list[tuple[Message, Any]] = []
        #: long texts seen: (the messages before, the text, its escaped UTF-8 body, the hash state after
        #: ``[<messages before>,{"content":"<body>``)
        self._long: list[tuple[tuple[Message, ...], str, bytes, Any]] = []
        #: message id -> (the message, the escaped bodies of the long text it starts with and of the rest),
        #: for the last prompt's messages hashed by resuming (their encoding is joined only if asked for)
        self._bodies: dict[int, tuple[Message, bytes, bytes]] = {}

    def sha(self, messages: Sequence[Message]) -> str:
        digest: str = self.state(messages).hexdigest()
        return digest

    def state(self, messages: Sequence[Message]) -> Any:
        """The hash object after ``head`` and the messages' list (``[...]``): the caller may feed it more."""
        states = self._states
        k = 0
        while k < len(messages) and k < len(states) and messages[k] is states[k][0]:
            k += 1
        # the state after the messages so far (None: not made yet; a message resumed from a long text's
        # state needs none)
        h = states[k - 1][1].copy() if k else None
        kept = states[:k]
        pieces = {id(m): self._pieces[id(m)] for m, _ in kept if id(m) in self._pieces} if k else {}
        bodies = {id(m): self._bodies[id(m)] for m, _ in kept if id(m) in self._bodies} if k else {}
        for i in range(k, len(messages)):
            m = messages[i]
            known = self._pieces.get(id(m))
            piece = known[1] if known is not None and known[0] is m else None  # its encoding, when kept
            resumed = self._resume(messages, i, m) if piece is None else None
            if resumed is not None:
                h, quoted_body, rest = resumed
                bodies[id(m)] = (m, quoted_body, rest)
            else:
                if h is None:
                    h = hashlib.sha256(self.head + b"[")
                elif i:
                    h.update(b",")
                if piece is not None:
                    feed(h, piece)
                else:
                    piece = self._encode(messages, i, m, h)
            pieces[id(m)] = (m, piece)
            kept.append((m, h.copy()))
        if h is None:  # no message
            h = hashlib.sha256(self.head + b"[")
        h.update(b"]")
        self._pieces = pieces
        self._bodies = bodies
        self._states = kept
        return h

    def encoded(self, messages: Sequence[Message]) -> bytes | None:
        """``messages_bytes(messages)`` for the messages :meth:`state` hashed last (the same objects), joined
        from what it kept of them (a message hashed by resuming: the escaped long text it starts with and
        the escaped rest) instead of escaping them again; None for other messages."""
        parts = self.encoded_parts(messages)
        return b"".join(parts) if parts is not None else None

    def encoded_parts(self, messages: Sequence[Message]) -> list[bytes] | None:
        """:meth:`encoded` in the pieces it is joined from (a new list): whoever needs the bytes joins them
        (the LLM client hands them to the response cache's writing thread, which does, off the event loop)."""
        states = self._states
        if len(messages) != len(states) or not all(map(operator.is_, messages, (m for m, _ in states))):
            return None
        chunks: list[bytes] = [b"["]
        for i, m in enumerate(messages):
            if i:
                chunks.append(b",")
            known = self._pieces.get(id(m))
            piece = known[1] if known is not None and known[0] is m else None
            if piece is not None:
                chunks.append(piece)
                continue
            parts = self._bodies.get(id(m))
            if parts is None or parts[0] is not m:
                return None
            chunks += (CONTENT_START, parts[1], parts[2], message_end(m.role))
        chunks.append(b"]")
        return chunks

    def _resume(self, messages: Sequence[Message], i: int, m: Message) -> tuple[Any, bytes, bytes] | None:
        """The hash state after message ``i``, resumed from the state after a long text it starts with, and
        the escaped bodies of that text and of the rest (None when it starts with none); its encoding is
        not made (:meth:`encoded` joins it if asked)."""
        if not plain(m) or len(m.content) < QUOTED_CHARS:
            return None
        text = m.content
        for before, quoted, body, state in self._long:
            if len(before) == i and text.startswith(quoted) and all(map(operator.is_, before, messages)):
                h = state.copy()
                rest = escaped(text[len(quoted) :])
                feed(h, rest)
                h.update(message_end(m.role))
                return h, body, rest
        return None

    def _encode(self, messages: Sequence[Message], i: int, m: Message, h: Any) -> bytes:
        """``canonical_json(m.model_dump())``, encoded, fed to ``h`` (and a long text remembered)."""
        if not plain(m):
            piece = message_bytes(m)
            feed(h, piece)
            return piece
        text = m.content
        body: bytes | None = None
        if len(text) >= QUOTED_CHARS:
            for _before, quoted, quoted_body, _state in self._long:
                at = text.find(quoted)
                if at >= 0:
                    body = b"".join((escaped(text[:at]), quoted_body, escaped(text[at + len(quoted) :])))
                    break
        if body is None:
            body = escaped(text)
        h.update(CONTENT_START)
        feed(h, body)
        if len(text) >= QUOTED_CHARS:  # the first long text stays, the latest joins
            self._long = [*self._long[:1], (tuple(messages[:i]), text, body, h.copy())]
        end = message_end(m.role)
        h.update(end)
        return b"".join((CONTENT_START, body, end))


#: the leaf types a :class:`FrozenObject` holds: immutable, and written by JSON as they are
_JSON_LEAVES = frozenset({str, int, float, bool, type(None)})


def _frozen(value: Any) -> Any:
    if type(value) in _JSON_LEAVES or type(value) is FrozenObject or type(value) is FrozenArray:
        return value
    if isinstance(value, dict):
        return FrozenObject(value)
    if isinstance(value, (list, tuple)):
        return FrozenArray(value)
    raise TypeError(f"a frozen JSON value holds no {type(value).__name__}")


class _Frozen:
    """What a read-only container does: refuse every change, copy as itself, pickle as its plain kind."""

    __slots__ = ()
    #: the plain container it is one of (pickled as one, and frozen again when loaded)
    _plain: type[Any]

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"a {type(self).__name__} is read-only")

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._plain(self),))


class FrozenArray(_Frozen, list[Any]):
    """A read-only JSON array: a ``list`` (JSON writes it as one; ``isinstance(x, list)`` holds) of frozen
    values (see :class:`FrozenObject`) that no list method can change."""

    __slots__ = ()
    _plain = list

    def __init__(self, items: Any = ()) -> None:
        list.__init__(self, map(_frozen, items))

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _Frozen._read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _Frozen._read_only


class FrozenObject(_Frozen, dict[str, Any]):
    """A read-only JSON object: a ``dict`` whose values are JSON leaves (str, int, float, bool, None, their
    exact types) or frozen objects and arrays, copied and frozen on construction (anything else raises
    TypeError), that no dict method can change. Since it cannot change, what is computed from it can be
    kept with it: :attr:`canonical` is made once (an LLM request's response schema, in every cache key)."""

    __slots__ = ("_canonical",)
    _plain = dict

    def __init__(self, items: Any = ()) -> None:
        pairs = dict(items).items()
        if not all(type(k) is str for k, _ in pairs):
            raise TypeError("a frozen JSON object's keys are strings")
        dict.__init__(self, ((k, _frozen(v)) for k, v in pairs))
        self._canonical: str | None = None

    __setitem__ = __delitem__ = __ior__ = _Frozen._read_only
    pop = popitem = setdefault = update = clear = _Frozen._read_only

    @property
    def canonical(self) -> str:
        """``canonical_json`` of the object as pydantic writes a ``dict[str, Any]`` field of it in JSON mode
        (what a model's ``model_dump(mode="json")`` holds), made on first use and kept."""
        text = self._canonical
        if text is None:
            text = self._canonical = canonical_json(_JSON_OBJECT.dump_python(self, mode="json"))
        return text


_JSON_OBJECT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def frozen_object(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """``value`` as a :class:`FrozenObject` (itself when it is one), or ``value`` unchanged when it holds
    something else than JSON leaves, objects and arrays (or is None)."""
    if value is None or type(value) is FrozenObject:
        return value
    try:
        return FrozenObject(value)
    except (TypeError, RecursionError):  # another type, or a cycle: kept as it is
        return value
