"""The SQLite response cache: hits make no request, cost nothing and record what they would have cost."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from modulo.errors import CacheMissError, ConfigError
from modulo.llm.base import LLMSettings
from modulo.llm.cache import CACHE_FILE, ResponseCache
from modulo.llm.client import build_client
from modulo.llm.pricing import PRICES

from .support import ProviderFactory, broken_backprompt, openai_settings, request, synth_config


async def test_hit_makes_no_request_and_reports_would_have_cost(provider: ProviderFactory, tmp_path: Path) -> None:
    fake = provider(["first answer", "second answer"])
    settings = openai_settings(fake)
    writer = build_client(settings, cache_mode="read-write", cache_dir=tmp_path)
    try:
        miss = await writer.call(request("Plan Rome.", problem="p1"), "generate")
        # same request, other tags: tags are not part of the key
        hit = await writer.call(request("Plan Rome.", problem="p2"), "generate")
    finally:
        await writer.aclose()
    assert fake.stats().requests == 1 and writer.backend_calls == 1
    assert not miss.cached and hit.cached
    assert hit.reply == miss.reply == "first answer"
    assert hit.model == miss.model and hit.finish_reason == miss.finish_reason
    assert hit.usage.cost_usd == 0.0 and hit.usage.cached_calls == 1 and hit.usage.calls == 1
    assert hit.usage.cached_cost_usd == pytest.approx(miss.usage.cost_usd)
    assert miss.usage.cost_usd == pytest.approx(
        PRICES["gpt-4o-mini"].cost(miss.usage.input_tokens, miss.usage.output_tokens)
    )
    assert (hit.usage.input_tokens, hit.usage.output_tokens) == (miss.usage.input_tokens, miss.usage.output_tokens)
    assert writer.usage.cost_usd == pytest.approx(miss.usage.cost_usd)
    assert writer.usage.cached_calls == 1
    assert (tmp_path / CACHE_FILE).is_file()

    # a new process-like client reading the same file answers from disk
    reader = build_client(settings, cache_mode="read-only", cache_dir=tmp_path)
    try:
        again = await reader.call(request("Plan Rome."), "generate")
    finally:
        await reader.aclose()
    assert again.cached and again.reply == "first answer" and fake.stats().requests == 1


async def test_sample_index_and_parameters_are_part_of_the_key(provider: ProviderFactory, tmp_path: Path) -> None:
    fake = provider(["a", "b", "c", "d"])
    client = build_client(openai_settings(fake), cache_mode="read-write", cache_dir=tmp_path)
    try:
        replies = [
            (await client.call(request("q"), "generate")).reply,
            (await client.call(request("q", sample_index=1), "generate")).reply,
            (await client.call(request("q", temperature=0.7), "generate")).reply,
            (await client.call(request("q"), "generate")).reply,
        ]
    finally:
        await client.aclose()
    assert replies == ["a", "b", "c", "a"]
    assert fake.stats().requests == 3


async def test_model_from_settings_is_part_of_the_key(provider: ProviderFactory, tmp_path: Path) -> None:
    fake = provider(["from mini", "from 4o"])
    mini = build_client(openai_settings(fake, model="gpt-4o-mini"), cache_mode="read-write", cache_dir=tmp_path)
    big = build_client(openai_settings(fake, model="gpt-4o"), cache_mode="read-write", cache_dir=tmp_path)
    try:
        assert (await mini.call(request("q"), "generate")).reply == "from mini"
        assert (await big.call(request("q"), "generate")).reply == "from 4o"
    finally:
        await mini.aclose()
        await big.aclose()


async def test_read_only_miss_is_a_clear_error(provider: ProviderFactory, tmp_path: Path) -> None:
    fake = provider(["never"])
    client = build_client(openai_settings(fake), cache_mode="read-only", cache_dir=tmp_path)
    try:
        with pytest.raises(CacheMissError, match=r"read-only.*problem 'p9'.*cache.mode=read-write") as info:
            await client.call(request(problem="p9"), "generate")
    finally:
        await client.aclose()
    assert fake.stats().requests == 0 and client.backend_calls == 0
    call = info.value.call  # type: ignore[attr-defined]
    assert call.reply is None and call.faults[0].kind == "cache_miss"
    assert not (tmp_path / CACHE_FILE).exists()  # read-only never creates the file


async def test_failed_calls_are_not_cached(provider: ProviderFactory, tmp_path: Path) -> None:
    fake = provider(["later"], faults=["bad_request"])
    client = build_client(openai_settings(fake), cache_mode="read-write", cache_dir=tmp_path)
    try:
        with pytest.raises(Exception):  # noqa: B017 - the 400 itself is tested elsewhere
            await client.call(request(), "generate")
        call = await client.call(request(), "generate")
    finally:
        await client.aclose()
    assert call.reply == "later" and not call.cached and fake.stats().requests == 2


async def test_concurrent_coroutines_share_the_cache(tmp_path: Path) -> None:
    settings = LLMSettings(name="scripted", args={"fn": lambda r: r.messages[0].content.upper()})
    client = build_client(settings, cache_mode="read-write", cache_dir=tmp_path)
    try:
        first = await asyncio.gather(*(client.call(request(f"q{i}"), "generate") for i in range(20)))
        second = await asyncio.gather(*(client.call(request(f"q{i}"), "generate") for i in range(20)))
    finally:
        await client.aclose()
    assert [c.reply for c in first] == [f"Q{i}" for i in range(20)] == [c.reply for c in second]
    assert all(c.cached for c in second) and client.backend_calls == 20


def _write_many(path: str, start: int, count: int) -> None:
    cache = ResponseCache(path)
    for i in range(start, start + count):
        req = request(f"q{i}")
        cache.put_sync(
            req.key("x"),
            backend="x",
            request=req,
            text=f"r{i}",
            model="m",
            finish_reason="stop",
            input_tokens=1,
            output_tokens=1,
        )
    cache.close()


def test_parallel_processes_write_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    ResponseCache(path).close()
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    workers = [
        ctx.Process(  # type: ignore[attr-defined]
            target=_write_many, args=(path, k * 40, 40)
        )
        for k in range(2)
    ]
    for w in workers:
        w.start()
    _write_many(path, 80, 40)
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    cache = ResponseCache(path, readonly=True)
    assert len(cache) == 120
    hit = cache.get_sync(request("q57").key("x"))
    assert hit is not None and hit.text == "r57"
    cache.close()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_first_writer_wins_and_unknown_mode_is_rejected(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    req = request()
    for text in ("one", "two"):
        cache.put_sync(
            "k", backend="b", request=req, text=text, model="m", finish_reason=None, input_tokens=0, output_tokens=0
        )
    hit = cache.get_sync("k")
    assert hit is not None and hit.text == "one"
    cache.close()
    with pytest.raises(ConfigError, match=r"cache mode"):
        build_client(LLMSettings(name="scripted", args={"replies": []}), cache_mode="sometimes")  # type: ignore[arg-type]


def test_the_server_url_is_part_of_the_cache_identity(tmp_path: Path) -> None:
    from modulo.llm.client import cache_identity

    fake = LLMSettings(name="openai", base_url="http://127.0.0.1:8001/v1", model="m")
    real = LLMSettings(name="openai", model="m")
    other = LLMSettings(name="openai", base_url="http://127.0.0.1:8002/v1/", model="m")
    ids = {cache_identity(s) for s in (fake, real, other)}
    assert len(ids) == 3  # a fake server's replies are never served for another endpoint
    assert cache_identity(LLMSettings(name="openai", base_url="http://h/v1/")) == cache_identity(
        LLMSettings(name="openai", base_url="http://h/v1")
    )


def test_the_key_is_the_sha_of_the_requests_canonical_json() -> None:
    """The key is written by parts (the messages straight to bytes); it is the digest of the request's whole
    canonical JSON, as it always was, so entries cached before it are found."""
    import hashlib

    from modulo.canonical import frozen_object
    from modulo.llm.base import LLMRequest, ToolDecl, ToolTurn
    from modulo.types import Message, ToolCall, canonical_json

    def whole(req: LLMRequest, backend: str) -> str:
        exclude = {"tags"} | {name for name in ("tools", "turns", "draw") if not getattr(req, name)}
        payload = {"backend": backend, **req.model_dump(mode="json", exclude=exclude)}
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()

    long = 'Plan "north" \\ é\n\t\x01 \u2028 ' * 400
    messages = (
        Message(role="system", content="sys\r"),
        Message(role="user", content=long),
        Message(role="assistant", content=""),
    )
    requests = [
        LLMRequest(messages=messages),
        LLMRequest(
            messages=messages[1:2],
            model="m",
            temperature=0.7,
            seed=3,
            max_tokens=10,
            draw=2,
            stop=("a", "\x02"),
            response_schema={"b": 1, "a": [{"z": None, "y": "é"}]},
            structured_output="schema",
            sample_index=1,
            tags={"problem_id": "p"},
        ),
        LLMRequest(  # a read-only schema: its canonical JSON made once, the same key as the dict's
            messages=messages,
            response_schema=frozen_object({"b": 1, "a": [{"z": None, "y": "é", "f": 1.0}], "t": [True, 2.5e-8]}),
            structured_output="schema",
        ),
        LLMRequest(
            messages=(),
            tools=(ToolDecl(name="t", parameters={"q": 1}),),
            turns=(ToolTurn(text="a", calls=(ToolCall(id="1", name="t", arguments={"k": "v"}),), results=("r",)),),
        ),
    ]
    for req in requests:
        for backend in ("openai", "openai@http://127.0.0.1:8000", 'odd "name"'):
            assert req.key(backend) == whole(req, backend)


def test_keys_by_the_parts_that_changed_are_the_whole_keys() -> None:
    """The client hashes each problem's requests by the parts that changed since its last one (a backprompt
    resumes after the request it starts with): every key is the request's own, problems interleaved, a
    request that changed the members before the messages included, and with few problems remembered. The
    cache stores each request as its canonical JSON (tags left out), its messages joined from the escaped
    pieces the key was hashed from: byte for byte the whole text's."""
    from modulo.canonical import messages_bytes
    from modulo.llm.base import LLMRequest
    from modulo.llm.client import RequestKeys
    from modulo.types import Message, canonical_json

    system = Message(role="system", content="You plan trips.")
    for size in (128, 1):
        keys = RequestKeys(size=size)
        for round_ in range(4):
            for p in ("p1", "p2", "p3"):
                request_text = f'Plan a trip for {p} é "north"\n' + "day " * 1500
                first = Message(role="user", content=request_text)
                if round_ == 0:
                    messages: tuple[Message, ...] = (system, first)
                else:
                    feedback = f'\n\nYour plan {round_} failed: "x"\t\x01 é\n' + "y" * 40 * round_
                    messages = (system, Message(role="user", content=request_text + feedback))
                for draw in (0, round_ % 2):
                    req = LLMRequest(messages=messages, model="m", draw=draw, tags={"problem_id": p})
                    assert keys.key(req, "openai") == req.key("openai")
                    joined = keys.messages_json(req, "openai")
                    assert joined == messages_bytes(messages)  # right after its key: at hand
                    stored = canonical_json(req.model_dump(mode="json", exclude={"tags"}))
                    assert req.stored_json(joined) == req.stored_json() == stored
                    parts = keys.messages_parts(req, "openai")  # what the client hands the cache's writer
                    assert parts is not None and req.stored_json(parts) == stored
                    key, hasher = keys.keyed(req, "openai")  # the client's one look at the request's members
                    assert key == req.key("openai") and hasher is not None
                    assert b"".join(hasher.encoded_parts(messages) or []) == messages_bytes(messages)
                    longer = req.model_copy(update={"messages": (*messages, system)})
                    assert keys.messages_json(longer, "openai") is None  # not the messages keyed last


