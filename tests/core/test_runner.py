"""The runner: a failing problem is recorded, the others finish; run-level dollar budget; records."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from modulo import components
from modulo.build import build_session
from modulo.config import ModuloConfig
from modulo.errors import DataError, RunError
from modulo.runner import run_session
from modulo.runs import RunDir, read_records
from modulo.types import Problem
from tests.llm.support import BROKEN_BACKPROMPT, broken_backprompt

from . import toy

pytestmark = pytest.mark.usefixtures("toy_registered")


class FragileToy(toy.Toy):
    name = "toy_fragile"

    def prompt_variables(self, problem: Problem) -> dict[str, Any]:
        if problem.id == "toy-1":
            raise DataError("row toy-1 is malformed")
        return super().prompt_variables(problem)

    def critic_names(self) -> list[str]:
        return ["format"]


def config(name: str, n: int, replies: dict[str, list[str]], **run: Any) -> ModuloConfig:
    cfg = ModuloConfig()
    cfg.benchmark.name = name
    cfg.benchmark.split = "dev"
    cfg.benchmark.args = {"n": n}
    cfg.reformulator.mode = "none"
    cfg.llm.name = "scripted"
    cfg.llm.args = {"replies": replies}
    cfg.llm.price_input_per_mtok = 1000.0
    cfg.llm.price_output_per_mtok = 1000.0
    cfg.cache.mode = "off"
    cfg.run.progress = False
    for k, v in run.items():
        setattr(cfg.run, k, v)
    return cfg


def test_one_failing_problem_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    components.benchmarks.register("toy_fragile", FragileToy, replace=True)
    try:
        session = build_session(config("toy_fragile", 3, {"*": ["[1, 2]"]}))
        result = asyncio.run(run_session(session, RunDir(tmp_path)))
    finally:
        components.benchmarks.unregister("toy_fragile")
    by_id = {r.problem_id: r for r in read_records(tmp_path)}
    assert set(by_id) == {"toy-0", "toy-1", "toy-2"}
    assert by_id["toy-1"].outcome.value == "error" and "row toy-1 is malformed" in (by_id["toy-1"].error or "")
    assert by_id["toy-0"].outcome.value == "certified" and by_id["toy-2"].outcome.value == "certified"
    assert result.summary["counts"] == {"certified": 2, "error": 1}
    # the errored problem is counted at the top of the summary and left out of the evaluation
    assert result.summary["status"] == "errors" and result.summary["evaluated"] == 2
    assert result.summary["certified_rate"] == 1.0  # 2 of the 2 evaluated, as the console says (it read 2/3)
    errors = result.summary["errors"]
    assert errors["count"] == 1 and errors["problem_id"] == "toy-1" and errors["class"] == "DataError"
    assert "row toy-1 is malformed" in errors["message"]
    assert result.evaluation is not None
    assert [r["problem_id"] for r in result.evaluation["per_problem"]] == ["toy-0", "toy-2"]
    assert result.evaluation["excluded"]["problem_ids"] == ["toy-1"]


def test_run_dollar_budget_records_every_problem(tmp_path: Path) -> None:
    # every reply fails a critic; each call costs about $0.02 at the configured prices
    cfg = config("toy", 6, {"*": ["[1, 1]"] * 10}, concurrency=1, max_dollars=0.05)
    session = build_session(cfg)
    result = asyncio.run(run_session(session, RunDir(tmp_path)))
    records = {r.problem_id: r for r in read_records(tmp_path)}
    assert set(records) == {f"toy-{i}" for i in range(6)}  # every problem has an outcome
    outcomes = [records[f"toy-{i}"].outcome.value for i in range(6)]
    assert outcomes[0] in ("exhausted", "failed") and records["toy-0"].stop_reason == "run_budget"
    assert outcomes[-1] == "skipped" and records["toy-5"].stop_reason == "run_budget"
    per_call = max(c.usage.cost_usd for r in records.values() for it in r.iterations for c in it.calls)
    spent = result.summary["usage"]["cost_usd"]
    assert 0.05 <= spent < 0.05 + per_call + 1e-9  # the run stops at the first check past the budget


class ExhaustingToy(toy.Toy):
    """Its reply parser runs out of memory on every reply (after the model's paid call)."""

    name = "toy_exhausting"

    def parse(self, text: str, problem: Problem) -> Any:
        raise MemoryError

    def critic_names(self) -> list[str]:
        return ["format"]


def test_what_a_problem_spent_before_it_ran_out_of_memory_counts_against_the_run_budget(tmp_path: Path) -> None:
    # the problem's record counted the call, the run's dollar budget did not: the next problems ran past it
    components.benchmarks.register("toy_exhausting", ExhaustingToy, replace=True)
    try:
        cfg = config("toy_exhausting", 3, {"*": ["[1, 1]"]}, concurrency=1, max_dollars=0.001)
        cfg.reformulator.mode = "parser"
        asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    finally:
        components.benchmarks.unregister("toy_exhausting")
    records = {r.problem_id: r for r in read_records(tmp_path)}
    assert records["toy-0"].stop_reason == "memory" and records["toy-0"].usage.cost_usd > 0.001
    assert [records[f"toy-{i}"].outcome.value for i in (1, 2)] == ["skipped", "skipped"]


def test_problems_skipped_by_the_run_budget_are_left_out_of_the_metrics_and_the_run_is_partial(
    tmp_path: Path,
) -> None:
    from modulo.reports import ReportOptions, build_report, load_run

    cfg = config("toy", 6, {"*": ["[1, 1]"] * 10}, concurrency=1, max_dollars=0.05)
    result = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    records = {r.problem_id: r for r in read_records(tmp_path)}
    skipped = sorted(i for i, r in records.items() if r.outcome.value == "skipped")
    assert skipped, "the budget should leave problems unstarted"
    # a problem that never started is neither a plan failure nor an abstention, and the run is not complete
    assert result.summary["status"] == "partial"
    assert result.summary["evaluated"] == 6 - len(skipped)
    assert result.evaluation is not None
    scored = [r["problem_id"] for r in result.evaluation["per_problem"]]
    assert not set(scored) & set(skipped) and len(scored) == 6 - len(skipped)
    assert set(skipped) <= set(result.evaluation["excluded"]["problem_ids"])
    run = load_run(tmp_path)
    assert not run.complete and run.skipped_ids == skipped and not set(run.scored_ids) & set(skipped)
    report = build_report([tmp_path], ReportOptions(out=tmp_path / "rep", n_resamples=50))
    assert f"{len(skipped)} skipped, never started" in report.text


def test_config_round_trips_through_the_run_directory(tmp_path: Path) -> None:
    from modulo.cli.hydra_app import config_yaml
    from modulo.config import load_config

    cfg = config("toy", 2, {"*": ["[2, 3]"]})
    cfg.llm.args = {"latency_s": 0.0}
    (tmp_path / "config.yaml").write_text(config_yaml(cfg))
    assert load_config(tmp_path) == cfg


def test_final_plans_are_evaluated_once_for_summary_and_budget_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluated: list[list[Any]] = []
    plain = toy.Toy.evaluate

    def counting(self: toy.Toy, problems: Any, plans: Any) -> Any:
        evaluated.append(list(plans))
        return plain(self, problems, plans)

    monkeypatch.setattr(toy.Toy, "evaluate", counting)
    # toy-0 is right at its second iteration; toy-1 never (its sum is wrong, its numbers distinct)
    cfg = config("toy", 2, {"toy-0": ["[1, 1]", "[2, 3]"], "toy-1": ["[1, 2]"] * 3})
    cfg.metacontroller.max_iterations = 3
    result = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    # the delivered plans once (for the summary and the console table), the first iteration's plans once
    assert evaluated == [[[2, 3], [1, 2]], [[1, 1], [1, 2]]]
    assert result.budget_metrics == [(1, {"certified": 0.0, "solved": 0.0}), (3, {"certified": 0.5, "solved": 0.5})]
    assert result.summary["metrics"] == {"solved": 0.5} and result.summary["iterations"] == 5
    # the runner kept no full record: they are read back from disk, in problem order
    assert [(r.problem_id, len(r.iterations)) for r in result.results] == [("toy-0", 2), ("toy-1", 3)]


@pytest.fixture
def finals_seen(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[str, Any, frozenset[str]]]]:
    """Each call of the toy benchmark's evaluate_final: (problem id, plan, passed_by) of each final plan."""
    seen: list[list[tuple[str, Any, frozenset[str]]]] = []
    plain = toy.Toy.evaluate_final

    def recording(self: toy.Toy, finals: Any) -> Any:
        finals = list(finals)
        seen.append([(f.problem.id, f.plan, f.passed_by) for f in finals])
        return plain(self, finals)

    monkeypatch.setattr(toy.Toy, "evaluate_final", recording)
    return seen


