"""Memory shape of a run, checked by counting live objects (never by RSS, never timed).

A benchmark that streams its problems runs with only the in-flight problems, records and iterations
in memory: the counts do not grow with the number of problems. The problem set itself (spooled to
a temporary file) behaves as the in-memory list it replaces.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from modulo import components
from modulo.benchmark import EvalResult
from modulo.build import build_session
from modulo.errors import ConfigError, DataError
from modulo.problems import ProblemSet, Spool, select_problems
from modulo.runner import Finished, run_session
from modulo.runs import RunDir, _json_pieces, read_records
from modulo.types import IterationRecord, PlanJSON, Problem, ProblemResult

from . import toy
from .test_runner import config

pytestmark = pytest.mark.usefixtures("toy_registered")

CONCURRENCY = 2
BUDGET = 3


class StreamingToy(toy.Toy):
    """The toy benchmark handing its problems over one at a time and scoring them one at a time."""

    #: the most Problem / ProblemResult / IterationRecord objects alive at any moment seen by ``watch``
    peak: ClassVar[dict[str, int]] = {}

    def iter_problems(self, split: str) -> Iterator[Problem]:
        for i in range(self.n):
            yield _problem(i)

    def evaluate_stream(self, pairs: Iterable[tuple[Problem, PlanJSON | None]]) -> EvalResult:
        per = []
        for p, plan in pairs:
            watch()
            ok = plan is not None and sum(plan) == p.constraints["target"] and len(set(plan)) == 2
            per.append({"problem_id": p.id, "passed": ok})
        return EvalResult(metrics={"solved": sum(r["passed"] for r in per) / (len(per) or 1)}, per_problem=per)


def _problem(i: int) -> Problem:
    return Problem(
        id=f"toy-{i}",
        benchmark="toy",
        query=f"Pick 2 distinct digits summing to {i + 5}.",
        constraints={"k": 2, "target": i + 5},
    )


#: ids of the objects alive before the run (left by earlier tests in this process): not the run's
_before: set[int] = set()


def _counted() -> Iterator[Any]:
    for obj in gc.get_objects():
        if isinstance(obj, (Problem, ProblemResult, IterationRecord, Finished)):
            yield obj


def watch(*_: Any) -> None:
    gc.collect()
    live = {"Problem": 0, "ProblemResult": 0, "IterationRecord": 0, "Finished": 0}
    for obj in _counted():
        if id(obj) in _before:
            continue
        if isinstance(obj, Problem):
            live["Problem"] += 1
        elif isinstance(obj, ProblemResult):
            live["ProblemResult"] += 1
        elif isinstance(obj, IterationRecord):
            live["IterationRecord"] += 1
        elif isinstance(obj, Finished):
            live["Finished"] += 1
    for k, v in live.items():
        StreamingToy.peak[k] = max(StreamingToy.peak.get(k, 0), v)


def _baseline() -> None:
    gc.collect()
    _before.clear()
    _before.update(id(obj) for obj in _counted())


def _run(tmp_path: Path, n: int) -> dict[str, int]:
    StreamingToy.peak = {}
    _baseline()
    components.benchmarks.register("toy", StreamingToy, replace=True)  # the toy's critics apply
    try:
        # every reply is wrong (sum 3): each problem uses its whole budget
        cfg = config("toy", n, {"*": ["[1, 2]", "[0, 3]", "[3, 0]"]}, concurrency=CONCURRENCY)
        cfg.metacontroller.max_iterations = BUDGET
        session = build_session(cfg)
        assert session.problems.spooled_to_disk
        result = asyncio.run(run_session(session, RunDir(tmp_path / f"run-{n}"), progress=watch))
    finally:
        components.benchmarks.register("toy", toy.Toy, replace=True)
    assert result.state.done == n and result.summary["iterations"] == n * BUDGET
    assert [r["problem_id"] for r in (result.evaluation or {})["per_problem"]] == [f"toy-{i}" for i in range(n)]
    assert len(list(read_records(tmp_path / f"run-{n}"))) == n
    return dict(StreamingToy.peak)


@pytest.mark.slow  # counts every live object at each step
def test_live_problems_and_records_do_not_grow_with_the_number_of_problems(tmp_path: Path) -> None:
    # in flight: a problem per worker and its records, plus what a critic's worker thread may still hold
    # of the problem before (released at its next job); the bound does not depend on the number of
    # problems, which is well above it in the larger run
    slack = 2 * CONCURRENCY + 1
    bound = {"Problem": slack + 1, "ProblemResult": slack, "IterationRecord": slack * BUDGET}
    for n in (6, 40):
        peak = _run(tmp_path, n)
        assert all(peak[k] <= bound[k] for k in bound), (n, peak, bound)
        assert peak["Problem"] >= 1 and peak["IterationRecord"] >= 1, peak  # the counting sees them


@pytest.mark.slow
def test_resume_keeps_digests_not_records(tmp_path: Path) -> None:
    _run(tmp_path, 12)
    components.benchmarks.register("toy", StreamingToy, replace=True)  # the toy's critics apply
    try:
        cfg = config("toy", 12, {"*": ["[1, 2]", "[0, 3]", "[3, 0]"]}, concurrency=CONCURRENCY)
        cfg.metacontroller.max_iterations = BUDGET
        StreamingToy.peak = {}
        _baseline()
        result = asyncio.run(run_session(build_session(cfg), RunDir(tmp_path / "run-12"), progress=watch))
    finally:
        components.benchmarks.register("toy", toy.Toy, replace=True)
    assert result.state.resumed == 12 and result.summary["iterations"] == 12 * BUDGET
    assert StreamingToy.peak["ProblemResult"] == 0 and StreamingToy.peak["IterationRecord"] == 0


# -- the problem set ------------------------------------------------------------------------------


def _problems(n: int) -> list[Problem]:
    return [_problem(i) for i in range(n)]


@pytest.mark.parametrize("spool", [False, True])
def test_problem_set_is_the_selected_list(spool: bool) -> None:
    every = _problems(10)
    whole = select_problems(iter(every), "toy/dev", spool=spool)
    assert whole.spooled_to_disk is spool
    assert list(whole) == every and list(whole) == every  # a second pass reads the same
    assert whole.ids == [p.id for p in every] and len(whole) == 10
    assert whole[3] == every[3] and whole[-1] == every[-1] and whole[2:4] == every[2:4]
    assert whole.get("toy-7") == every[7] and "toy-7" in whole and every[7] in whole and "nope" not in whole
    with pytest.raises(IndexError):
        whole[10]
    first = select_problems(iter(every), "toy/dev", limit=4, spool=spool)
    assert list(first) == every[:4]
    chosen = select_problems(iter(every), "toy/dev", ids=["toy-5", "toy-1", "toy-5"], spool=spool)
    assert chosen.ids == ["toy-5", "toy-1"] and list(chosen) == [every[5], every[1]]
    assert select_problems(iter(every), "toy/dev", ids=["toy-5", "toy-1"], limit=1, spool=spool).ids == ["toy-5"]
    # ids in the stream's order: the caller's strings are kept (a report's run.json ids), not a copy of each
    wanted = ["".join(("toy-", str(i))) for i in (1, 5)]
    kept = select_problems(iter(every), "toy/dev", ids=wanted, spool=spool)
    assert kept.ids == wanted and all(a is b for a, b in zip(kept.ids, wanted, strict=True))


def test_problem_set_selection_errors() -> None:
    every = _problems(5)
    with pytest.raises(DataError, match="duplicate problem ids \\(toy-2\\)"):
        select_problems(iter([*every, every[2]]), "toy/dev", spool=True)
    with pytest.raises(ConfigError, match="toy-9"):
        select_problems(iter(every), "toy/dev", ids=["toy-9"], spool=True)
    with pytest.raises(ConfigError, match="at least 0"):
        select_problems(iter(every), "toy/dev", limit=-1)


def test_limit_stops_reading_the_stream() -> None:
    taken: list[int] = []

    def stream() -> Iterator[Problem]:
        for i in range(1000):
            taken.append(i)
            yield _problem(i)

    assert len(select_problems(stream(), "toy/dev", limit=3, spool=True)) == 3
    assert len(taken) <= 4


def test_a_benchmark_without_a_stream_keeps_its_list() -> None:
    bench = toy.Toy(n=4)
    chosen = bench.problem_set("dev", limit=2)
    assert isinstance(chosen, ProblemSet) and not chosen.spooled_to_disk and chosen.ids == ["toy-0", "toy-1"]
    assert StreamingToy(n=4).problem_set("dev", ids=["toy-3"]).spooled_to_disk


# -- values spooled to disk -----------------------------------------------------------------------


@pytest.mark.parametrize("in_memory", [0, 500, 1 << 18])  # on disk at once, from the middle on, never
def test_spool_is_a_list_on_disk(in_memory: int) -> None:
    rows = [{"problem_id": f"p{i}", "passed": i % 2 == 0, "plan": [i, None, "x" * i]} for i in range(50)]
    spool: Spool[dict[str, Any]] = Spool(in_memory=in_memory)
    assert [spool.append(r) for r in rows] == list(range(50))
    assert len(spool) == 50 and list(spool) == rows and spool == rows
    assert spool[0] == rows[0] and spool[-1] == rows[-1] and spool[3:6] == rows[3:6]
    with pytest.raises(IndexError):
        spool[50]
    spool[1]["passed"] = "changed"  # a value read back is a copy
    assert spool[1] == rows[1]
    passing = iter(spool)  # a pass reads what was there when it began, appends meanwhile included later
    assert next(passing) == rows[0]
    spool.append({"late": True})
    assert len(list(passing)) == 49 and spool[-1] == {"late": True}
    assert (spool._file is None) is (in_memory > 2000)  # 50 rows: about 2 KB pickled
    spool.close()


def test_a_spool_is_written_to_json_as_the_list_it_holds() -> None:
    rows = [{"problem_id": f"p{i}", "passed": bool(i % 3)} for i in range(7)]
    data = {"metrics": {"x": 0.5}, "per_problem": Spool(rows), "empty": Spool(), "tables": {}}
    text = "".join(_json_pieces(data, size=16))
    assert text == json.dumps({**data, "per_problem": rows, "empty": []}, indent=1)


@pytest.mark.slow  # counts every live object at each step
def test_the_runner_keeps_no_digest_in_memory(tmp_path: Path) -> None:
    """Finished problems' digests go to disk as they are made: only those of the problems in hand are alive
    (just finished, or being read back for the evaluation), never one per finished problem."""
    peak = _run(tmp_path, 8)["Finished"]
    assert peak <= CONCURRENCY + 1, peak
