"""Records that heal (issue 14 item 6): resume cuts an invalid tail, readers name the damaged file and
line, damaged derived files are rebuilt from the records, a full disk is a clear stop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modulo.errors import RunError
from modulo.runinfo import BenchmarkInfo, BudgetInfo, GeneratorInfo, RunInfo
from modulo.runs import RECORDS, RunDir, read_records
from modulo.types import Outcome, ProblemResult

INFO = RunInfo(
    benchmark=BenchmarkInfo(name="toy"),
    generator=GeneratorInfo(name="llm"),
    budget=BudgetInfo(max_iterations=1),
    problem_ids=["a", "b", "c"],
)


def rec(pid: str) -> ProblemResult:
    return ProblemResult(problem_id=pid, benchmark="toy", outcome=Outcome.FAILED, stop_reason="iterations")


def started(tmp_path: Path, *ids: str) -> RunDir:
    rd = RunDir(tmp_path / "run")
    rd.prepare(INFO, "x: 1\n")
    for pid in ids:
        rd.append(rec(pid))
    return rd


def test_a_complete_but_invalid_last_line_is_cut_before_appending(tmp_path: Path) -> None:
    rd = started(tmp_path, "a")
    with rd.records_path.open("a") as fh:
        fh.write('{"problem_id": "b", "outcome": "not-an-outcome"}\n')
    done = RunDir(rd.path).prepare(INFO, "x: 1\n")
    assert set(done) == {"a"}
    RunDir(rd.path).append(rec("b"))
    assert [r.problem_id for r in read_records(rd.path)] == ["a", "b"]  # the next resume reads every line
    assert "not-an-outcome" in (rd.path / (RECORDS + ".damaged")).read_text()


def test_a_record_torn_inside_a_multibyte_character_is_cut(tmp_path: Path) -> None:
    rd = started(tmp_path, "a")
    line = rec("b").model_copy(update={"error": "café ☕"}).model_dump_json().encode()
    cut = line.index("☕".encode()) + 1
    with rd.records_path.open("ab") as fh:
        fh.write(line[:cut])
    assert set(RunDir(rd.path).prepare(INFO, "x: 1\n")) == {"a"}
    assert rd.records_path.read_bytes().endswith(b"\n")


def test_a_complete_record_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    rd = started(tmp_path, "a")
    with rd.records_path.open("a") as fh:
        fh.write(rec("b").model_dump_json())
    assert set(RunDir(rd.path).prepare(INFO, "x: 1\n")) == {"a", "b"}


def test_a_damaged_line_before_the_last_names_the_file_the_line_and_the_fix(tmp_path: Path) -> None:
    rd = started(tmp_path, "a")
    with rd.records_path.open("ab") as fh:
        fh.write(b'{"problem_id": "\xff\xfe"}\n')
    RunDir(rd.path).append(rec("c"))
    with pytest.raises(RunError) as info:
        list(read_records(rd.path))
    message = str(info.value)
    assert str(rd.records_path) in message and "line 2" in message and "not UTF-8" in message
    assert "sed -i '2d'" in message
    with pytest.raises(RunError, match="line 2"):
        RunDir(rd.path).prepare(INFO, "x: 1\n")


@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8", b"[1, 2]", b"{not json"])
def test_a_damaged_run_json_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    rd = started(tmp_path, "a")
    (rd.path / "run.json").write_bytes(content)
    with pytest.raises(RunError, match=r"run\.json is damaged"):
        RunDir(rd.path).prepare(INFO, "x: 1\n")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_stops_with_a_clear_error_after_the_last_complete_record(tmp_path: Path) -> None:
    rd = started(tmp_path, "a")
    kept = rd.records_path.read_bytes()
    rd.records_path.rename(rd.path / "kept.jsonl")
    rd.records_path.symlink_to("/dev/full")
    with pytest.raises(RunError, match="Free space, then resume"):
        rd.append(rec("b"))
    assert (rd.path / "kept.jsonl").read_bytes() == kept


def test_report_and_show_rebuild_from_records_when_summary_or_evaluation_is_damaged(tmp_path: Path) -> None:
    from modulo.reports.load import load_run

    rd = started(tmp_path, "a", "b")
    (rd.path / "run.json").write_text(INFO.to_json())
    (rd.path / "summary.json").write_bytes(b"\xff{broken")
    (rd.path / "evaluation.json").write_text("[]")
    run = load_run(rd.path)
    assert set(run.records) == {"a", "b"} and run.summary is None and run.evaluation is None
    assert any("summary.json is damaged" in n for n in run.notes)
    assert any("evaluation.json is damaged" in n for n in run.notes)


@pytest.mark.slow  # modulo resume in a subprocess, three times
@pytest.mark.parametrize("content", [b"", b"{a: 1}\n", b"\xff\xfe"])
def test_resume_refuses_an_empty_or_damaged_overrides_file(tmp_path: Path, content: bytes) -> None:
    import subprocess
    import sys

    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_bytes(content)
    proc = subprocess.run(
        [sys.executable, "-m", "modulo.cli.main", "resume", str(run_dir)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2 and "overrides are unknown" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == [".hydra"]  # nothing ran, nothing written


def test_report_names_a_non_utf8_run_json(tmp_path: Path) -> None:
    from modulo.reports.load import load_run

    rd = started(tmp_path, "a")
    (rd.path / "run.json").write_bytes(b'{"format": 1, "x": "\xff"}')
    with pytest.raises(RunError, match=r"run\.json: not readable JSON"):
        load_run(rd.path)
