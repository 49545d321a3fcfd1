"""A content-addressed response cache in SQLite, shared by processes and coroutines.

Entries are keyed on :meth:`LLMRequest.key` (the backend name plus the full request, sample index
included, tags excluded), so a repeated draw is a deliberate choice of a new ``sample_index``. The
database runs in WAL mode with a busy timeout, so parallel sweep processes read and write one file;
each process writes through one connection and reads through another (so a read never waits for a
write, this process's or another's). The asyncio API reads inline (a keyed read is fast) and hands its
writes to a thread of its own, which writes the puts waiting at once in one transaction (group commit)
and settles each put when that transaction is committed. The first writer of a key wins; later writers
of the same key are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import queue
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .. import redact as redaction
from ..canonical import QUOTED_CHARS, escaped
from ..errors import ConfigError
from ..redact import redact
from ..settings import cache_dir as default_cache_dir
from .base import LLMRequest

CacheMode = Literal["off", "read-write", "read-only"]
CACHE_MODES: tuple[str, ...] = ("off", "read-write", "read-only")
CACHE_FILE = "llm-cache.sqlite"
#: seconds the cache's writing thread waits for the next put before it stops
WRITER_IDLE_S = 1.0
#: the most puts the writing thread writes in one transaction
BATCH_MAX = 256
#: seconds the writing thread waits for more puts, after a first, when the last transaction held several
GROUP_WAIT_S = 0.002

#: a stored request's piece at least this long (in UTF-8) is stored once, in the texts table, and referred to
CUT_BYTES = 512
#: problems whose long texts a cache remembers (the least recently written are forgotten), and texts a problem
#: (a text is kept as its message's string and its escaped UTF-8: about 60 KB for a TravelPlanner prompt)
PROBLEMS_KEPT = 64
TEXTS_KEPT = 4

_INSERT = (
    "INSERT OR IGNORE INTO responses (key, backend, model, text, finish_reason, input_tokens, output_tokens, "
    "request, created, tool_calls, request_texts, payer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_TEXT = "INSERT OR IGNORE INTO texts (id, text) VALUES (?, ?)"
_SELECT = (
    "SELECT key, backend, model, text, finish_reason, input_tokens, output_tokens, created, tool_calls, payer "
    "FROM responses WHERE key = ?"
)
#: the texts stored once for the requests that hold them (a problem's prompt, the members of a run's requests)
_TEXTS = """
CREATE TABLE IF NOT EXISTS texts (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL
)
"""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    finish_reason TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    request TEXT NOT NULL,
    created REAL NOT NULL,
    tool_calls TEXT,
    request_texts TEXT,
    payer TEXT
)
"""


@dataclass(frozen=True)
class CachedResponse:
    key: str
    backend: str
    model: str
    text: str
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    created: float
    #: the tool calls of the reply, as a JSON list (None: a plain reply)
    tool_calls: str | None = None
    #: who paid for the reply (the client's :attr:`~modulo.llm.client.LLMClient.payer`: its run, then its
    #: process); None: not said (a put without it, or a cache written before payers were stored)
    payer: str | None = None


