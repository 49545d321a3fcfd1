"""Reports read records light (no prompts, replies, backprompts, verdict feedback): same report as in full."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from modulo.errors import RunError
from modulo.problems import Spool
from modulo.reports import ReportOptions, build_report, load_run
from modulo.reports import load as load_module
from modulo.reports import report as report_module
from modulo.reports.load import (
    LIGHT_DROPPED_ITERATION_KEYS,
    LIGHT_DROPPED_VERDICT_KEYS,
    RecordStore,
    iter_records,
    load_runs,
    read_records,
)
from modulo.reports.show import build_story, render_plain
from modulo.types import ProblemResult

OPTIONS = ReportOptions(n_resamples=500, use_cache=False)


def _texts(out: Path) -> dict[str, str]:
    """Every text file the report wrote (figures are images: compared through their data elsewhere)."""
    return {
        str(p.relative_to(out)): p.read_text(encoding="utf-8")
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.suffix in (".md", ".csv", ".json", ".txt", ".tex")
    }


def test_report_from_light_records_equals_the_full_load(
    tmp_path: Path, make_run: Any, run_a_plans: Any, run_b_plans: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(tmp_path / "runs" / "a", run_a_plans)
    make_run(tmp_path / "runs" / "b", run_b_plans, evaluate=False, model="other-model")
    light = build_report([tmp_path / "runs"], ReportOptions(**{**OPTIONS.__dict__, "out": tmp_path / "light"}))
    assert all(
        not it.prompt and it.raw_reply is None and it.backprompt is None
        for run in light.runs
        for rec in run.records.values()
        for it in rec.iterations
    ), "the report did not read light records"

    full_loader = load_runs

    def load_full(paths: Any, **kwargs: Any) -> Any:  # full records, in memory
        return full_loader(paths, **{**kwargs, "light": False, "on_disk": False})

    monkeypatch.setattr(report_module, "load_runs", load_full)
    full = build_report([tmp_path / "runs"], ReportOptions(**{**OPTIONS.__dict__, "out": tmp_path / "full"}))
    assert any(it.prompt for run in full.runs for rec in run.records.values() for it in rec.iterations)
    assert all(isinstance(run.records, RecordStore) for run in light.runs)
    assert not any(isinstance(run.records, RecordStore) for run in full.runs)
    assert _same_out(light.text, tmp_path / "light") == _same_out(full.text, tmp_path / "full")
    assert _same_out(light.markdown, tmp_path / "light") == _same_out(full.markdown, tmp_path / "full")
    light_files, full_files = _texts(tmp_path / "light"), _texts(tmp_path / "full")
    assert light_files.keys() == full_files.keys() and light_files
    for name, text in light_files.items():
        assert _same_out(text, tmp_path / "light") == _same_out(full_files[name], tmp_path / "full"), name


def _same_out(text: str, out: Path) -> str:
    """The text with the output folder and the generation time (the two reports' only differences) masked."""
    return re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated T", text.replace(str(out), "OUT"))


def test_light_records_keep_what_reports_read_and_share_equal_values(
    tmp_path: Path, make_run: Any, run_a_plans: Any
) -> None:
    path = make_run(tmp_path / "a", run_a_plans)
    full = load_run(path).records
    light = load_run(path, light=True).records
    assert list(light) == list(full)
    for pid, rec in full.items():
        lr = light[pid]
        assert (lr.outcome, lr.best_plan, lr.usage, lr.metadata, lr.error) == (
            rec.outcome,
            rec.best_plan,
            rec.usage,
            rec.metadata,
            rec.error,
        )
        assert [(it.plan, it.passed_count, it.usage) for it in lr.iterations] == [
            (it.plan, it.passed_count, it.usage) for it in rec.iterations
        ]
        assert [[(v.critic, v.group, v.accepts, v.error) for v in it.verdicts] for it in lr.iterations] == [
            [(v.critic, v.group, v.accepts, v.error) for v in it.verdicts] for it in rec.iterations
        ]
        for it in lr.iterations:
            dumped = it.model_dump()
            assert all(not dumped[k] for k in LIGHT_DROPPED_ITERATION_KEYS if k in dumped)
            assert all(not v.feedback and not v.details and v.hint is None for v in it.verdicts)
    # equal verdicts are one object: memory grows with distinct verdicts, not with iterations
    verdicts = [v for rec in light.values() for it in rec.iterations for v in it.verdicts]
    assert len({id(v) for v in verdicts}) == len({(v.critic, v.passed, v.applicable, v.error) for v in verdicts})
    assert "feedback" in LIGHT_DROPPED_VERDICT_KEYS


def test_show_reads_its_one_record_in_full(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    path = make_run(tmp_path / "a", run_a_plans)
    run = load_run(path, only={"p3"})
    run.name = run.run_id
    assert list(run.records) == ["p3"]
    rec: ProblemResult = run.records["p3"]
    assert rec == load_run(path).records["p3"]
    text = render_plain(build_story(run, "p3"))
    assert "p3" in text
    with pytest.raises(Exception, match="p9"):
        build_story(run, "p9")


def test_light_iterations_share_field_sets_empty_lists_and_short_strings(
    tmp_path: Path, make_run: Any, run_a_plans: Any
) -> None:
    """What equal light iterations hold is one object, not one per iteration (the report's memory per
    problem); records read in full keep their own."""
    import tracemalloc

    path = make_run(tmp_path / "a", run_a_plans)
    tracemalloc.start()
    try:
        light = load_run(path, light=True).records
        light_bytes = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        full = load_run(path).records
        full_bytes = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    its = [it for rec in light.values() for it in rec.iterations]
    assert len(its) > 2
    assert len({id(it.__pydantic_fields_set__) for it in its}) < len(its)
    assert len({id(it.calls) for it in its}) == 1 and its[0].calls == []
    assert len({id(it.act) for it in its}) == len({it.act for it in its})
    values = [v for it in its if isinstance(it.plan, dict) for v in it.plan.values() if isinstance(v, str)]
    assert len({id(v) for v in values}) == len(set(values))
    full_its = [it for rec in full.values() for it in rec.iterations]
    assert len({id(it.__pydantic_fields_set__) for it in full_its}) == len(full_its)
    assert light_bytes < 0.5 * full_bytes, (light_bytes, full_bytes)


def test_records_on_disk_read_as_the_records_in_memory(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    path = make_run(tmp_path / "a", run_a_plans) / "records.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines, lines[0]]))  # the first problem recorded again: its last record counts
    notes_mem: list[str] = []
    notes_disk: list[str] = []
    in_memory = read_records(path, notes_mem, light=True)
    on_disk = RecordStore(iter_records(path, notes_disk, light=True), notes_disk)
    assert list(on_disk) == list(in_memory) and len(on_disk) == len(in_memory) and notes_disk == notes_mem
    assert notes_disk and "recorded more than once" in notes_disk[0]
    for pid, rec in in_memory.items():
        assert pid in on_disk and on_disk[pid] == rec and on_disk.outcome(pid) == rec.outcome
    assert "nope" not in on_disk and on_disk.get("nope") is None
    on_disk.close()
    # keyed by the run's own id strings where given (one string per problem held, not one more per record)
    ids = ["".join(pid) for pid in in_memory]  # equal strings, other objects
    shared = RecordStore(iter_records(path, [], light=True), [], ids)
    assert list(shared) == list(in_memory) and all(a is b for a, b in zip(shared, ids, strict=True))
    shared.close()


@pytest.mark.parametrize("chunk", [3, 64, 1 << 20])
def test_evaluation_rows_read_one_at_a_time_equal_the_whole_file(tmp_path: Path, chunk: int, monkeypatch: Any) -> None:
    evaluation = {
        "metrics": {"success": 0.25, "big": 12345678901234},
        "per_problem": [{"problem_id": f"p{i}", "passed": i % 4 == 0, "note": 'a "quoted" é' * i} for i in range(40)],
        "tables": {"per_level": [{"level": "easy", "n": 40}]},
        "excluded": {"problem_ids": ["x"], "reason": "r"},
    }
    init = load_module._JSONStream.__init__
    monkeypatch.setattr(load_module._JSONStream, "__init__", lambda self, fh: init(self, fh, chunk))
    for indent in (None, 1):
        path = tmp_path / "evaluation.json"
        path.write_text(json.dumps(evaluation, indent=indent), encoding="utf-8")
        read = load_module._read_json_rows(path)
        assert read is not None and isinstance(read["per_problem"], Spool)
        assert {**read, "per_problem": list(read["per_problem"])} == evaluation
    path.write_text('{"metrics": {}, "per_problem": [{"problem_id": "p0"},', encoding="utf-8")  # cut short
    with pytest.raises(RunError, match="not readable JSON"):
        load_module._read_json_rows(path)