def test_the_evaluation_is_handed_the_critics_that_passed_each_final_plan(
    tmp_path: Path, finals_seen: list[list[tuple[str, Any, frozenset[str]]]]
) -> None:
    """Each final plan comes with the critics whose verdict on that very plan passed it (applicable, no
    error), the delivered plans' and the first plans' each; a problem resumed from an earlier process is
    handed none (its verdicts were not given here)."""
    # toy-0 passes both critics at its second iteration; toy-1's numbers are distinct but sum wrong
    cfg = config("toy", 2, {"toy-0": ["[1, 1]", "[2, 3]"], "toy-1": ["[1, 2]"] * 3})
    cfg.metacontroller.max_iterations = 3
    result = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    everyone = frozenset({"format", "toy_sum", "toy_distinct"})
    assert finals_seen == [
        [("toy-0", [2, 3], everyone), ("toy-1", [1, 2], frozenset({"format", "toy_distinct"}))],
        [("toy-0", [1, 1], frozenset({"format"})), ("toy-1", [1, 2], frozenset({"format", "toy_distinct"}))],
    ]
    assert result.summary["metrics"] == {"solved": 0.5}
    finals_seen.clear()
    again = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))  # every problem resumed
    assert [[passed for _, _, passed in finals] for finals in finals_seen] == [[frozenset(), frozenset()]] * 2
    assert again.summary["metrics"] == result.summary["metrics"]


