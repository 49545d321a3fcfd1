"""Opening the response cache while another process's last connection closes: SQLite answers "database is
locked" at once then (its busy timeout does not apply), so the open is tried again; any other failure, or a
lock that outlasts the timeout, is a ConfigError naming the file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from modulo.errors import ConfigError
from modulo.llm.cache import ResponseCache


def _failing_first(monkeypatch: pytest.MonkeyPatch, times: int, message: str) -> list[int]:
    """ResponseCache._open raising OperationalError(message) on its first ``times`` calls; the calls made."""
    real = ResponseCache._open
    calls: list[int] = []

    def flaky(self: ResponseCache, *args: Any) -> None:
        calls.append(1)
        real(self, *args)  # connections made, then the failure: they must be closed again
        if len(calls) <= times:
            raise sqlite3.OperationalError(message)

    monkeypatch.setattr(ResponseCache, "_open", flaky)
    return calls


def test_an_open_answered_database_is_locked_is_tried_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = _failing_first(monkeypatch, 3, "database is locked")
    cache = ResponseCache(tmp_path / "c.sqlite")
    assert len(calls) == 4
    assert cache.get_sync("nothing") is None and len(cache) == 0
    cache.close()


def test_another_failure_or_a_lock_past_the_timeout_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = _failing_first(monkeypatch, 1, "disk I/O error")
    with pytest.raises(ConfigError, match=r"cannot open the LLM response cache at .*disk I/O error"):
        ResponseCache(tmp_path / "a.sqlite")
    assert len(calls) == 1  # not a lock: not tried again
    monkeypatch.undo()
    calls = _failing_first(monkeypatch, 10**6, "database is locked")
    with pytest.raises(ConfigError, match="database is locked"):
        ResponseCache(tmp_path / "b.sqlite", timeout_s=0.1)
    assert 2 <= len(calls) < 20


def test_an_old_file_whose_column_another_process_adds_meanwhile_opens(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two processes opening a file of an older version both see a column missing; the second one's ALTER
    finds it added: the file is as it must be, and the open goes on."""
    path = tmp_path / "old.sqlite"
    ResponseCache(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE responses DROP COLUMN request_texts")
    connect = sqlite3.connect

    class Racing(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> Any:  # type: ignore[override]
            if sql != "PRAGMA table_info(responses)":
                return super().execute(sql, *args)
            stale = super().execute(sql, *args).fetchall()  # the columns as they were...
            other = connect(path)
            other.execute("ALTER TABLE responses ADD COLUMN request_texts TEXT")  # ...then another process
            other.close()
            return iter(stale)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, **k, factory=Racing))
    cache = ResponseCache(path)
    cache.close()
    monkeypatch.undo()
    with sqlite3.connect(path) as conn:
        assert "request_texts" in {row[1] for row in conn.execute("PRAGMA table_info(responses)")}