class ResponseCache:
    """The SQLite file at ``path`` (default ``modulo.settings.cache_dir()/llm-cache.sqlite``)."""

    def __init__(self, path: Path | str | None = None, *, readonly: bool = False, timeout_s: float = 30.0) -> None:
        self.path = Path(path) if path is not None else default_cache_dir() / CACHE_FILE
        self.readonly = readonly
        #: the writing connection's lock (held by a write, or a transaction of writes)
        self._lock = threading.Lock()
        #: the reading connection's lock (reads never wait for a write)
        self._read_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        #: the thread that writes the puts (started by a put when none runs), and the puts handed to it
        self._writer: threading.Thread | None = None
        self._writes: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._starting = threading.Lock()
        #: the long texts of the requests written (by problem), and the pieces of the requests' members
        self._long: OrderedDict[str, list[_Text]] = OrderedDict()
        self._members: dict[bytes, _Text] = {}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if readonly and not self.path.exists():
                # an empty cache: every lookup misses, nothing is created on disk
                self._conn: sqlite3.Connection | None = None
                return
            self._conn = None
            # the last connection of another process closing (its WAL checkpointed and removed) answers a
            # connection opening meanwhile "database is locked" at once, whatever the busy timeout (SQLite's
            # WAL notes): such an open is tried again, with growing pauses, for up to timeout_s
            deadline, pause = time.monotonic() + timeout_s, 0.005
            while True:
                try:
                    self._open(readonly, timeout_s)
                    break
                except sqlite3.OperationalError as exc:
                    self._close_connections()
                    if not _busy(exc) or time.monotonic() + pause > deadline:
                        raise
                    time.sleep(pause)
                    pause = min(2 * pause, 0.25)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the LLM response cache at {str(self.path)!r}: {exc}") from None

    def _open(self, readonly: bool, timeout_s: float) -> None:
        """Connect (and, to write, set the file up: WAL, the tables, the columns later versions added)."""
        conn = self._conn = sqlite3.connect(self.path, timeout=timeout_s, check_same_thread=False, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        if readonly:
            return
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_SCHEMA)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
        # tool_calls: a cache written before tool calling existed; request_texts: before requests were stored
        # in pieces; payer: before payers were (another process opening the same old file may add a column
        # first: it is there then)
        for column in ("tool_calls", "request_texts", "payer"):
            if column not in columns:
                try:
                    conn.execute(f"ALTER TABLE responses ADD COLUMN {column} TEXT")
                except sqlite3.OperationalError as exc:
                    if "duplicate column" not in str(exc):
                        raise
        conn.execute(_TEXTS)
        # reads go through a connection of their own: in WAL mode a reader never waits for a writer, but a
        # read through the writing connection would wait for its lock (held while a write waits for another
        # process's)
        self._reader = sqlite3.connect(self.path, timeout=timeout_s, check_same_thread=False, isolation_level=None)
        self._reader.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")

    def _close_connections(self) -> None:
        """Close the connections (those an open that failed made, or the cache's at its close): a connection
        that fails to close does not keep the other open."""
        for conn in (self._reader, self._conn):
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
        self._conn = self._reader = None

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r}, readonly={self.readonly})"

    # -- blocking API -------------------------------------------------------------------------------
    def _reading(self) -> tuple[sqlite3.Connection | None, threading.Lock]:
        """The connection reads go through, and its lock."""
        if self._reader is not None:
            return self._reader, self._read_lock
        return self._conn, self._lock

    def get_sync(self, key: str) -> CachedResponse | None:
        conn, lock = self._reading()
        if conn is None:
            return None
        with lock:
            try:
                row = conn.execute(_SELECT, (key,)).fetchone()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return None
                if "no such column" not in str(exc):
                    raise
                # an old cache opened read-only: the columns it has of those added since (tool calls, payer)
                present = {r[1] for r in conn.execute("PRAGMA table_info(responses)")}
                extra = [c for c in ("tool_calls", "payer") if c in present]
                fields = "key, backend, model, text, finish_reason, input_tokens, output_tokens, created"
                found = conn.execute(
                    f"SELECT {', '.join([fields, *extra])} FROM responses WHERE key = ?", (key,)
                ).fetchone()
                return None if found is None else CachedResponse(*found[:8], **dict(zip(extra, found[8:], strict=True)))
        if row is None:
            return None
        return CachedResponse(*row)

    def put_sync(self, key: str, **fields: Any) -> None:
        """Store a reply (the first writer of a key wins); the fields are :meth:`_row`'s."""
        (outcome,) = self._put_many([(key, fields)])
        if outcome is not None:
            raise outcome

    def _row(
        self,
        key: str,
        *,
        backend: str,
        request: LLMRequest,
        text: str,
        model: str,
        finish_reason: str | None,
        input_tokens: int,
        output_tokens: int,
        tool_calls: str | None = None,
        messages_json: bytes | Sequence[bytes] | None = None,
        payer: str | None = None,
    ) -> tuple[tuple[Any, ...], list[_Text]]:
        """The row a put inserts, and the texts it refers to. ``messages_json``: the request's messages as
        :meth:`LLMRequest.stored_json` would write them, when the caller has them at hand (whole, or in pieces
        to join: a put hands them over unjoined, and the writing thread joins them here)."""
        payload, refs, texts = self._pieces(request, messages_json)
        text = redact(text)  # the client scrubbed it already; the cache is a writer all the same
        row = (key, backend, model, text, finish_reason, input_tokens, output_tokens, payload, time.time(), tool_calls)
        return (*row, refs, payer), texts

    def _pieces(
        self, request: LLMRequest, messages_json: bytes | Sequence[bytes] | None
    ) -> tuple[str, str | None, list[_Text]]:
        """The request as stored (redacted): the text of :meth:`LLMRequest.stored_json` with its long pieces cut
        out, where each was (``[[offset, text id], ...]`` in JSON, None when nothing was cut), and those texts.
        The pieces cut: the members before and after the messages (the same for a run's requests: the
        schema), and a long message's text, or the long text it starts with (a backprompt quoting the
        problem's prompt), which each problem's earlier requests held."""
        parts = request.stored_parts(messages_json)
        if parts is None:
            return redact(request.stored_json()), None, []
        head, body, tail = parts
        pieces: list[bytes | _Text] = [self._member(head)]
        at = 0
        long = self._texts_of(request.tags.get("problem_id", ""))
        for m in request.messages:
            content = m.content
            if len(content) < QUOTED_CHARS:
                continue
            known = None
            for t in long:  # the longest it starts with
                raw = t.raw
                if raw is not None and (known is None or len(t.body) > len(known.body)) and content.startswith(raw):
                    known = t
            if known is None:
                known = _Text(escaped(content), content)
                long.insert(0, known)
                del long[TEXTS_KEPT:]
            found = _find(body, known.body, at)
            if found < 0:  # (not where its message is: left in place)
                continue
            pieces += (body[at:found], known)
            at = found + len(known.body)
        pieces += (body[at:] if at else body, self._member(tail))
        return _joined(pieces)

    def _texts_of(self, problem: str) -> list[_Text]:
        """The long texts of a problem's requests written last (most recent first)."""
        long = self._long.get(problem)
        if long is None:
            long = self._long[problem] = []
            if len(self._long) > PROBLEMS_KEPT:
                self._long.popitem(last=False)
        else:
            self._long.move_to_end(problem)
        return long

    def _member(self, piece: bytes) -> bytes | _Text:
        """A request's members before or after its messages: a text of their own when long (one object for a
        run's requests alike: found by identity)."""
        if len(piece) < CUT_BYTES:
            return piece
        text = self._members.get(piece)
        if text is None:
            if len(self._members) >= PROBLEMS_KEPT:
                self._members.clear()
            text = self._members[piece] = _Text(piece)
        return text

    def _put_many(self, puts: list[tuple[str, dict[str, Any]]]) -> list[BaseException | None]:
        """Store the puts ``(key, fields)`` in one transaction (one alone: in one statement); each one's
        outcome: None when stored (or ignored: its key was stored before), else what failed it. A put whose
        row cannot be made or bound fails alone; a failed transaction fails every put in it."""
        if self.readonly or self._conn is None:
            return [ConfigError("the LLM response cache was opened read-only")] * len(puts)
        outcomes: list[BaseException | None] = [None] * len(puts)
        rows: list[tuple[int, tuple[Any, ...], list[_Text]]] = []
        for i, (key, fields) in enumerate(puts):
            try:
                rows.append((i, *self._row(key, **fields)))
            except Exception as exc:  # the awaiting call raises it (the client logs it and goes on)
                outcomes[i] = exc
        if not rows:
            return outcomes
        with self._lock:
            conn = self._conn
            try:
                if len(rows) > 1 or any(not t.written for _, _, texts in rows for t in texts):
                    conn.execute("BEGIN IMMEDIATE")  # a request's texts are stored with it
                for i, row, texts in rows:
                    try:
                        for t in texts:
                            if not t.written:
                                stored = t.stored  # (its id with it)
                                conn.execute(_INSERT_TEXT, (t.id, stored))
                        conn.execute(_INSERT, row)
                    except (ValueError, TypeError, OverflowError, sqlite3.InterfaceError) as exc:
                        outcomes[i] = exc  # a value SQLite cannot take (a lone surrogate): never written
                if conn.in_transaction:
                    conn.execute("COMMIT")
                for i, _, texts in rows:
                    if outcomes[i] is None:
                        for t in texts:
                            t.committed()  # (only once committed: a text rolled back is written again)
            except Exception as exc:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                for i, _, _ in rows:
                    if outcomes[i] is None:
                        outcomes[i] = exc
        return outcomes

    def requests(self) -> Iterator[tuple[str, str]]:
        """Every stored request: (its key, its text as :meth:`LLMRequest.stored_json` wrote it, redacted),
        whichever form its row holds (whole, or in pieces: :meth:`_pieces`)."""
        conn, lock = self._reading()
        if conn is None:
            return
        with lock:
            columns = {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
            if not columns:  # no table yet: nothing stored
                return
            pieces = "request_texts" if "request_texts" in columns else "NULL"
            cursor = conn.execute(f"SELECT key, request, {pieces} FROM responses")
        texts: dict[str, str] = {}
        while True:
            with lock:  # a few rows at a time (a lookup may come between)
                rows = cursor.fetchmany(256)
            if not rows:
                return
            yield from self._whole(rows, texts, conn, lock)

    def _whole(
        self, rows: list[Any], texts: dict[str, str], conn: sqlite3.Connection, lock: threading.Lock
    ) -> Iterator[tuple[str, str]]:
        """:meth:`requests`' rows, each request whole (its texts read once, kept in ``texts``)."""
        for key, request, refs in rows:
            if refs is not None:
                for offset, text_id in reversed(json.loads(refs)):
                    text = texts.get(text_id)
                    if text is None:
                        with lock:
                            found = conn.execute("SELECT text FROM texts WHERE id = ?", (text_id,)).fetchone()
                        if found is None:
                            raise ConfigError(f"the LLM response cache {str(self.path)!r} lacks a text ({text_id})")
                        if len(texts) >= PROBLEMS_KEPT:
                            texts.clear()
                        text = texts[text_id] = found[0]
                    request = request[:offset] + text + request[offset:]
            yield key, request

    def __len__(self) -> int:
        conn, lock = self._reading()
        if conn is None:
            return 0
        with lock:
            try:
                (count,) = conn.execute("SELECT COUNT(*) FROM responses").fetchone()
            except sqlite3.OperationalError:
                return 0
        return int(count)

    def close(self) -> None:
        with self._starting:  # the writes handed over are done before the connection closes
            writer, self._writer = self._writer, None
            if writer is not None and writer.is_alive():
                self._writes.put(None)  # under the lock: a writer about to stop for want of work sees it
            else:
                writer = None
        if writer is not None:
            writer.join()
        with self._lock, self._read_lock:
            self._close_connections()

    def set_payer_sync(self, key: str, payer: str | None) -> None:
        """Store ``payer`` as who paid for the reply ``key`` (committed when this returns)."""
        if self.readonly or self._conn is None:
            raise ConfigError("the LLM response cache was opened read-only")
        with self._lock:  # (autocommit: the update is committed as it runs)
            self._conn.execute("UPDATE responses SET payer = ? WHERE key = ?", (payer, key))

    # -- asyncio API --------------------------------------------------------------------------------
    async def set_payer(self, key: str, payer: str | None) -> None:
        """:meth:`set_payer_sync` in a worker thread (a commit waits for the disk)."""
        await asyncio.to_thread(self.set_payer_sync, key, payer)

    async def get(self, key: str) -> CachedResponse | None:
        # a primary-key read takes tens of microseconds, through a connection no write holds (WAL readers
        # never wait for writers), so it runs inline: a hop to a worker thread would cost more than the read
        return self.get_sync(key)

    async def put(self, key: str, **fields: Any) -> None:
        """:meth:`put_sync` (the same arguments) in the cache's writing thread (a commit waits for the disk),
        awaited: the reply is stored (committed) when this returns. One thread writes the puts in turn, those
        waiting together in one transaction, and hands the results back to each event loop at once."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._writes.put((loop, done, key, fields))
        with self._starting:  # a writer runs while puts wait (it stops after WRITER_IDLE_S without one)
            if self._writer is None or not self._writer.is_alive():
                # not a daemon: a write handed over is done before the process exits (as a worker thread of
                # asyncio.to_thread's was), and the thread stops WRITER_IDLE_S after the last
                self._writer = threading.Thread(target=self._write_in_turn, name="modulo-llm-cache")
                self._writer.start()
        await done

    def _write_in_turn(self) -> None:
        """The writing thread: the puts handed over, in order, each time all those waiting in one transaction
        (at most :data:`BATCH_MAX`), until :meth:`close` hands over None or none comes for
        :data:`WRITER_IDLE_S` (the next put starts another). While puts come together (the last transaction
        held several) it waits :data:`GROUP_WAIT_S` after the first put of a transaction for more: fewer
        transactions and fewer wake-ups of the event loops, for a put's wait a moment longer."""
        together = 1
        while True:
            try:
                item = self._writes.get(timeout=WRITER_IDLE_S)
            except queue.Empty:
                with self._starting:
                    if self._writes.empty():
                        self._writer = None
                        return
                continue
            if item is None:
                return
            if together > 1:  # puts come together: wait a moment for more (each waits at most that long)
                time.sleep(GROUP_WAIT_S)
            batch = [item]
            closing = False
            while len(batch) < BATCH_MAX:
                try:
                    item = self._writes.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    closing = True
                    break
                batch.append(item)
            try:
                outcomes = self._put_many([(key, fields) for _, _, key, fields in batch])
            except BaseException as exc:  # every put of the batch raises it
                outcomes = [exc] * len(batch)
            # each event loop woken once for the puts of its own this transaction stored
            settled: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[None], BaseException | None]]] = {}
            for (loop, done, _, _), outcome in zip(batch, outcomes, strict=True):
                settled.setdefault(loop, []).append((done, outcome))
            for loop, futures in settled.items():
                try:
                    loop.call_soon_threadsafe(_settle, futures)
                except RuntimeError:  # that event loop is closed: nobody waits for these writes any more
                    pass
            together = len(batch)
            if closing:
                return


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused for another connection's lock ("database is locked", "... busy")."""
    text = str(exc)
    return "locked" in text or "busy" in text