def test_the_passes_handed_to_the_evaluation_are_judged_against_the_final_request(
    tmp_path: Path, finals_seen: list[list[tuple[str, Any, frozenset[str]]]]
) -> None:
    """After an update, a plan's passes are those of its verdicts against the request as it ended (the plan
    judged again after the update), never those against the request it was first judged against."""
    # [2, 3] sums to 5, toy-0's target, until the update after turn 0 makes every target 9
    cfg = config("toy", 2, {"toy-0": ["[2, 3]", "[4, 5]"], "toy-1": ["[2, 4]", "[2, 4]"]})
    cfg.user.updates = [{"after": 0, "add": {"target": 9}, "text": "They must sum to 9 now."}]
    cfg.metacontroller.max_iterations = 2
    asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    distinct = frozenset({"format", "toy_distinct"})
    assert finals_seen == [
        [("toy-0", [4, 5], distinct | {"toy_sum"}), ("toy-1", [2, 4], distinct)],
        [("toy-0", [2, 3], distinct), ("toy-1", [2, 4], distinct)],
    ]


def test_records_finishing_together_are_written_in_one_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Problems that finish while a group of records is being written go out in the next write (one
    fsync for the group); every record is on disk when the run returns, and a failed write stops the run."""
    groups: list[int] = []
    append_many = RunDir.append_many

    def counted(self: RunDir, results: Any) -> None:
        groups.append(len(results))
        append_many(self, results)

    monkeypatch.setattr(RunDir, "append_many", counted)
    session = build_session(config("toy", 24, {"*": ["[1, 1]"] * 2}, concurrency=8))
    asyncio.run(run_session(session, RunDir(tmp_path)))
    assert {r.problem_id for r in read_records(tmp_path)} == {f"toy-{i}" for i in range(24)}
    assert sum(groups) == 24 and len(groups) < 24 and max(groups) > 1

    def full(self: RunDir, results: Any) -> None:
        raise RunError("cannot write records.jsonl (No space left on device)")

    monkeypatch.setattr(RunDir, "append_many", full)
    session = build_session(config("toy", 6, {"*": ["[1, 1]"]}, concurrency=3))
    with pytest.raises(RunError, match="No space left"):
        asyncio.run(run_session(session, RunDir(tmp_path / "full")))


@pytest.mark.parametrize("concurrency", [1, 3])
def test_every_problem_a_worker_finished_is_on_disk_before_it_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, concurrency: int
) -> None:
    """A worker takes its next problem only once its record is on disk (the writer thread writes it): a
    run killed during a problem has every problem finished before it by that worker on disk. While other
    problems are being solved the writer waits a little for more records to write with it (fewer fsyncs);
    with none being solved (one worker), it writes at once."""
    import modulo.runner as runner_module

    monkeypatch.setattr(runner_module, "GROUP_SECONDS", 2.0 if concurrency == 1 else 0.02)
    session = build_session(config("toy", 6, {"*": ["[1, 1]"]}, concurrency=concurrency))
    solve = session.loop.solve
    finished: dict[Any, set[str]] = {}  # worker task -> the problems it finished
    unwritten: list[set[str]] = []

    async def watched(problem: Problem, budget: Any) -> Any:
        mine = finished.setdefault(asyncio.current_task(), set())
        unwritten.append(mine - {r.problem_id for r in read_records(tmp_path)})
        result = await solve(problem, budget)
        mine.add(problem.id)
        return result

    monkeypatch.setattr(session.loop, "solve", watched)
    started = time.perf_counter()
    result = asyncio.run(run_session(session, RunDir(tmp_path)))
    assert result.state.done == 6 and len(list(read_records(tmp_path))) == 6
    assert len(unwritten) == 6 and not any(unwritten), unwritten
    if concurrency == 1:  # no group window waited out (2 s a record)
        assert time.perf_counter() - started < 6


def test_run_json_files_are_written_in_pieces_as_one_dumps_would(tmp_path: Path) -> None:
    """summary.json and evaluation.json go to disk in pieces cut between JSON tokens (a large
    evaluation is never held as one text): the file is byte for byte ``json.dumps(data, indent=1)``,
    and a registered secret is redacted wherever it falls."""
    import datetime
    import json

    from modulo import runs
    from modulo.redact import REDACTED, redact, register

    secret = "pieces-s3cret-value"
    register(secret)
    rows = [{"problem_id": f"p{i}", "note": f"row {i} {secret}" if i % 97 == 0 else "x" * 40} for i in range(3000)]
    data = {"metrics": {"a": 0.5}, "per_problem": rows, "when": datetime.date(2024, 5, 1)}
    assert len(list(runs._json_pieces(data, size=4096))) > 10
    whole = redact(json.dumps(data, indent=1, default=str))
    assert RunDir(tmp_path).write_json("evaluation.json", data).read_text(encoding="utf-8") == whole
    runs._atomic_write(tmp_path / "small.json", runs._json_pieces(data, size=4096))  # many pieces
    text = (tmp_path / "small.json").read_text(encoding="utf-8")
    assert text == whole and secret not in text and text.count(REDACTED) == len(range(0, 3000, 97))


def test_the_json_files_writer_gives_the_standard_librarys_text_for_every_kind_of_value(tmp_path: Path) -> None:
    """Long ASCII strings are escaped by a faster encoder: the text stays ``json.dumps(data, indent=1,
    default=str)``, whatever the strings hold (quotes, backslashes, control characters, DEL, non-ASCII), the
    numbers (NaN, the infinities) or the keys (numbers, booleans, None); run.json is ``RunInfo.to_json()``."""
    import datetime
    import json

    from modulo import runs

    long = "".join(chr(c) for c in range(127)) * 5 + '{"plan": [1, 2]} \\ "quoted"' * 20
    data: Any = {
        "ascii": long,
        "del": long + "\x7f",
        "unicode": long + "é ☃ \U0001f600",
        "short": 'a "b" \\ \n',
        "numbers": [0, -1, 10**30, 0.1, 1e-05, 1e300, float("nan"), float("inf"), float("-inf"), True, False, None],
        "keys": {3: "int", 2.5: "float", True: "bool", None: "none", long: "a long key"},
        "empty": [[], {}, ""],
        "nested": [{"a": [long, {"b": long}]}],
        "other": datetime.date(2024, 5, 1),
    }
    assert "".join(runs._json_pieces(data, long_texts=True)) == json.dumps(data, indent=1, default=str)
    session = build_session(config("toy", 2, {"*": [long]}))
    RunDir(tmp_path).prepare_digests(session.info, "", lambda r: r)
    info = session.info.model_copy(update={"run_id": tmp_path.name})
    assert (tmp_path / "run.json").read_text(encoding="utf-8") == info.to_json()


def test_the_json_files_writer_does_without_the_private_encoder_where_it_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The long-text encoder builds on the standard library's private ``_make_iterencode``: where another
    Python changed it (another signature, other text) or lacks it, the files are written by
    ``json.JSONEncoder`` alone, the same text, and no run fails."""
    import json

    from modulo import runs

    data = {"reply": "x" * 1000 + '"', "n": [1.5, float("nan")]}
    expected = json.dumps(data, indent=1, default=str)
    assert runs._long_text_encoder() is runs._Encoder  # this Python's: checked and used
    for changed in (
        None,
        lambda *args: (_ for _ in ()).throw(TypeError("signature")),
        lambda *a: lambda o, i: iter(["{}"]),
    ):
        runs._long_text_encoder.cache_clear()
        monkeypatch.setattr(runs, "_make_iterencode", changed)
        try:
            assert runs._long_text_encoder() is json.JSONEncoder
            assert "".join(runs._json_pieces(data, long_texts=True)) == expected
        finally:
            runs._long_text_encoder.cache_clear()


