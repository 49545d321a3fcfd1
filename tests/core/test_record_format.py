"""The compact record line (format 2, :mod:`modulo.recordformat`): every reader gives the same objects for
it as for a format-1 line, a newer format says to upgrade, torn and damaged lines behave as before, and
``modulo export --format records`` writes the expanded form."""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pydantic_core
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import modulo.redact as redact_module
from modulo import recordformat
from modulo.analysis.records import iter_records as analysis_records
from modulo.errors import RunError
from modulo.llm.replay import load_recording, messages_key
from modulo.recordformat import (
    MIN_SHARED_PREFIX,
    MIN_SHARED_TEXT,
    RECORD_FORMAT,
    RecordFormatError,
    encode_record,
    expand_record,
)
from modulo.reports.load import iter_records as report_records
from modulo.runinfo import BenchmarkInfo, BudgetInfo, GeneratorInfo, RunInfo
from modulo.runs import RECORDS, RunDir, read_records
from modulo.types import (
    IterationRecord,
    Judgement,
    LLMCall,
    Message,
    Outcome,
    ProblemResult,
    Usage,
    UserAnswer,
    Verdict,
)

REFERENCE = "Reference information: " + 'flight F123 from A to B, 10:00-12:00; restaurant Ünïcode café "q"\n' * 60
FIRST = f"Plan the trip.\n{REFERENCE}\nAnswer:"


def verdicts(i: int) -> list[Verdict]:
    return [
        Verdict(critic="format", group="format", passed=True),
        Verdict(critic="budget", group="hard", passed=True, details={"total": 392.5, "items": [{"day": 1}], "x": None}),
        Verdict(
            critic="diverse",
            group="commonsense",
            passed=i > 1,
            feedback="" if i > 1 else f"day {i} repeats a restaurant",
            details={"day": 1, "ratio": math.nan},
            hint="pick another",
        ),
    ]


def record(pid: str = "p1", iterations: int = 3) -> ProblemResult:
    its = []
    prompt = FIRST
    for i in range(iterations):
        reply = json.dumps([{"day": 1, "breakfast": f"Place {i}, City", "note": "x" * 80}])
        backprompt = f"{FIRST}\n\nYour previous answer was:\n{reply}\n\nProblems:\n1. day {i} repeats a restaurant."
        messages = [Message(role="system", content="You are a planner." * 5), Message(role="user", content=prompt)]
        its.append(
            IterationRecord(
                index=i,
                prompt=messages,
                prompt_sha256="ab" * 32,
                raw_reply=reply,
                plan=json.loads(reply),
                plan_sha256="cd" * 8,
                verdicts=verdicts(i),
                rejudged=Judgement(verdicts=verdicts(i)[:1]) if i == 1 else None,
                answer=UserAnswer(text="yes", revealed=["a"]) if i == 2 else None,
                backprompt=backprompt,
                calls=[
                    LLMCall(stage="generate", messages=messages, reply=reply, usage=Usage(calls=1, input_tokens=9)),
                    LLMCall(
                        stage="reformulate",
                        messages=[Message(role="user", content=f"Rewrite as JSON:\n{reply}")],
                        reply=reply,
                        seconds=0.5,
                    ),
                ],
                timings={"generate": 0.25, "critique": 1.5},
                tool_use={"steps": [{"tool": "search", "out": "ok"}]} if i == 0 else None,
            )
        )
        prompt = backprompt
    best = iterations - 1
    return ProblemResult(
        problem_id=pid,
        benchmark="toy",
        outcome=Outcome.EXHAUSTED,
        stop_reason="iterations",
        iterations=its,
        best_iteration=best,
        best_plan=its[best].plan,
        usage=Usage(calls=2 * iterations),
        metadata={"level": "easy", "days": 3},
        templates={"generator": "json@1"},
    )


def as_format1(rec: ProblemResult) -> ProblemResult:
    """``rec`` as a format-1 line reads back (NaN in a JSON value, written null, reads back None)."""
    return ProblemResult.model_validate_json(rec.model_dump_json())


