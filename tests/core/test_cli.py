"""The command line, in process: help, listing, binding errors, a scripted run, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modulo.runs import read_records
from tests.cli_support import invoke

pytestmark = pytest.mark.usefixtures("toy_registered")


def toy_args(tmp_path: Path, script: object, *extra: str) -> list[str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    run_dir = tmp_path / "run"
    return [
        "benchmark=custom",
        "benchmark.name=toy",
        "benchmark.split=dev",
        "+benchmark.n=2",
        "llm=scripted",
        f"llm.script={path}",
        "reformulator=none",
        "cache.mode=off",
        f"run.dir={run_dir}",
        f"hydra.run.dir={run_dir}",
        "run.progress=false",
        *extra,
    ]


def test_help_and_listing() -> None:
    code, out = invoke("--help")
    assert code == 0 and "run" in out and "critics" in out
    code, out = invoke("critics", "list", "--names")
    assert code == 0 and "format" in out.split() and "toy_sum" in out.split()
    code, out = invoke("list", "backprompts")
    assert code == 0 and "grouped" in out and "history" in out


def test_unknown_critic_fails_before_any_call_with_did_you_mean(tmp_path: Path) -> None:
    code, out = invoke("run", *toy_args(tmp_path, ["[2, 3]"], "critics=[format,toy_summ]"))
    assert code == 2
    assert "unknown critic 'toy_summ'" in out and "Did you mean 'toy_sum'" in out
    assert not (tmp_path / "run" / "records.jsonl").exists()


def test_unknown_argument_and_config_typo_fail_at_start(tmp_path: Path) -> None:
    code, out = invoke("check", *toy_args(tmp_path, ["[2, 3]"], "backprompt=history", "+backprompt.args.kk=2"))
    assert code == 2 and "'kk' (did you mean 'k'?)" in out
    code, out = invoke("check", *toy_args(tmp_path, ["[2, 3]"], "metacontroller.max_iteration=3"))
    assert code != 0 and "max_iteration" in out


@pytest.mark.slow  # a whole scripted run and its report
def test_scripted_run_iterates_and_records_the_backprompts(tmp_path: Path) -> None:
    script = {"toy-0": ["[1, 1]", "[1, 3]", "[2, 3]"], "toy-1": ["[3, 3]"] * 4}
    code, out = invoke("run", *toy_args(tmp_path, script, "critics=all", "metacontroller.max_iterations=4"))
    assert code == 0, out
    records = {r.problem_id: r for r in read_records(tmp_path / "run")}
    r0 = records["toy-0"]
    assert r0.outcome.value == "certified" and len(r0.iterations) == 3
    for before, after in zip(r0.iterations, r0.iterations[1:], strict=False):
        assert before.backprompt and before.backprompt == after.prompt[-1].content
        assert before.backprompt == after.calls[0].messages[-1].content
    assert "The numbers sum to 2, not 5." in (r0.iterations[0].backprompt or "")
    assert records["toy-1"].outcome.value == "exhausted"
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["critics"] == ["format", "toy_distinct", "toy_sum"] and info["templates"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"] == {"certified": 1, "exhausted": 1}
    assert "certified" in out


@pytest.mark.slow
def test_rerun_resumes_without_new_calls(tmp_path: Path) -> None:
    script = {"toy-0": ["[2, 3]"], "toy-1": ["[2, 4]"]}
    args = toy_args(tmp_path, script, "metacontroller.max_iterations=2")
    invoke("run", *args)
    n1 = len(list(read_records(tmp_path / "run")))
    code, out = invoke("run", *args)
    assert code == 0 and "2 resumed" in out
    assert len(list(read_records(tmp_path / "run"))) == n1  # nothing re-run, nothing appended


@pytest.mark.slow
def test_rerun_with_another_config_into_the_same_dir_is_refused(tmp_path: Path) -> None:
    invoke("run", *toy_args(tmp_path, {"*": ["[2, 3]"]}))
    code, out = invoke("run", *toy_args(tmp_path, {"*": ["[2, 3]"]}, "critics=json"))
    assert code == 2 and "another configuration" in out and "critics" in out