class ThresholdToy(toy.Toy):
    """Notes the collector's first threshold whenever a prompt is built (that is, during the run)."""

    name = "toy_gc"
    seen: ClassVar[list[int]] = []

    def prompt_variables(self, problem: Problem) -> dict[str, Any]:
        ThresholdToy.seen.append(gc.get_threshold()[0])
        return super().prompt_variables(problem)

    def critic_names(self) -> list[str]:
        return ["format"]


@pytest.mark.parametrize("threshold", [20_000, 1234, None])
def test_the_collector_threshold_holds_during_the_run_and_is_restored(tmp_path: Path, threshold: int | None) -> None:
    components.benchmarks.register("toy_gc", ThresholdToy, replace=True)
    before = gc.get_threshold()
    ThresholdToy.seen = []
    try:
        session = build_session(config("toy_gc", 2, {"*": ["[1, 2]"]}, gc_threshold=threshold))
        asyncio.run(run_session(session, RunDir(tmp_path)))
    finally:
        components.benchmarks.unregister("toy_gc")
    assert ThresholdToy.seen and set(ThresholdToy.seen) == {before[0] if threshold is None else threshold}
    assert gc.get_threshold() == before


#: a right plan for each of the first three toy problems
RIGHT = {"toy-0": ["[2, 3]"], "toy-1": ["[2, 4]"], "toy-2": ["[3, 4]"]}