def fields_set(model: object, path: str = "r") -> list[tuple[str, tuple[str, ...]]]:
    """Every nested model's fields_set, by path (what ``exclude_unset`` dumps would show)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    if isinstance(model, BaseModel):
        out.append((path, tuple(sorted(model.model_fields_set))))
        for name in type(model).model_fields:
            out += fields_set(getattr(model, name), f"{path}.{name}")
    elif isinstance(model, list):
        for i, item in enumerate(model):
            out += fields_set(item, f"{path}[{i}]")
    return out


def test_a_compact_line_reads_back_as_the_same_record() -> None:
    rec = record()
    line = encode_record(rec)
    data = json.loads(line)
    assert list(data)[:2] == ["problem_id", "record_format"] and data["record_format"] == RECORD_FORMAT
    back = ProblemResult.model_validate_json(line)
    assert back == as_format1(rec)
    assert back.model_dump_json() == rec.model_dump_json()  # the expanded form is format 1, byte for byte
    assert fields_set(back) == fields_set(as_format1(rec))
    # the reference text is written once, the verdicts once each, and the line is a fraction of format 1
    assert line.count(b"Reference information") == 1
    assert len(data["verdict_table"]) == 5  # format, budget, diverse x2 (failing at 0 and 1, passing after), ...
    assert len(line) < len(rec.model_dump_json().encode()) / 3
    # a backprompt that extends the first prompt is stored as that entry plus its suffix
    assert any(isinstance(e, list) and data["text_table"][e[0]] == FIRST for e in data["text_table"])
    # the expanded dict is format 1's, key for key and in order
    before = json.dumps(data)
    expanded = expand_record(data)
    assert json.dumps(expanded) == json.dumps(json.loads(rec.model_dump_json()))
    assert json.dumps(data) == before  # expand_record leaves its input unchanged


def test_verdicts_equal_in_python_but_not_in_json_are_kept_apart() -> None:
    """1, 1.0 and True are equal to Python: each verdict still reads back with its own values."""
    shapes = [{"ok": 1, "cost": 300}, {"ok": True, "cost": 300.0}, {"ok": 1.0, "cost": 300}]
    shapes.append(shapes[1])
    made = [Verdict(critic="budget", group="hard", passed=False, details=d) for d in shapes]
    rec = ProblemResult(
        problem_id="p",
        benchmark="b",
        outcome=Outcome.EXHAUSTED,
        stop_reason="iterations",
        iterations=[IterationRecord(index=i, verdicts=[v]) for i, v in enumerate(made)],
    )
    line = encode_record(rec)
    back = ProblemResult.model_validate_json(line)
    assert back.model_dump_json() == rec.model_dump_json()
    assert len(json.loads(line)["verdict_table"]) == 3  # the last one repeats the second


def test_short_texts_and_empty_records_stay_inline() -> None:
    bare = ProblemResult(problem_id="x", benchmark="b", outcome=Outcome.SKIPPED, stop_reason="run_budget")
    assert ProblemResult.model_validate_json(encode_record(bare)) == bare
    rec = record(iterations=1)
    rec.iterations[0].raw_reply = "ok"
    data = json.loads(encode_record(rec))
    assert data["iterations"][0]["raw_reply"] == "ok"
    assert ProblemResult.model_validate_json(encode_record(rec)) == as_format1(rec)


def write_lines(tmp_path: Path, lines: list[bytes]) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / RECORDS).write_bytes(b"".join(line + b"\n" for line in lines))
    return run


def test_every_reader_gives_the_same_for_both_formats(tmp_path: Path) -> None:
    recs = [record("a"), record("b", 2)]
    expected = [as_format1(r) for r in recs]
    old = write_lines(tmp_path / "old", [r.model_dump_json().encode() for r in recs])
    new = write_lines(tmp_path / "new", [encode_record(r) for r in recs])
    mixed = write_lines(tmp_path / "mixed", [recs[0].model_dump_json().encode(), encode_record(recs[1])])
    for run in (old, new, mixed):
        assert list(read_records(run)) == expected
        assert list(report_records(run / RECORDS)) == expected
        assert [json.dumps(d) for d in analysis_records(run)] == [
            json.dumps(json.loads(r.model_dump_json())) for r in recs
        ]
        table = load_recording(run)
        assert table[messages_key(recs[0].iterations[1].calls[0].messages)]
    light_old = list(report_records(old / RECORDS, light=True))
    light_new = list(report_records(new / RECORDS, light=True))
    assert light_new == light_old
    assert all(it.prompt == [] and it.calls == [] for r in light_new for it in r.iterations)
    assert light_new[0].iterations[0].verdicts[2].feedback == ""  # light verdicts lose their feedback alike


def _toy_info() -> RunInfo:
    return RunInfo(
        benchmark=BenchmarkInfo(name="toy"),
        generator=GeneratorInfo(name="llm"),
        budget=BudgetInfo(max_iterations=3),
        problem_ids=["a", "b"],
    )


def test_run_dir_appends_compact_lines_and_resume_reads_them(tmp_path: Path) -> None:
    info = _toy_info()
    rd = RunDir(tmp_path / "run")
    rd.prepare(info, "x: 1\n")
    rd.append_many([record("a"), record("b")])
    first = rd.records_path.read_bytes().splitlines()[0]
    assert json.loads(first)["record_format"] == RECORD_FORMAT
    assert RunDir(rd.path).prepare(info, "x: 1\n") == {"a": as_format1(record("a")), "b": as_format1(record("b"))}


def test_a_newer_format_says_to_upgrade_and_is_never_cut(tmp_path: Path) -> None:
    data = json.loads(encode_record(record("b")))
    data["record_format"] = RECORD_FORMAT + 1
    run = write_lines(tmp_path, [encode_record(record("a")), json.dumps(data).encode()])
    with pytest.raises(RecordFormatError, match="upgrade modulo"):
        list(read_records(run))  # even as the last line: not taken for a torn one
    with pytest.raises(RecordFormatError, match="upgrade modulo"):
        list(report_records(run / RECORDS, light=True))
    info = RunInfo(
        benchmark=BenchmarkInfo(name="toy"),
        generator=GeneratorInfo(name="llm"),
        budget=BudgetInfo(max_iterations=3),
        problem_ids=["a", "b"],
    )
    before = (run / RECORDS).read_bytes()
    with pytest.raises(RecordFormatError):
        RunDir(run).prepare(info, "x: 1\n")
    assert (run / RECORDS).read_bytes() == before


@pytest.mark.parametrize("damage", ["text", "verdict", "format"])
def test_a_damaged_compact_line_is_a_damaged_line(tmp_path: Path, damage: str) -> None:
    data = json.loads(encode_record(record("a")))
    if damage == "text":
        data["iterations"][0]["raw_reply"] = 999
    elif damage == "verdict":
        data["iterations"][0]["verdicts"][0] = 99
    else:
        data["record_format"] = "two"
    bad = json.dumps(data).encode()
    run = write_lines(tmp_path, [bad, encode_record(record("b"))])
    with pytest.raises(RunError, match="line 1 is not a valid record"):
        list(read_records(run))
    notes: list[str] = []
    assert [r.problem_id for r in report_records(run / RECORDS, notes)] == ["b"]
    assert "skipped unreadable line" in notes[0]
    # the same line last: a damaged tail, skipped by readers and cut by resume
    run = write_lines(tmp_path / "last", [encode_record(record("b")), bad])
    assert [r.problem_id for r in read_records(run)] == ["b"]


def test_a_torn_compact_tail_is_dropped(tmp_path: Path) -> None:
    good, torn = encode_record(record("a")), encode_record(record("b"))
    run = tmp_path / "run"
    run.mkdir()
    (run / RECORDS).write_bytes(good + b"\n" + torn[: len(torn) // 2])
    assert [r.problem_id for r in read_records(run)] == ["a"]
    notes: list[str] = []
    assert [r["problem_id"] for r in analysis_records(run, notes)] == ["a"]
    assert "truncated last line" in notes[0]


def test_a_secret_across_a_shared_prefix_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, fresh in (("_known", set()), ("_forms", []), ("_b64", [])):
        monkeypatch.setattr(redact_module, name, fresh)
    secret = "sk-livesecret0123456789"
    redact_module.register(secret)
    rec = record(iterations=2)
    # the second prompt extends the first, the secret starting in the first's last characters
    first = rec.iterations[0].prompt[1].content + secret[:6]
    rec.iterations[0].prompt[1] = Message(role="user", content=first)
    rec.iterations[1].prompt[1] = Message(role="user", content=first + secret[6:] + " and more")
    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    rd.append(rec)
    text = rd.records_path.read_text(encoding="utf-8")
    assert secret not in text and secret[6:] not in text
    back = next(read_records(rd.path))
    assert secret not in back.iterations[1].prompt[1].content and "[redacted]" in back.iterations[1].prompt[1].content


def test_export_records_writes_the_expanded_form(tmp_path: Path) -> None:
    from modulo.cli.main import cli

    recs = [record("a"), record("b", 1)]
    run = write_lines(tmp_path, [encode_record(r) for r in recs])
    out = tmp_path / "expanded.jsonl"
    result = CliRunner().invoke(cli, ["export", str(run), "--format", "records", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").splitlines() == [r.model_dump_json() for r in recs]
    to_stdout = CliRunner().invoke(cli, ["export", str(run), "--format", "records", "--out", "-"])
    assert to_stdout.exit_code == 0
    assert [json.loads(x)["problem_id"] for x in to_stdout.stdout.splitlines()] == ["a", "b"]
    two = CliRunner().invoke(cli, ["export", str(run), str(run), "--format", "records"])
    assert two.exit_code != 0 and "one run directory" in two.output


def test_export_records_over_its_own_input_or_from_nowhere_loses_nothing(tmp_path: Path) -> None:
    from modulo.cli.main import cli

    recs = [record("a"), record("b", 1)]
    run = write_lines(tmp_path, [encode_record(r) for r in recs])
    records = run / RECORDS
    # the run's own records file as the output: read whole first, then replaced by the expanded form
    over = CliRunner().invoke(cli, ["export", str(run), "--format", "records", "--out", str(records)])
    assert over.exit_code == 0, over.output
    assert records.read_text(encoding="utf-8").splitlines() == [r.model_dump_json() for r in recs]
    assert [r.problem_id for r in read_records(run)] == ["a", "b"]
    # a path that does not exist: its own error, and nothing written for it
    missing = tmp_path / "nowhere"
    gone = CliRunner().invoke(cli, ["export", str(missing), "--format", "records"])
    assert gone.exit_code != 0 and "does not exist" in gone.output and not missing.exists()
    # a records file as the input: the default output lies beside it
    from_file = CliRunner().invoke(cli, ["export", str(records), "--format", "records"])
    assert from_file.exit_code == 0, from_file.output
    assert (run / "export" / "records.jsonl").read_text(encoding="utf-8").splitlines() == [
        r.model_dump_json() for r in recs
    ]


def test_export_with_records_it_could_not_read_writes_the_rest_and_exits_1(tmp_path: Path) -> None:
    from modulo.cli.main import cli

    good = record("a")
    bad = json.dumps({"problem_id": "b", "outcome": "no such outcome"}).encode()
    run = write_lines(tmp_path, [encode_record(good), bad, b"{not json"])
    out = tmp_path / "expanded.jsonl"
    result = CliRunner().invoke(cli, ["export", str(run), "--format", "records", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert out.read_text(encoding="utf-8").splitlines() == [good.model_dump_json()]
    assert "2 record(s) could not be read" in result.stderr
    whole = write_lines(tmp_path / "whole", [encode_record(good)])
    assert CliRunner().invoke(cli, ["export", str(whole), "--format", "records"]).exit_code == 0


def reference_line(rec: ProblemResult, scrub: Callable[[str], str] | None = None) -> bytes:
    """Format 2 as its docstring specifies it, written plainly (slowly): the line :func:`encode_record` must
    write byte for byte, however it finds shared texts and verdicts again."""
    texts: list[str] = []
    table: list[Any] = []
    verdict_table: list[Any] = []
    encoded: list[bytes] = []

    def ref(text: str | None) -> str | int | None:
        if text is None:
            return None
        text = scrub(text) if scrub is not None else text
        if len(text) < MIN_SHARED_TEXT:
            return text
        if text in texts:
            return texts.index(text)
        bases = [i for i, t in enumerate(texts) if len(t) >= MIN_SHARED_PREFIX and text.startswith(t)]
        base = max(bases, key=lambda i: len(texts[i]), default=-1)
        table.append(text if base < 0 else [base, text[len(texts[base]) :]])
        texts.append(text)
        return len(texts) - 1

    def verdict_ref(verdict: Verdict) -> int:
        data = verdict.model_dump_json().encode()
        if data not in encoded:
            encoded.append(data)
            verdict_table.append(json.loads(data))
        return encoded.index(data)

    line = json.loads(rec.model_dump_json())
    for it, out in zip(rec.iterations, line["iterations"], strict=True):
        for m, d in zip(it.prompt, out["prompt"], strict=True):
            d["content"] = ref(m.content)
        out["raw_reply"] = ref(it.raw_reply)
        out["backprompt"] = ref(it.backprompt)
        out["verdicts"] = [verdict_ref(v) for v in it.verdicts]
        for call, c in zip(it.calls, out["calls"], strict=True):
            for m, d in zip(call.messages, c["messages"], strict=True):
                d["content"] = ref(m.content)
            c["reply"] = ref(call.reply)
    line = {"problem_id": line.pop("problem_id"), "record_format": RECORD_FORMAT, **line}
    return pydantic_core.to_json({**line, "text_table": table, "verdict_table": verdict_table})


def random_record(rng: random.Random) -> ProblemResult:
    """A record whose texts and verdicts are shared every way the loop shares them, and some more: the same
    object in several places, equal copies, texts extending others (by more than one level), short texts,
    verdicts equal in Python but not in JSON."""
    pool: list[str] = []

    def text() -> str:
        roll = rng.random()
        if pool and roll < 0.3:
            return rng.choice(pool)  # the same object again
        if pool and roll < 0.45:
            return "".join(list(rng.choice(pool)))  # an equal copy
        if pool and roll < 0.75:
            made = rng.choice(pool) + rng.choice(["\nmore feedback", "", "x" * rng.randrange(1, 300), "Ü€🙂"])
        else:
            made = rng.choice(["Plan: ", "[{", "Plan: day 1 "]) + "".join(
                rng.choice('ab \n"\\é') for _ in range(rng.choice([3, 40, 70, 255, 256, 300, 900]))
            )
        pool.append(made)
        return made

    shapes = [{"ok": 1}, {"ok": True}, {"ok": 1.0}, {"ok": -0.0}, {"ok": 0.0}, {"a": 1, "b": 2}, {"b": 2, "a": 1}]
    kept = [Verdict(critic="c", passed=rng.random() < 0.5, details=rng.choice(shapes)) for _ in range(4)]

    def verdict() -> Verdict:
        if rng.random() < 0.5:
            return rng.choice(kept)
        return Verdict(critic=rng.choice("cd"), passed=True, feedback=rng.choice(["", "f"]), details=rng.choice(shapes))

    its = []
    for i in range(rng.randrange(0, 6)):
        prompt = [Message(role=rng.choice(["system", "user"]), content=text()) for _ in range(rng.randrange(1, 3))]
        reply = rng.choice([None, text()])
        calls = [
            LLMCall(stage="generate", messages=rng.choice([prompt, [Message(role="user", content=text())]]), reply=r)
            for r in rng.choice([[], [reply], [reply, text()]])
        ]
        its.append(
            IterationRecord(
                index=i,
                prompt=prompt,
                raw_reply=reply,
                backprompt=rng.choice([None, text()]),
                verdicts=[verdict() for _ in range(rng.randrange(0, 5))],
                calls=calls,
            )
        )
    return ProblemResult(
        problem_id="p", benchmark="b", outcome=Outcome.EXHAUSTED, stop_reason="iterations", iterations=its
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_line_is_the_format_as_specified(seed: int) -> None:
    """Whatever the sharing (by identity, by equality, by prefix), the line is byte for byte the one the
    format's plain reading gives, with and without a scrub, and reads back as the record."""
    rec = random_record(random.Random(seed))
    assert encode_record(rec) == reference_line(rec)
    scrub = lambda text: text.replace("ab", "[redacted]")  # noqa: E731
    assert encode_record(rec, scrub) == reference_line(rec, scrub)
    assert ProblemResult.model_validate_json(encode_record(rec)).model_dump_json() == rec.model_dump_json()


