"""A content-addressed response cache in SQLite, shared by processes and coroutines.

Entries are keyed on :meth:`LLMRequest.key` (the backend name plus the full request, sample index
included, tags excluded), so a repeated draw is a deliberate choice of a new ``sample_index``. The
database runs in WAL mode with a busy timeout, so parallel sweep processes read and write one file;
each process uses one connection guarded by a lock. The asyncio API reads inline (a keyed read
is fast and never waits for a writer in WAL mode) and writes in a thread of its own, in turn. The
first writer of a key wins; later writers of the same key are ignored.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError
from ..redact import redact
from ..settings import cache_dir as default_cache_dir
from .base import LLMRequest

CacheMode = Literal["off", "read-write", "read-only"]
CACHE_MODES: tuple[str, ...] = ("off", "read-write", "read-only")
CACHE_FILE = "llm-cache.sqlite"
#: seconds the cache's writing thread waits for the next put before it stops
WRITER_IDLE_S = 1.0

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
    tool_calls TEXT
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


class ResponseCache:
    """The SQLite file at ``path`` (default ``modulo.settings.cache_dir()/llm-cache.sqlite``)."""

    def __init__(self, path: Path | str | None = None, *, readonly: bool = False, timeout_s: float = 30.0) -> None:
        self.path = Path(path) if path is not None else default_cache_dir() / CACHE_FILE
        self.readonly = readonly
        self._lock = threading.Lock()
        #: the thread that writes the puts (started by a put when none runs), and the puts handed to it
        self._writer: threading.Thread | None = None
        self._writes: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._starting = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if readonly and not self.path.exists():
                # an empty cache: every lookup misses, nothing is created on disk
                self._conn: sqlite3.Connection | None = None
                return
            self._conn = sqlite3.connect(self.path, timeout=timeout_s, check_same_thread=False, isolation_level=None)
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
            if not readonly:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute(_SCHEMA)
                columns = {row[1] for row in self._conn.execute("PRAGMA table_info(responses)")}
                if "tool_calls" not in columns:  # a cache written before tool calling existed
                    self._conn.execute("ALTER TABLE responses ADD COLUMN tool_calls TEXT")
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the LLM response cache at {str(self.path)!r}: {exc}") from None

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r}, readonly={self.readonly})"

    # -- blocking API -------------------------------------------------------------------------------
    def get_sync(self, key: str) -> CachedResponse | None:
        if self._conn is None:
            return None
        with self._lock:
            try:
                row = self._conn.execute(
                    "SELECT key, backend, model, text, finish_reason, input_tokens, output_tokens, created, "
                    "tool_calls FROM responses WHERE key = ?",
                    (key,),
                ).fetchone()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return None
                if "no such column" in str(exc):  # an old cache opened read-only: it holds no tool calls
                    row = self._conn.execute(
                        "SELECT key, backend, model, text, finish_reason, input_tokens, output_tokens, created "
                        "FROM responses WHERE key = ?",
                        (key,),
                    ).fetchone()
                else:
                    raise
        if row is None:
            return None
        return CachedResponse(*row)

    def put_sync(
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
        messages_json: bytes | None = None,
    ) -> None:
        """Store a reply (the first writer of a key wins). ``messages_json``: the request's messages as
        :meth:`LLMRequest.stored_json` would write them, when the caller has them at hand."""
        if self.readonly or self._conn is None:
            raise ConfigError("the LLM response cache was opened read-only")
        payload = redact(request.stored_json(messages_json))
        text = redact(text)  # the client scrubbed it already; the cache is a writer all the same
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO responses (key, backend, model, text, finish_reason, input_tokens, "
                "output_tokens, request, created, tool_calls) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    backend,
                    model,
                    text,
                    finish_reason,
                    input_tokens,
                    output_tokens,
                    payload,
                    time.time(),
                    tool_calls,
                ),
            )

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        with self._lock:
            try:
                (count,) = self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()
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
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- asyncio API --------------------------------------------------------------------------------
    async def get(self, key: str) -> CachedResponse | None:
        # a primary-key read takes tens of microseconds and WAL readers never wait for writers, so it
        # runs inline: a hop to a worker thread would cost ten times more than the read
        return self.get_sync(key)

    async def put(self, key: str, **fields: Any) -> None:
        """:meth:`put_sync` (the same arguments) in the cache's writing thread (a commit waits for the disk),
        awaited: the reply is stored when this returns. One thread writes every put in turn (the worker
        threads of ``asyncio.to_thread`` took turns at the connection's lock), and hands each result back
        to its event loop."""
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
        """The writing thread: each put handed over, in order, until :meth:`close` hands over None or none
        comes for :data:`WRITER_IDLE_S` (the next put starts another)."""
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
            loop, done, key, fields = item
            try:
                self.put_sync(key, **fields)
                outcome: BaseException | None = None
            except BaseException as exc:  # the awaiting call raises it (the client logs it and goes on)
                outcome = exc
            try:
                loop.call_soon_threadsafe(_settle, done, outcome)
            except RuntimeError:  # that event loop is closed: nobody waits for this write any more
                pass


def _settle(done: asyncio.Future[None], outcome: BaseException | None) -> None:
    """Finish a put's future on its event loop (unless its caller was cancelled meanwhile)."""
    if done.cancelled():
        return
    if outcome is None:
        done.set_result(None)
    else:
        done.set_exception(outcome)