def test_the_summary_counts_every_problem_whatever_the_evaluation_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary's counts are taken in the evaluation's own pass over the digests: an evaluation that
    stops reading after the first plan still leaves every problem counted."""

    def first_only(self: toy.Toy, finals: Any) -> Any:
        first = next(iter(finals))
        return self.evaluate([first.problem], [first.plan])

    monkeypatch.setattr(toy.Toy, "evaluate_final", first_only)
    cfg = config("toy", 4, {**RIGHT, "toy-3": ["[1, 1]", "[1, 2]"]})
    cfg.metacontroller.max_iterations = 2
    result = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    assert result.summary["counts"] == {"certified": 3, "exhausted": 1}
    assert result.summary["finished"] == result.summary["evaluated"] == 4 and result.summary["iterations"] == 5
    assert result.evaluation is not None and [r["problem_id"] for r in result.evaluation["per_problem"]] == ["toy-0"]


def test_no_problem_scored_calls_no_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[int] = []
    monkeypatch.setattr(toy.Toy, "evaluate_final", lambda self, finals: called.append(1))
    components.benchmarks.register("toy_fragile", FragileToy, replace=True)
    try:
        cfg = config("toy_fragile", 2, {"*": ["[1, 2]"]})
        cfg.benchmark.ids = ["toy-1"]  # the malformed row: the one problem ends in error
        result = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    finally:
        components.benchmarks.unregister("toy_fragile")
    assert not called and result.summary["counts"] == {"error": 1} and result.summary["evaluated"] == 0
    assert result.evaluation == {
        "metrics": {},
        "per_problem": [],
        "tables": {},
        "excluded": {"problem_ids": ["toy-1"], "reason": "ended with an error or not run"},
    }


def test_the_session_closes_while_the_summary_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's end: the evaluation runs in its thread while the session closes (a critic pool's workers
    are waited for meanwhile), evaluation.json is written before summary.json (written last: the run
    ended), and both after every record."""
    import threading

    from modulo.executor import ThreadExecutor

    evaluating = threading.Event()
    overlapped: list[bool] = []
    plain = toy.Toy.evaluate_final

    def evaluate_final(self: toy.Toy, finals: Any) -> Any:
        evaluating.set()
        return plain(self, finals)

    def close(self: ThreadExecutor) -> None:  # the session's close waits for the evaluation to have started
        overlapped.append(evaluating.wait(timeout=10))

    written: list[str] = []
    write_json = RunDir.write_json

    def noted(self: RunDir, name: str, data: Any) -> Path:
        written.append(name)
        assert len(list(read_records(self.path))) == 3  # every record on disk first
        return write_json(self, name, data)

    monkeypatch.setattr(toy.Toy, "evaluate_final", evaluate_final)
    monkeypatch.setattr(ThreadExecutor, "close", close)
    monkeypatch.setattr(RunDir, "write_json", noted)
    session = build_session(config("toy", 3, RIGHT))
    assert isinstance(session.loop.executor, ThreadExecutor)
    result = asyncio.run(run_session(session, RunDir(tmp_path)))
    assert overlapped == [True] and written == ["evaluation.json", "summary.json"]
    assert result.summary["counts"] == {"certified": 3}


