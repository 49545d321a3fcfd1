"""The per-iteration savings keep their meaning: the prompt hash by parts equals the whole hash, one plan
copy serves a batch only while unchanged, a batch keeps per-critic deadlines and stops where told, and
per-problem data is computed once per problem object."""

from __future__ import annotations

import asyncio
import gc
import math
import time
from typing import Any

from modulo.benchmark import PerProblem, frozen_data
from modulo.critic import Critic
from modulo.errors import CriticError
from modulo.executor import FrozenPlan, ThreadExecutor
from modulo.metacontroller import PromptHasher, _sha
from modulo.prompts import Template
from modulo.types import Message, PlanJSON, Problem, Usage, UsageTally, Verdict, plan_fingerprint

PROBLEM = Problem(id="p", benchmark="b", query="q")


def test_the_prompt_hash_by_parts_is_the_whole_prompts_hash() -> None:
    system = Message(role="system", content='sys "quoted" é \u2028')
    a, b = Message(role="user", content="first\nline"), Message(role="assistant", content="reply")
    hasher = PromptHasher()
    for messages in ([system, a], [system, a], [system, a, b], [system, b], [], [b, b]):
        assert hasher.sha(messages) == _sha(messages)
    # a long request quoted by the backprompts that follow: its escaped form is reused, the hash is the same
    request = 'Plan a trip "north" \\ é\n\t\x01 \u2028' + "day " * 1200
    first = Message(role="user", content=request)
    assert hasher.sha([system, first]) == _sha([system, first])
    for k in range(4):
        quoting = Message(role="user", content=f'\x02Feedback {k}: "no"\n{request}\nYour plan:\n' + "x" * 3000 * k)
        assert hasher.sha([system, quoting]) == _sha([system, quoting])
    edge = Message(role="user", content=request + request[:10])  # quoted at the very start
    assert hasher.sha([edge]) == _sha([edge])
    # a backprompt that starts with the request resumes from the hash state after it (with and without
    # the system message before it); a message hashed that way and seen again is encoded then
    for before in ([system], []):
        hasher = PromptHasher()
        assert hasher.sha([*before, first]) == _sha([*before, first])
        for k in range(3):
            bp = Message(role="user", content=request + f'\n\nFeedback {k}: "no" é\n' + "y" * 50 * k)
            assert hasher.sha([*before, bp]) == _sha([*before, bp])
            assert hasher.sha([bp, *before, bp]) == _sha([bp, *before, bp])
        other = Message(role="user", content="Other " + request)  # not at the start: the quoted form
        assert hasher.sha([*before, other]) == _sha([*before, other])
    # a conversation growing by messages: each prompt resumes after the ones it shares with the last
    talk = [system, first]
    for k in range(4):
        talk = [*talk, Message(role="assistant", content=f"plan {k}"), Message(role="user", content=f"fix {k}")]
        assert hasher.sha(talk) == _sha(talk)
    assert hasher.sha(talk[:3]) == _sha(talk[:3]) and hasher.sha(talk) == _sha(talk)


def test_the_escaped_parts_are_json_s_for_every_character() -> None:
    from json.encoder import encode_basestring

    from modulo.canonical import escaped as _escaped

    every = "".join(map(chr, range(0x250))) + "\u2028\u2029\ufe0f\U0001f600 end"
    for text in (every, every[40:], "", "plain", '"\\\n\r\t', "é\n" * 3000):
        assert _escaped(text) == encode_basestring(text)[1:-1].encode()


