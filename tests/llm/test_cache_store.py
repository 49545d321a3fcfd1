"""How the response cache stores requests and writes puts: a long text once for the requests that hold it,
old files read and written, secrets redacted across the pieces, puts written together and failing alone."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import modulo.redact as redact_module
from modulo.canonical import PromptHasher, frozen_object
from modulo.llm.base import LLMRequest
from modulo.llm.cache import ResponseCache
from modulo.types import Message

from .support import request

FIELDS = {"backend": "b", "model": "m", "finish_reason": "stop", "input_tokens": 1, "output_tokens": 2}
SCHEMA = frozen_object({"type": "array", "items": {"type": "object", "description": "a day " * 200}})


def prompt(problem: int) -> str:
    quoted = 'the data, quoted "as is" ' * 150
    return f"You are a planner.\n\tProblem {problem}: «{quoted}»\nAnswer:\n"


def backprompts(problem: int, n: int) -> list[LLMRequest]:
    """A problem's requests as the loop sends them: its prompt, then the prompt with feedback after it (and a
    conversation: a system message, the prompt, a reply, feedback)."""
    first = prompt(problem)
    tags = {"problem_id": f"p{problem}"}
    out = [LLMRequest(messages=(Message(role="user", content=first),), response_schema=SCHEMA, tags=tags)]
    for i in range(1, n):
        feedback = f"\n\nYour previous answer was:\nplan {i}\nThe plan has {i} problems ✗.\n"
        out.append(
            LLMRequest(messages=(Message(role="user", content=first + feedback),), response_schema=SCHEMA, tags=tags)
        )
    system = Message(role="system", content="Be exact. " * 300)
    out.append(
        LLMRequest(
            messages=(system, Message(role="user", content=first), Message(role="assistant", content="x" * 3000)),
            tags=tags,
            seed=problem,
        )
    )
    return out


def put_all(cache: ResponseCache, requests: list[LLMRequest], *, hashed: bool = False) -> None:
    async def puts() -> None:
        hashers: dict[str, PromptHasher] = {}
        for req in requests:
            messages_json = None
            if hashed:  # as the client hands them over: the pieces its key was hashed from, joined by the writer
                hasher = hashers.setdefault(req.tags.get("problem_id", ""), PromptHasher())
                hasher.state(req.messages)
                messages_json = hasher.encoded_parts(req.messages)
            await cache.put(
                req.key("b"), request=req, text=f"reply to {req.key('b')[:8]}", messages_json=messages_json, **FIELDS
            )

    asyncio.run(puts())


def test_a_long_text_is_stored_once_and_every_request_reads_back_whole(tmp_path: Path) -> None:
    requests = [r for problem in range(3) for r in backprompts(problem, 6)]
    requests += [request("short"), request("y" * 5000), request("y" * 5000 + " and feedback")]  # no problem id
    cache = ResponseCache(tmp_path / "c.sqlite")
    put_all(cache, requests, hashed=True)
    stored = dict(cache.requests())
    assert stored == {r.key("b"): r.stored_json() for r in requests}
    for r in requests:  # the replies are served as before
        hit = cache.get_sync(r.key("b"))
        assert hit is not None and hit.text == f"reply to {r.key('b')[:8]}"
    cache.close()
    conn = sqlite3.connect(tmp_path / "c.sqlite")
    (texts,) = conn.execute("SELECT COUNT(*) FROM texts").fetchone()
    (request_chars,) = conn.execute("SELECT SUM(LENGTH(request)) FROM responses").fetchone()
    whole = sum(len(r.stored_json()) for r in requests)
    # each problem's prompt once, the system message, the reply quoted, the schema's members, the long text
    assert texts <= 3 * 3 + 2 + 2, texts
    assert request_chars < whole / 10, (request_chars, whole)
    assert conn.execute("SELECT COUNT(*) FROM responses WHERE request_texts IS NULL").fetchone()[0] == 1  # short
    conn.close()


@pytest.mark.parametrize("tool_calls", [True, False])
def test_an_old_cache_file_is_read_and_written(tmp_path: Path, tool_calls: bool) -> None:
    """A file of today's schema before requests were stored in pieces, and one from before tool calls."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL, text TEXT NOT NULL, "
        "finish_reason TEXT, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, request TEXT NOT NULL, "
        "created REAL NOT NULL" + (", tool_calls TEXT" if tool_calls else "") + ")"
    )
    old = backprompts(7, 2)[1]
    conn.execute(
        "INSERT INTO responses (key, backend, model, text, finish_reason, input_tokens, output_tokens, request, "
        "created) VALUES (?, 'b', 'm', 'old reply', 'stop', 1, 2, ?, 0)",
        (old.key("b"), old.stored_json()),
    )
    conn.commit()
    conn.close()
    read_only = ResponseCache(path, readonly=True)
    assert dict(read_only.requests()) == {old.key("b"): old.stored_json()}
    hit = read_only.get_sync(old.key("b"))
    assert hit is not None and hit.text == "old reply" and hit.tool_calls is None and hit.payer is None
    read_only.close()

    cache = ResponseCache(path)
    new = backprompts(7, 3)
    put_all(cache, new)
    assert dict(cache.requests()) == {r.key("b"): r.stored_json() for r in [old, *new]}
    hit = cache.get_sync(old.key("b"))
    assert hit is not None and hit.text == "old reply"  # the first writer's, kept
    assert hit.payer is None  # stored before payers were: saved, whoever reads it
    cache.close()
    with sqlite3.connect(path) as columns:
        assert "payer" in {row[1] for row in columns.execute("PRAGMA table_info(responses)")}
    # an older writer (its own columns named) still writes into the file; its rows are read whole
    conn = sqlite3.connect(path)
    other = request("written by an older version " * 200)
    conn.execute(
        "INSERT INTO responses (key, backend, model, text, finish_reason, input_tokens, output_tokens, request, "
        "created) VALUES ('older', 'b', 'm', 'r', 'stop', 1, 2, ?, 0)",
        (other.stored_json(),),
    )
    conn.commit()
    conn.close()
    assert dict(ResponseCache(path, readonly=True).requests())["older"] == other.stored_json()