def _settle(futures: list[tuple[asyncio.Future[None], BaseException | None]]) -> None:
    """Finish puts' futures on their event loop (but those whose callers were cancelled meanwhile)."""
    for done, outcome in futures:
        if done.cancelled():
            continue
        if outcome is None:
            done.set_result(None)
        else:
            done.set_exception(outcome)


class _Text:
    """A piece of stored requests kept once in the texts table: its escaped UTF-8 ``body`` (as the request's
    JSON holds it), the text it escapes (``raw``, a message's; None for members), and, redacted against the
    secrets known when it was made, what is stored and its id (the SHA-256 of that), and whether a commit
    wrote it."""

    __slots__ = ("_generation", "_stored", "body", "id", "raw", "written")

    def __init__(self, body: bytes, raw: str | None = None) -> None:
        self.body, self.raw = body, raw
        self._generation = -1
        self._stored: str | None = None
        self.id = ""
        self.written = False

    @property
    def stored(self) -> str:
        generation = redaction.generation()
        stored = self._stored
        if generation != self._generation:  # new, or a secret was registered since it was redacted
            stored = redact(self.body.decode())
            self.id = hashlib.sha256(stored.encode()).hexdigest()
            self._generation, self.written = generation, False
        elif stored is None:  # written and let go: made again (the same text, the same id)
            stored = redact(self.body.decode())
        self._stored = stored
        return stored

    def current_id(self) -> str:
        """Its id, redacted against the secrets known now (again if one came since it was)."""
        if redaction.generation() != self._generation:
            self.stored  # noqa: B018 - made again, and its id
        return self.id

    def committed(self) -> None:
        """Written in the texts table: its id is what the requests after need, not the text."""
        self.written, self._stored = True, None