def test_hashing_in_slices_gives_hashlibs_digest() -> None:
    import hashlib

    from modulo.hashing import feed, sha256_hex

    for n in (0, 1, 2046, 2047, 2048, 2049, 4094, 4095, 10_000):
        data = bytes(range(256)) * (n // 256) + bytes(n % 256)
        assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
        h = hashlib.sha256(b"[")
        feed(h, data)
        assert h.hexdigest() == hashlib.sha256(b"[" + data).hexdigest()


def test_a_usage_tally_sums_as_usage_plus_does() -> None:
    parts = [Usage(calls=1, input_tokens=7, output_tokens=3, cost_usd=0.1), Usage(failed_calls=2, cost_usd=0.2)]
    parts += [Usage(cached_calls=1, calls=1, cached_cost_usd=1e-7 * k) for k in range(5)]
    total, tally = Usage(), UsageTally()
    for u in parts:
        total = total + u
        tally.add(u)
    assert tally.usage() == total and tally.total_tokens == total.total_tokens == 10
    assert tally.cost_usd == total.cost_usd  # the same floats, added in the same order
    assert UsageTally().usage() == Usage()
    # every figure of Usage is tallied (a field added to Usage and not here would be dropped from totals)
    assert set(UsageTally.__slots__) == set(Usage.model_fields)


def test_a_rendered_template_ends_in_one_newline_whether_or_not_it_is_copied() -> None:
    for source in ("x{{ a }}\n", "x{{ a }}", "\n x{{ a }} \n\n", "{{ a }}\n"):
        for a in ("", " ", "y", "y\n", "\u3000"):
            rendered = Template.from_text("t", source).render(a=a)
            assert rendered == (source.replace("{{ a }}", a)).strip() + "\n"


def test_a_failure_row_reads_as_a_dict_and_by_attribute_in_templates() -> None:
    import pytest

    from modulo.backprompt import Row
    from modulo.errors import PromptError

    row = Row(feedback="too dear", hint=None, items="x")
    assert row == {"feedback": "too dear", "hint": None, "items": "x"} and isinstance(row, dict)
    text = Template.from_text("t", '{{ f.feedback }}|{{ f["feedback"] }}|{{ f.hint }}|{{ f["items"] }}').render(f=row)
    assert text == "too dear|too dear|None|x\n"
    assert Template.from_text("t", "{{ f.items is callable }}").render(f=row) == "True\n"  # the method first
    with pytest.raises(PromptError, match="missing"):
        Template.from_text("t", "{{ f.missing }}").render(f=row)
    with pytest.raises(AttributeError):
        row.missing  # noqa: B018


def test_a_frozen_plan_is_encoded_once_and_a_nan_is_no_change() -> None:
    plan = [{"x": 1, "y": [1.5, None, "é"]}]
    frozen = FrozenPlan.of(plan)
    assert frozen.fingerprint == plan_fingerprint(plan)
    copy = frozen.copy()
    assert frozen.unchanged(copy)
    copy[0]["y"].append(2)
    assert not frozen.unchanged(copy)
    odd = FrozenPlan.of([math.nan])  # NaN is not equal to itself: the text decides
    assert odd.unchanged(odd.copy())


class Seen(Critic):
    """Records the plan object it is given; ``mutate`` changes it."""

    group = "hard"

    def __init__(self, name: str, seen: list[Any], mutate: bool = False, sleep: float = 0.0) -> None:
        self.name = name  # type: ignore[misc]
        self.seen, self.mutate, self.sleep = seen, mutate, sleep

    def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
        self.seen.append((self.name, id(plan), list(plan)))
        if self.sleep:
            time.sleep(self.sleep)
        if self.mutate:
            plan.append(0)
        return Verdict.ok()


def test_one_copy_serves_the_batch_until_a_critic_changes_it() -> None:
    seen: list[Any] = []
    critics = [Seen("a", seen), Seen("b", seen), Seen("m", seen, mutate=True), Seen("c", seen)]
    ex = ThreadExecutor()
    out = asyncio.run(ex.run_all(critics, PROBLEM, FrozenPlan.of([1]), [5.0] * 4))
    assert [type(o) for o in out] == [Verdict, Verdict, CriticError, Verdict]
    assert "mutated the plan" in str(out[2])
    ids = [i for _, i, _ in seen]
    assert ids[0] == ids[1] == ids[2] != ids[3]  # a fresh copy only after the change
    assert [p for _, _, p in seen] == [[1]] * 4  # every critic saw the plan as it was


def test_a_batch_keeps_each_critics_deadline_and_stops_where_told() -> None:
    seen: list[Any] = []
    slow = Seen("slow", seen, sleep=1.0)
    critics = [Seen("a", seen), slow, Seen("b", seen)]
    ex = ThreadExecutor()
    t0 = time.monotonic()
    out = asyncio.run(ex.run_all(critics, PROBLEM, FrozenPlan.of([1]), [30.0, 0.2, 30.0]))
    assert time.monotonic() - t0 < 0.9  # the slow critic's own deadline, not the others'
    assert isinstance(out[1], CriticError) and "did not finish within 0.2 s" in str(out[1])
    assert isinstance(out[2], Verdict)  # the rest of the batch went on in another worker
    stopped = asyncio.run(
        ex.run_all(
            [Seen("m", [], mutate=True), Seen("z", [])],
            PROBLEM,
            FrozenPlan.of([1]),
            [5.0, 5.0],
            stop=lambda c, o: isinstance(o, CriticError),
        )
    )
    assert len(stopped) == 1 and isinstance(stopped[0], CriticError)


def test_per_problem_data_is_computed_once_per_problem_object() -> None:
    calls: list[str] = []

    def compute(p: Problem) -> Any:
        calls.append(p.id)
        return frozen_data({"id": p.id, "list": [1, 2]})

    cache = PerProblem(compute)
    one = Problem(id="one", benchmark="b", query="q")
    assert cache(one) is cache(one) and calls == ["one"]
    assert cache(one)["list"] == (1, 2)
    other = one.model_copy(update={"query": "changed"})  # an updated problem is a new object
    cache(other)
    assert calls == ["one", "one"] and len(cache) == 2
    del other
    gc.collect()
    assert len(cache) == 1  # forgotten with its problem


def test_batches_share_a_bounded_pool_and_a_hung_worker_is_replaced() -> None:
    """Light batches run in at most ``batch_workers`` threads; a batch queued behind a hung critic keeps
    its deadlines for when it starts, and runs on a new worker once the hung one is abandoned."""
    import threading

    class OneWorker(ThreadExecutor):
        batch_workers = 1

    threads: set[str] = set()

    class Where(Seen):
        def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
            threads.add(threading.current_thread().name)
            return super().check(problem, plan)

    ex = OneWorker()

    async def many() -> list[list[Any]]:
        plan = FrozenPlan.of([1])
        return await asyncio.gather(*(ex.run_all([Where(f"w{i}", [])], PROBLEM, plan, [5.0]) for i in range(6)))

    assert all(isinstance(o[0], Verdict) for o in asyncio.run(many()))
    assert len(threads) == 1  # six batches, one worker

    async def behind_a_hang() -> tuple[list[Any], list[Any]]:
        plan = FrozenPlan.of([1])
        hung = asyncio.ensure_future(ex.run_all([Seen("hang", [], sleep=1.5)], PROBLEM, plan, [0.4]))
        await asyncio.sleep(0.05)  # the hanging critic holds the one worker
        queued = await ex.run_all([Seen("quick", [])], PROBLEM, plan, [0.2])  # waits longer than 0.2 s
        return await hung, queued

    t0 = time.monotonic()
    hung, queued = asyncio.run(behind_a_hang())
    assert isinstance(hung[0], CriticError) and "did not finish within 0.4 s" in str(hung[0])
    assert isinstance(queued[0], Verdict)  # not timed out while queued: it ran on the new worker
    assert time.monotonic() - t0 < 1.4
    ex.close()