def test_records_are_written_whole_in_their_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group of records goes out in pieces (``os.writev``, in batches the system takes): the file holds
    exactly their lines, a short write going on where it stopped."""
    import os

    from modulo import runs

    recs = [record(f"p{i}", 1 + i % 3) for i in range(5)]
    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    rd.append_many(recs)
    expected = b"".join(encode_record(r) + b"\n" for r in recs)
    assert rd.records_path.read_bytes() == expected == b"".join(runs.record_line(r) for r in recs)

    writev = os.writev
    monkeypatch.setattr(runs, "_IOV_MAX", 3)  # several batches, each written short: a third of it at first

    def short(fd: int, pieces: list[Any]) -> int:
        want = b"".join(pieces)
        return os.write(fd, want[: max(1, len(want) // 3)])

    monkeypatch.setattr(os, "writev", short)
    rd.append_many(recs)
    monkeypatch.setattr(os, "writev", writev)
    assert rd.records_path.read_bytes() == expected * 2
    assert [r.problem_id for r in read_records(rd.path)] == [r.problem_id for r in recs] * 2


class _Foreign(BaseModel):
    """A model of a critic's own in a verdict's details (not one of the record's models)."""

    when: float = 1.0


class _Level(enum.IntEnum):
    EASY = 1


class _Name(str):
    pass


class _Real(float):
    pass


#: values orjson writes as pydantic_core does, and values it must leave to pydantic_core (which the writer's
#: encoder then writes as before): whatever a verdict's details or a plan may hold
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e16, 1e15, 1e-7, 5e-324, 1.7976931348623157e308, 392.0, 3.5411998396739364e-05]),
    st.text(),
    st.text(alphabet=st.characters(max_codepoint=0x7F)),
    st.sampled_from(["\u2028", "\x7f", "é", "🙂", "\ufe0f", "</script>"]),
    st.sampled_from(
        [Outcome.CERTIFIED, _Level.EASY, _Name("x"), dt.datetime(2026, 11, 25, 1, 2, 3, 4), {1, 2}, b"bytes"]
    ),
    st.sampled_from([np.float64(1.5), np.float64("nan"), np.int64(3), np.float32(0.1), _Real(2.0), b"\xff"]),
    st.builds(_Foreign, when=st.floats(allow_nan=False)),
    st.builds(Usage, calls=st.integers(0, 9), cost_usd=st.floats(0, 1)),
    st.builds(Verdict, critic=st.text(max_size=5), passed=st.booleans(), details=st.just({"x": 1.0})),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
        st.dictionaries(st.one_of(st.integers(0, 3), st.booleans(), st.none()), inner, max_size=2),
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(_VALUES)
def test_the_writers_encoder_writes_what_pydantic_core_writes(value: Any) -> None:
    """The record writer's encoder (orjson where it writes the same, pydantic_core where it might not) gives
    pydantic_core's bytes for any value, or its error."""
    try:
        expected = pydantic_core.to_json(value, inf_nan_mode="null")
    except pydantic_core.PydanticSerializationError:
        with pytest.raises(pydantic_core.PydanticSerializationError):
            recordformat._json(value)
        return
    assert recordformat._json(value) == expected