@pytest.mark.parametrize("failing", ["close", "evaluation", "both"])
def test_a_failing_end_writes_no_summary_and_keeps_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """A session that fails to close, or an evaluation that fails, fails the run after its records are
    on disk, with no summary.json (the run did not end); the session's error is the one raised when both
    fail, and the evaluation's thread is done before the run returns."""
    from modulo.executor import ThreadExecutor

    finished: list[bool] = []

    def close(self: ThreadExecutor) -> None:
        if failing in ("close", "both"):
            raise OSError("the pool would not close")

    def evaluate_final(self: toy.Toy, finals: Any) -> Any:
        try:
            list(finals)
            if failing in ("evaluation", "both"):
                time.sleep(0.2)  # still running when the session's error comes
                raise ValueError("the evaluator broke")
            return toy.Toy.evaluate_stream(self, ((f.problem, f.plan) for f in []))
        finally:
            finished.append(True)

    monkeypatch.setattr(ThreadExecutor, "close", close)
    monkeypatch.setattr(toy.Toy, "evaluate_final", evaluate_final)
    session = build_session(config("toy", 3, RIGHT))
    raised = OSError if failing in ("close", "both") else ValueError
    with pytest.raises(raised):
        asyncio.run(run_session(session, RunDir(tmp_path)))
    assert finished == [True]
    assert len(list(read_records(tmp_path))) == 3 and not (tmp_path / "summary.json").exists()