def _find(haystack: bytes, needle: bytes, start: int) -> int:
    """``haystack.find(needle, start)`` for a long needle, found by its first bytes and compared there (a long
    needle is prepared for each search: 26 us for a 17 KB prompt, against about 1 here)."""
    probe = needle[:64]
    at = haystack.find(probe, start)
    while at >= 0 and not haystack.startswith(needle, at):
        at = haystack.find(probe, at + 1)
    return at


def _joined(pieces: list[bytes | _Text]) -> tuple[str, str | None, list[_Text]]:
    """The stored form of a request in ``pieces`` (literal UTF-8, and texts stored apart): the literal parts
    joined and redacted, the texts' offsets in them, the texts. The request whole, redacted, with no texts,
    where a secret might lie across a cut (in the request, or in the literal parts joined)."""
    texts = [p for p in pieces if type(p) is _Text]
    width = redaction.reach()
    if width:
        literal = [p.decode() for p in pieces if type(p) is bytes]
        if not _clean_cuts(list(map(_unredacted, pieces)), width) or not _clean_cuts(literal, width):
            texts = []
    if not texts:
        return redact("".join(map(_unredacted, pieces))), None, []
    out: list[str] = []
    refs: list[str] = []
    offset = 0
    for p in pieces:
        if type(p) is bytes:
            part = redact(p.decode()) if width else p.decode()
            out.append(part)
            offset += len(part)
        else:
            assert isinstance(p, _Text)
            refs.append(f'[{offset},"{p.current_id()}"]')  # (JSON: the id is hexadecimal)
    return "".join(out), "[" + ",".join(refs) + "]", texts


def _unredacted(piece: bytes | _Text) -> str:
    return piece.body.decode() if isinstance(piece, _Text) else piece.decode()


def _clean_cuts(parts: list[str], width: int) -> bool:
    """Whether no secret lies across a cut between ``parts``: the ``width`` characters each side of every cut
    are left as they are by :func:`redact`."""
    for k in range(1, len(parts)):
        before = "".join(parts[:k])[-width:]
        after = "".join(parts[k:])[:width]
        window = before + after
        if redact(window) != window:
            return False
    return True
