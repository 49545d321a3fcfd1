"""Pieces of :func:`~modulo.types.canonical_json`, written straight to UTF-8 bytes and hashed.

The loop hashes every prompt (``prompt_sha256``) and the LLM client every request (the cache key): both are
SHA-256 digests of canonical JSON holding the prompt's messages, often tens of kilobytes of text. The
standard encoder escapes such a text character by character (slowly when it holds one non-ASCII
character), and the digest is then taken of its UTF-8 encoding. Here the text is encoded to UTF-8 once and
escaped there: the characters JSON escapes are single bytes in UTF-8, found by fast byte scans. The bytes
are exactly ``canonical_json(...).encode()``'s.
"""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

from .types import Message, canonical_json

#: Message's fields are exactly these two: its canonical JSON is then ``{"content":...,"role":...}``
TWO_FIELDS = set(Message.model_fields) == {"role", "content"}
#: the control characters JSON writes as ``\u00XX`` (the other three have short escapes, made below)
_OTHER_CONTROLS = bytes(c for c in range(32) if c not in b"\n\r\t")
#: the start of a message's canonical JSON, up to its content
CONTENT_START = b'{"content":"'


def escaped(text: str) -> bytes:
    """``encode_basestring(text)[1:-1].encode()``: the body of ``text`` as a JSON string (what
    :func:`~modulo.types.canonical_json` writes: non-ASCII as is), in UTF-8. A text holding a rare control
    character is escaped by ``encode_basestring``."""
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
