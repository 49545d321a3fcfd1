"""A run directory written by an earlier modulo (run.json format 1, unversioned; tests/fixtures/ABOUT.md)
still reports, shows, views and resumes with the current code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from modulo.errors import RunError
from modulo.runinfo import RUN_INFO_VERSION, UserInfo, parse_run_info, read_run_info
from modulo.runs import read_records
from tests.cli_support import run_main

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "run_format1"
FINISHED = ["calendar-easy-0-0001s", "calendar-easy-0-0000s"]  # the two problems the old run finished


@pytest.fixture
def old_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MODULO_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "oldrun"
    shutil.copytree(FIXTURE, run)
    return run


def test_the_fixture_is_in_the_old_format() -> None:
    info = json.loads((FIXTURE / "run.json").read_text())
    assert info["format"] == 1 and "version" not in info


def test_show_reads_an_old_run(old_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "show", str(old_run), FINISHED[1])
    assert code == 0, err
    assert "failed after 2 iteration(s)" in out and "synth_busy" in out
    assert "note: run.json was written by an earlier modulo (format 1) and read through the migration" in out


@pytest.mark.slow
def test_report_and_view_read_an_old_run(old_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "report", str(old_run))
    assert code == 0, err
    report = (old_run / "report.md").read_text()
    assert "2 of 3 problems finished" in report and "synth/calendar" in report
    assert "oldrun: run.json was written by an earlier modulo (format 1) and read through the migration" in report
    code, _, err = run_main(capsys, "view", str(old_run), "--out", str(old_run / "view.html"))
    assert code == 0, err
    assert FINISHED[0] in (old_run / "view.html").read_text()


@pytest.mark.slow
def test_an_old_run_resumes_where_it_stopped(old_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "resume", str(old_run), "data_dir=/work/shared/data")
    assert code == 0, err
    assert "2 resumed" in out + err
    written = json.loads((old_run / "run.json").read_text())
    assert written["version"] == RUN_INFO_VERSION and "format" not in written  # rewritten in the current version
    assert written["created"] == "2026-11-24T07:02:41+00:00"  # the run keeps its creation time
    records = list(read_records(old_run))
    assert [r.problem_id for r in records[:2]] == FINISHED  # the old records are kept as they were
    assert len(records) == 3 and records[2].problem_id == "calendar-easy-0-0002s"
    summary = json.loads((old_run / "summary.json").read_text())
    assert summary["finished"] == 3 and summary["counts"] == {"failed": 3}
    code, _, err = run_main(capsys, "report", str(old_run))
    assert code == 0, err
    assert "2 of 3 problems finished" not in (old_run / "report.md").read_text()
    assert "read through the migration" not in (old_run / "report.md").read_text()  # run.json is current now


def test_the_old_run_json_reads_as_the_current_version() -> None:
    info = read_run_info(FIXTURE)
    assert info.version == RUN_INFO_VERSION and info.benchmark.name == "synth/calendar"
    assert info.budget.max_iterations == 2 and info.problem_ids[:2] == sorted(FINISHED)
    assert info.user == UserInfo() and info.sandbox is None  # what format-1 code did without those settings
    data = json.loads((FIXTURE / "run.json").read_text())
    data["retired_key"] = {"kept": True}
    assert parse_run_info(data).legacy == {"retired_key": {"kept": True}}  # nothing of an old run is dropped
    assert info.migrated_from == "format 1" and "format 1" in (info.migration_note() or "")
    current = parse_run_info(json.loads(info.to_json()))
    assert current.migrated_from is None and current.migration_note() is None  # written now: nothing to say
    assert info.with_arg_defaults({"n": 3}).migrated_from == "format 1"  # a copy keeps where it was read from


def test_a_run_json_from_a_newer_modulo_is_a_clear_error(old_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((old_run / "run.json").read_text())
    (old_run / "run.json").write_text(json.dumps({**data, "version": RUN_INFO_VERSION + 1}))
    with pytest.raises(RunError, match=r"written by a newer modulo; this one reads versions up to"):
        read_run_info(old_run)
    code, out, err = run_main(capsys, "show", str(old_run), FINISHED[1])
    assert code != 0 and "newer modulo" in out + err and "Traceback" not in out + err


def test_an_argument_a_benchmark_added_at_its_default_is_not_another_configuration() -> None:
    old = read_run_info(FIXTURE)  # recorded before synth gained its multi-turn arguments
    args = {**old.benchmark.args, "hidden": 0, "hide_contradiction": False}
    new = old.model_copy(update={"benchmark": old.benchmark.model_copy(update={"args": args})})
    assert old.differences(new) == ["benchmark"]  # without the benchmark's defaults nothing says they match
    knowing = new.with_arg_defaults({"hidden": 0, "hide_contradiction": False, "n": 50})
    assert old.differences(knowing) == []
    changed = knowing.model_copy(update={"benchmark": old.benchmark.model_copy(update={"args": {**args, "hidden": 2}})})
    assert old.differences(changed) == ["benchmark"]  # a value other than the default is another configuration


@pytest.mark.parametrize(
    "change",
    [
        "metacontroller.stop_after_repeats=1",
        "metacontroller.check_unsolvable=false",
        "metacontroller.max_reply_chars=10",
        "metacontroller.max_plan_items=1",
    ],
)
def test_a_setting_that_decides_outcomes_is_part_of_the_runs_identity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str
) -> None:
    # resumed with another stop rule or format bound, a run would mix problems solved two ways under one config.yaml
    args = ("run", "benchmark=synth/calendar", "benchmark.n=1", "llm=scripted", "run.report=false")
    code, _, err = run_main(capsys, *args, f"run.dir={tmp_path / 'run'}")
    assert code == 0, err
    config = (tmp_path / "run" / "config.yaml").read_text()
    code, out, err = run_main(capsys, *args, f"run.dir={tmp_path / 'run'}", change)
    assert code == 2 and "another configuration" in out + err and "loop" in out + err
    assert (tmp_path / "run" / "config.yaml").read_text() == config
    # a run.json written before the loop's settings were recorded: not compared on them
    info = read_run_info(tmp_path / "run")
    older = info.model_copy(update={"loop": None})
    newer = info.model_copy(update={"loop": info.loop.model_copy(update={"stop_after_repeats": 1})})  # type: ignore[union-attr]
    assert older.differences(newer) == [] and info.differences(newer) == ["loop"]


def test_a_mistyped_run_directory_is_named_not_its_parent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "runs" / "typo"
    (tmp_path / "runs").mkdir()
    with pytest.raises(RunError) as info:
        read_run_info(missing)
    assert str(missing) in str(info.value) and "no such file or directory" in str(info.value)
    code, _, err = run_main(capsys, "show", str(missing), "p1")
    assert code == 2 and f"{missing}: no such file or directory" in err
    with pytest.raises(RunError, match=r"no run\.json; not a run directory"):  # an existing directory: as before
        read_run_info(tmp_path / "runs")