def test_secrets_are_redacted_in_every_piece_and_across_the_cuts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, fresh in (("_known", set()), ("_forms", []), ("_b64", [])):
        monkeypatch.setattr(redact_module, name, fresh)
    secret = "sk-livesecret0123456789abcdef"
    redact_module.register(secret)
    base = prompt(1)
    tags = {"problem_id": "p1"}

    def req(text: str) -> LLMRequest:
        return LLMRequest(messages=(Message(role="user", content=text),), tags=tags)

    requests = [
        req(base),  # the prompt alone: stored as a text
        req(base + "\nfeedback quoting " + secret + " in the new part"),
        req(base + secret[:9]),  # a new prompt ending where a secret starts...
        req(base + secret[:9] + secret[9:] + " across the cut"),  # ...which the next completes across the cut
        req(secret + base),  # in a long text stored once
    ]
    cache = ResponseCache(tmp_path / "c.sqlite")
    put_all(cache, requests)
    stored = dict(cache.requests())
    assert stored == {r.key("b"): redact_module.redact(r.stored_json()) for r in requests}
    assert all(secret not in text and secret[9:] not in text for text in stored.values())
    # a secret learnt after a text was stored: the text is stored again, redacted, for the requests after
    later = "another-secret-0123456789"
    assert later not in base
    with_later = req(base.replace("Answer:", later) + " feedback")
    first = req(base.replace("Answer:", later))
    put_all(cache, [first])
    redact_module.register(later)
    put_all(cache, [with_later])
    stored = dict(cache.requests())
    assert later not in stored[with_later.key("b")] and secret not in stored[with_later.key("b")]
    cache.close()
    data = (tmp_path / "c.sqlite").read_bytes() + (
        (tmp_path / "c.sqlite-wal").read_bytes() if (tmp_path / "c.sqlite-wal").exists() else b""
    )
    assert secret.encode() not in data and secret[9:].encode() not in data


def test_puts_waiting_together_are_written_in_one_transaction_and_a_bad_one_fails_alone(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    commits: list[int] = []
    original = cache._put_many

    def counted(puts: list[tuple[str, dict[str, object]]]) -> list[BaseException | None]:
        commits.append(len(puts))
        return original(puts)

    cache._put_many = counted  # type: ignore[method-assign]

    async def many() -> list[BaseException | None]:
        async def one(i: int) -> None:
            text = "bad \ud800 reply" if i == 5 else f"reply {i}"  # a lone surrogate SQLite cannot store
            await cache.put(f"k{i}", request=request(f"q{i}"), text=text, **FIELDS)

        return list(await asyncio.gather(*(one(i) for i in range(40)), return_exceptions=True))

    outcomes = asyncio.run(many())
    assert [i for i, o in enumerate(outcomes) if o is not None] == [5] and isinstance(outcomes[5], UnicodeError)
    assert len(cache) == 39 and sum(commits) == 40 and max(commits) > 1  # the puts waiting were written together
    hit = cache.get_sync("k6")
    assert hit is not None and hit.text == "reply 6"
    cache.close()


def test_a_read_never_waits_for_a_write(tmp_path: Path) -> None:
    """While another process holds the file's write lock (and this one's writer waits for it), reads answer."""
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    cache.put_sync("k", request=request("q"), text="stored", **FIELDS)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the write lock, held
    writing = threading.Thread(
        target=cache.put_sync, args=("k2",), kwargs={"request": request("q2"), "text": "t", **FIELDS}
    )
    writing.start()
    time.sleep(0.2)  # the writer waits for the lock, holding its connection
    started = time.monotonic()
    hit = cache.get_sync("k")
    assert hit is not None and hit.text == "stored" and time.monotonic() - started < 0.5
    other.execute("COMMIT")
    writing.join(timeout=30)
    assert cache.get_sync("k2") is not None
    cache.close()
    other.close()


def test_the_requests_are_read_back_a_few_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import modulo.llm.cache as cache_module

    monkeypatch.setattr(cache_module, "PROBLEMS_KEPT", 2)  # problems (and texts read back) remembered
    requests = [r for problem in range(5) for r in backprompts(problem, 3)]
    requests += [request(f"q{i}") for i in range(300)]
    cache = ResponseCache(tmp_path / "c.sqlite")
    put_all(cache, requests)
    assert dict(cache.requests()) == {r.key("b"): r.stored_json() for r in requests}
    cache.close()