def test_a_read_only_schema_keys_the_request_as_its_dict_does_and_every_change_changes_it() -> None:
    """A response schema handed as a FrozenObject (the loop's plan schema, one object for every request) is
    encoded for the cache key once; the key is the plain dict's, and any schema that differs, by a value's
    type too (1 and 1.0, 1 and True, which compare equal), gets another (keys' order does not count)."""
    import copy
    import pickle

    from modulo.canonical import FrozenObject, frozen_object
    from modulo.llm.base import LLMRequest
    from modulo.llm.client import RequestKeys
    from modulo.types import Message

    messages = (Message(role="user", content="Plan a trip " * 300),)

    def keys(schema: dict[str, object] | None) -> set[str]:
        req = LLMRequest(messages=messages, model="m", response_schema=schema, structured_output="schema")
        assert RequestKeys().key(req, "openai") == req.key("openai")  # by parts as whole
        return {req.key("openai"), req.model_copy(update={"seed": 1}).key("x")}

    base = {"type": "object", "properties": {"days": {"type": "array", "minItems": 1}}, "required": ["days"]}
    frozen = frozen_object(base)
    assert type(frozen) is FrozenObject and frozen == base
    assert len(keys(frozen)) == 2 and keys(frozen) == keys(base)  # the plain dict's keys, byte for byte
    assert keys(frozen_object(dict(reversed(base.items())))) == keys(frozen)
    variants = [
        {**base, "properties": {"days": {"type": "array", "minItems": 1.0}}},
        {**base, "properties": {"days": {"type": "array", "minItems": True}}},
        {**base, "required": ["days", "x"]},
        {**base, "required": "days"},
        {**base, "extra": None},
    ]
    seen = [keys(frozen)]
    for variant in variants:
        assert keys(frozen_object(variant)) == keys(variant)
        assert all(keys(variant).isdisjoint(other) for other in seen), variant
        seen.append(keys(variant))
    # a request keeps the very object (no copy), which nothing can change after its key was made
    req = LLMRequest(messages=messages, response_schema=frozen)
    assert req.response_schema is frozen and req.model_copy(update={"draw": 1}).response_schema is frozen
    nested = frozen["properties"]["days"]
    for change in (
        lambda: frozen.__setitem__("type", "array"),
        lambda: frozen.update(extra=1),
        lambda: frozen.pop("type"),
        lambda: nested.__setitem__("minItems", 1.0),
        lambda: frozen["required"].append("x"),
        lambda: frozen["required"].__iadd__(["x"]),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert frozen == base and copy.deepcopy(frozen) is frozen
    assert pickle.loads(pickle.dumps(frozen)) == base and type(pickle.loads(pickle.dumps(frozen))) is FrozenObject
    # what is not plain JSON stays a dict (encoded for each key, as before); the request copies it
    odd = {"type": "object", "enum": {1, 2}}
    assert frozen_object(odd) is odd and frozen_object({1: "a"}) == {1: "a"} and frozen_object(None) is None
    # a dump of the request holds plain dicts and lists (records never see the read-only types)
    dumped = req.model_dump()["response_schema"]
    assert type(dumped) is dict and type(dumped["required"]) is list


def test_the_loop_and_the_reformulator_send_one_read_only_schema_with_every_request(tmp_path: Path) -> None:
    """The plan's schema is frozen once per loop (and per reformulator) and every request carries that
    object: its canonical JSON is encoded for the cache key once, and no request can change it for the next."""
    import json

    from modulo.build import build_session
    from modulo.canonical import FrozenObject
    from modulo.config import ModuloConfig
    from modulo.llm.base import LLMRequest
    from modulo.runner import run_session
    from modulo.runs import RunDir

    cfg = ModuloConfig()
    cfg.benchmark.name = "synth/tasks"
    cfg.benchmark.args = {"n": 2}
    cfg.critics = ["format", "synth_task_coverage"]
    cfg.reformulator.mode = "llm"
    cfg.generator.prompt = "json"
    cfg.llm.structured_output = "schema"
    cfg.metacontroller.max_iterations = 2
    cfg.llm.args = {"replies": {"*": [json.dumps({"schedule": []})] * 8}}
    cfg.cache.mode = "off"
    cfg.run.dir = str(tmp_path / "run")
    cfg.run.progress = False
    cfg.run.report = False
    session = build_session(cfg)
    sent: list[LLMRequest] = []
    backend = session.loop.llm.backend
    complete = backend.complete

    async def capture(request: LLMRequest) -> object:
        sent.append(request)
        return await complete(request)

    backend.complete = capture
    asyncio.run(run_session(session, RunDir(tmp_path / "run")))
    stages = {r.tags["stage"] for r in sent}
    assert stages == {"generate", "reformulate"}, stages
    schemas = {stage: {id(r.response_schema) for r in sent if r.tags["stage"] == stage} for stage in stages}
    assert all(len(ids) == 1 for ids in schemas.values()), schemas  # one object for all of a stage's requests
    assert all(type(r.response_schema) is FrozenObject for r in sent)
    assert sent[0].response_schema == session.benchmark.plan_json_schema()


def test_one_thread_writes_the_puts_in_turn_and_each_put_returns_once_stored(tmp_path: Path) -> None:
    """Puts are awaited until stored, written by one thread in the order handed over (from several event loops
    one after another too); a failed write raises in its caller; the thread stops when no put comes and the
    next put starts another; closing waits for the writes handed over."""
    import modulo.llm.cache as cache_module

    cache = ResponseCache(tmp_path / "c.sqlite")
    fields = {"backend": "b", "model": "m", "finish_reason": "stop", "input_tokens": 1, "output_tokens": 2}

    async def put_many(prefix: str, n: int) -> list[str]:
        async def one(i: int) -> str:
            await cache.put(f"{prefix}{i}", request=request(f"q{i}"), text=f"{prefix} reply {i}", **fields)
            hit = cache.get_sync(f"{prefix}{i}")  # stored when the put returns
            assert hit is not None
            return hit.text

        return list(await asyncio.gather(*(one(i) for i in range(n))))

    assert asyncio.run(put_many("a", 20)) == [f"a reply {i}" for i in range(20)]
    writer = cache._writer
    assert writer is not None and writer.is_alive()
    assert asyncio.run(put_many("b", 5)) == [f"b reply {i}" for i in range(5)]  # another event loop
    assert cache._writer is writer  # the same thread wrote them

    async def failing() -> None:
        await cache.put("bad", request=None, text="x", **fields)  # no request to store: put_sync raises

    with pytest.raises(AttributeError):
        asyncio.run(failing())

    original = cache_module.WRITER_IDLE_S
    cache_module.WRITER_IDLE_S = 0.05
    try:
        asyncio.run(put_many("c", 2))
        first = cache._writer
        assert first is not None
        first.join(timeout=5)  # no put for a while: it stops
        assert not first.is_alive() and cache._writer is None
        assert asyncio.run(put_many("d", 3)) == [f"d reply {i}" for i in range(3)]  # another one starts
    finally:
        cache_module.WRITER_IDLE_S = original

    async def handed_over_then_closed() -> None:
        puts = [cache.put(f"e{i}", request=request("q"), text="e", **fields) for i in range(10)]
        task = asyncio.ensure_future(asyncio.gather(*puts))
        await asyncio.sleep(0)  # the puts are handed over; close() waits for them to be written
        await asyncio.to_thread(cache.close)
        await task

    asyncio.run(handed_over_then_closed())
    reopened = ResponseCache(tmp_path / "c.sqlite")
    assert len(reopened) == 20 + 5 + 2 + 3 + 10
    reopened.close()


async def test_a_reply_this_run_paid_for_in_an_earlier_process_is_spent_not_saved(
    provider: ProviderFactory, tmp_path: Path
) -> None:
    """A reply stored by this run in another of its processes (a problem killed before its record, run again
    on resume) was paid by the run: answered from the cache it counts as spent, not as saved. A reply stored
    by this very process, by another run, or with no payer is saved, as before."""
    fake = provider(["an answer"])
    settings = openai_settings(fake)
    first = build_client(settings, cache_mode="read-write", cache_dir=tmp_path)
    first.pays_for("run-A")
    try:
        paid = await first.call(request("Plan Rome."), "generate")
        same_process = await first.call(request("Plan Rome."), "generate")
    finally:
        await first.aclose()
    cost = paid.usage.cost_usd
    assert cost > 0 and same_process.cached and same_process.usage.cost_usd == 0.0
    for run, spent in (("run-A", True), ("run-B", False), (None, False)):
        later = build_client(settings, cache_mode="read-write", cache_dir=tmp_path)  # another process
        if run is not None:
            later.pays_for(run)
        try:
            hit = await later.call(request("Plan Rome."), "generate")
        finally:
            await later.aclose()
        assert hit.cached and hit.usage.cached_calls == 1, run
        assert hit.usage.cost_usd == pytest.approx(cost if spent else 0.0), run
        assert hit.usage.cached_cost_usd == pytest.approx(0.0 if spent else cost), run
    assert fake.stats().requests == 1


def test_a_run_killed_before_a_problems_record_counts_what_that_problem_paid(
    provider: ProviderFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same run twice: once straight through, once with its last problem's record lost (the process killed
    after the problem's calls, before its record) and resumed. The resumed run's problem is answered from the
    cache; the run's spending is the same as the straight run's, not less with the rest under "cache saved"."""
    import json

    from modulo.build import build_session
    from modulo.runner import run_session
    from modulo.runs import RunDir

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-only")
    fake = provider([json.dumps({"schedule": []})] * 12)

    def run(name: str) -> dict[str, float]:
        cfg = synth_config(fake, "gpt-4o-mini", n=3, max_iterations=2, cache_dir=tmp_path / f"{name}-cache")
        cfg.run.concurrency = 1
        result = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path / name)))
        usage: dict[str, float] = result.summary["usage"]
        return usage

    straight = run("straight")
    run("killed")
    records = tmp_path / "killed" / "records.jsonl"
    lines = records.read_text(encoding="utf-8").splitlines(keepends=True)
    records.write_text("".join(lines[:-1]), encoding="utf-8")  # the last problem's record never written
    resumed = run("killed")
    assert resumed["cached_calls"] > 0 and straight["cached_calls"] == 0
    assert resumed["cost_usd"] == pytest.approx(straight["cost_usd"]) and resumed["cached_cost_usd"] == 0.0


def _drop_last_record(run_dir: Path) -> None:
    """The run's last record never written: its process killed after the problem's calls, before its record."""
    records = run_dir / "records.jsonl"
    lines = records.read_text(encoding="utf-8").splitlines(keepends=True)
    records.write_text("".join(lines[:-1]), encoding="utf-8")


def test_each_paid_reply_counts_once_across_retried_and_killed_attempts(
    provider: ProviderFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run.retry_errors, the cache on: a problem errors after one paid call, in processes of one run. The reply
    is paid once; the run's cost (summary.json, every attempt's record summed) is that one call's, whichever
    attempts left a record:
    - a retry answered by the reply a recorded attempt paid for saves it (its record counted it);
    - an attempt that left no record (killed) counted it nowhere: the next attempt answered by it counts it,
      and becomes its payer, so the attempt after that one, answered by it too, saves it."""
    import json

    from modulo.build import build_session
    from modulo.runner import run_session
    from modulo.runs import RunDir, read_records

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-only")
    fake = provider([json.dumps({"schedule": []})] * 4)
    run_dir = tmp_path / "run"

    def attempt() -> float:
        cfg = synth_config(fake, "gpt-4o-mini", n=1, max_iterations=2, cache_dir=tmp_path / "cache")
        cfg.backprompt.name = broken
        cfg.run.retry_errors = True
        result = asyncio.run(run_session(build_session(cfg), RunDir(run_dir)))
        assert [r.outcome.value for r in read_records(run_dir)][-1] == "error"
        cost: float = result.summary["usage"]["cost_usd"]
        return cost

    with broken_backprompt() as broken:
        paid = attempt()  # the call is paid and recorded
        assert paid > 0
        assert attempt() == pytest.approx(paid)  # a retry: answered from the cache, saved
        _drop_last_record(run_dir)
        _drop_last_record(run_dir)  # (the first process killed before its record: no attempt on record)
        assert attempt() == pytest.approx(paid)  # counted by this attempt, which now pays for it
        assert attempt() == pytest.approx(paid)  # a retry of the attempt on record that paid: saved
        _drop_last_record(run_dir)  # that retry killed before its record: the payer is still on record
        assert attempt() == pytest.approx(paid)
    records = list(read_records(run_dir))
    assert [r.usage.cost_usd > 0 for r in records] == [True, False]
    assert all(r.usage.cached_calls == 1 for r in records) and fake.stats().requests == 1