def test_a_resumed_run_stopped_before_its_end_leaves_no_summary_of_the_earlier_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """summary.json and evaluation.json of the process that ended the run before stayed in place while a
    resumption (run.retry_errors) solved problems again: stopped by Ctrl-C, the directory said the run had
    ended with the old counts, usage and metrics, beside records that no longer matched them."""
    components.benchmarks.register("toy_fragile", FragileToy, replace=True)
    try:
        asyncio.run(run_session(build_session(config("toy_fragile", 3, {"*": ["[1, 2]"]})), RunDir(tmp_path)))
        assert (tmp_path / "summary.json").exists() and (tmp_path / "evaluation.json").exists()
        session = build_session(config("toy_fragile", 3, {"*": ["[1, 2]"]}, retry_errors=True))

        async def interrupted(problem: Problem, budget: Any = None) -> Any:
            raise KeyboardInterrupt

        monkeypatch.setattr(session.loop, "solve", interrupted)
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(run_session(session, RunDir(tmp_path)))
    finally:
        components.benchmarks.unregister("toy_fragile")
    assert not (tmp_path / "summary.json").exists() and not (tmp_path / "evaluation.json").exists()
    assert len(list(read_records(tmp_path))) == 3  # the records stay


def test_a_run_from_python_into_a_directory_another_process_writes_is_refused(tmp_path: Path) -> None:
    """Only the CLI took the run directory's lock: run_session from Python (a notebook resuming a run the
    command line was still writing) appended to the same records.jsonl as the other process."""
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from modulo.runs import RunLock; RunLock(sys.argv[1]).acquire(); "
         "print('held', flush=True); sys.stdin.read()", str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        session = build_session(config("toy", 2, RIGHT))
        with pytest.raises(RunError, match="being written by another modulo process"):
            asyncio.run(run_session(session, RunDir(tmp_path)))
        asyncio.run(session.aclose())
        assert not (tmp_path / "run.json").exists() and not (tmp_path / "records.jsonl").exists()
    finally:
        holder.communicate("", timeout=30)
    result = asyncio.run(run_session(build_session(config("toy", 2, RIGHT)), RunDir(tmp_path)))  # released: runs
    assert result.summary["counts"] == {"certified": 2}


def test_a_problem_that_crashes_after_paid_calls_keeps_its_iterations_and_usage(tmp_path: Path) -> None:
    """An exception the loop does not expect (here a backprompt strategy's bug, after the first paid call)
    ended the problem with an empty record: the money its calls cost was in no record, so neither in
    summary.json's usage nor in a resumed run's spending."""
    with broken_backprompt() as broken:
        cfg = config("toy", 1, {"*": ["[1, 1]"]})
        cfg.backprompt.name = broken
        result = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    [record] = read_records(tmp_path)
    assert record.outcome.value == "error" and record.error == "ValueError: the strategy broke"
    assert len(record.iterations) == 1 and record.iterations[0].plan == [1, 1]
    assert record.usage.calls == 1 and record.usage.cost_usd > 0
    assert result.summary["usage"]["cost_usd"] == record.usage.cost_usd
    assert result.summary["errors"]["count"] == 1


def test_critic_errors_are_counted_in_the_summary_and_said_on_the_console(tmp_path: Path) -> None:
    """A critic that crashes on every plan left no trace outside `modulo show`: the run printed its
    outcomes (exhausted) with no word of the crashes, and summary.json had no count of them."""
    from modulo.cli.console import critic_error_banner

    cfg = config("toy", 2, {"*": ["[2, 3]"]})
    cfg.llm.args["repeat_last"] = True
    cfg.critics = ["format", "toy_sum", "toy_crash"]
    cfg.metacontroller.max_iterations = 2
    result = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    errored = [v for r in read_records(tmp_path) for it in r.iterations for v in it.verdicts if v.error is not None]
    assert errored and {v.critic for v in errored} == {"toy_crash"}
    assert result.summary["counts"] == {"exhausted": 2}  # never certified, and no problem ended in error
    assert result.summary["critic_errors"] == {"toy_crash": len(errored)}
    banner = critic_error_banner(result.summary)
    assert banner is not None and f"{len(errored)} critic verdict(s) were errors (toy_crash {len(errored)})" in banner
    # a resumed run counts the errors of the problems it read back from the records
    again = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path)))
    assert again.state.resumed == 2 and again.summary["critic_errors"] == {"toy_crash": len(errored)}
    # a run whose critics never errored says nothing
    clean = config("toy", 1, {"*": ["[2, 3]"]})
    ok = asyncio.run(run_session(build_session(clean), RunDir(tmp_path / "clean")))
    assert ok.summary["critic_errors"] == {} and critic_error_banner(ok.summary) is None