def test_without_orjson_the_lines_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment installed before orjson became a dependency writes the same lines (pydantic_core alone)."""
    recs = [record(), *(random_record(random.Random(seed)) for seed in range(8))]
    fast = [encode_record(r) for r in recs]
    monkeypatch.setattr(recordformat, "orjson", None)
    assert [encode_record(r) for r in recs] == fast


def test_a_record_holding_a_lone_surrogate_is_written_with_a_replacement_character(tmp_path: Path) -> None:
    """A model's tool-call argument or a plan's string may be the JSON escape of half an emoji (a lone
    surrogate), which UTF-8 cannot hold: the record's encoding raised PydanticSerializationError in the
    records writer and the whole run stopped. The record is written with U+FFFD in its place, paired
    surrogates (a whole emoji) kept, and read back."""
    rd = RunDir(tmp_path / "run")
    rd.prepare(_toy_info(), "x: 1\n")
    bad = record("a").model_copy(update={"best_plan": {"city\udc00": ["Rome \ud800", "smile \ud83d\ude00"]}})
    rd.append_many([bad, record("b")])
    back = {r.problem_id: r for r in read_records(rd.path)}
    assert back["a"].best_plan == {"city\ufffd": ["Rome \ufffd", "smile \U0001f600"]}
    assert back["b"] == as_format1(record("b"))