def test_the_run_files_are_on_disk_before_they_replace_the_old_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """run.json, summary.json, evaluation.json and config.yaml are written to a temporary file, which is put
    on disk (fsync) before it replaces the old file, and the move is put on disk too: a crash never leaves
    an empty run.json, which would make the run's records unresumable."""
    import os
    import stat

    from modulo import runs

    events: list[str] = []
    fsync, replace = os.fsync, os.replace

    def synced(fd: int) -> None:
        mode = os.fstat(fd).st_mode
        events.append("fsync dir" if stat.S_ISDIR(mode) else f"fsync file of {os.fstat(fd).st_size} bytes")
        fsync(fd)

    def moved(src: Any, dst: Any) -> None:
        events.append(f"replace {Path(dst).name}")
        replace(src, dst)

    monkeypatch.setattr(runs.os, "fsync", synced)
    monkeypatch.setattr(runs.os, "replace", moved)
    RunDir(tmp_path).write_json("summary.json", {"status": "complete"})
    size = len((tmp_path / "summary.json").read_bytes())
    assert events == [f"fsync file of {size} bytes", "replace summary.json", "fsync dir"]
    assert not list(tmp_path.glob("*.tmp"))


def _broken_after_a_paid_call(**run: Any) -> ModuloConfig:
    """One toy problem whose backprompt strategy breaks after the first paid call (the cache off): every
    attempt errors. A scripted backend's list of replies is never cached: see tests/llm/test_cache.py."""
    cfg = config("toy", 1, {"*": ["[1, 1]"]}, retry_errors=True, **run)
    cfg.backprompt.name = BROKEN_BACKPROMPT
    return cfg


@pytest.fixture
def broken_strategy() -> Iterator[None]:
    with broken_backprompt():
        yield


def _summary_cost(run_dir: Path) -> float:
    import json

    return float(json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["usage"]["cost_usd"])


def test_a_retried_problem_counts_every_attempts_paid_calls_with_the_cache_off(
    tmp_path: Path, broken_strategy: None
) -> None:
    """run.retry_errors ran an errored problem again; summary.json's cost, and run.max_dollars, counted its last
    record only: three attempts that each paid for a call reported the cost of one."""
    run_dir = tmp_path / "run"
    for _ in range(3):
        asyncio.run(run_session(build_session(_broken_after_a_paid_call()), RunDir(run_dir)))
    records = list(read_records(run_dir))
    assert len(records) == 3 and all(r.outcome.value == "error" and r.usage.cost_usd > 0 for r in records)
    one = records[0].usage.cost_usd
    assert _summary_cost(run_dir) == pytest.approx(3 * one)
    # the report's usage table (and usage.csv) counts every attempt as the summary does, kept in memory or
    # on disk (it read each problem's last record only: the cost of one attempt beside the summary's three)
    from modulo.reports.load import load_run
    from modulo.reports.tables import usage_row

    for on_disk in (False, True):
        assert usage_row(load_run(run_dir, light=True, on_disk=on_disk)).usage.cost_usd == pytest.approx(3 * one)
    # the run's dollar budget counts them too: 2.5 attempts' worth is spent, so the problem is not started again
    cfg = _broken_after_a_paid_call(max_dollars=2.5 * one)
    result = asyncio.run(run_session(build_session(cfg), RunDir(run_dir)))
    last = list(read_records(run_dir))[-1]
    assert last.outcome.value == "skipped" and last.stop_reason == "run_budget"
    assert result.summary["usage"]["cost_usd"] == pytest.approx(3 * one)
