"""First contact (issue 11): a typo is refused with a did-you-mean before anything runs, a bind
failure leaves no run directory, every --help works, and a run with errored problems exits non-zero
with the cause first."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import click
import pytest

from modulo.cli.main import cli
from tests.cli_support import run_main


def test_a_misspelled_added_key_is_refused_with_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "check", "+metacontroler.max_iterations=3")
    assert code == 2
    assert "unknown configuration key 'metacontroler'" in err and "'metacontroller'" in err


def test_a_misspelled_key_inside_a_section_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "check", "+run.concurency=2")
    assert code == 2
    assert "'run.concurency'" in err and "'concurrency'" in err


def test_a_misspelled_key_without_plus_is_refused_with_a_suggestion_and_leaves_no_run_dir(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Hydra's own message here says to add the key with '+' (then refused too), in its own format
    target = tmp_path / "runs" / "typo"
    code, _, err = run_main(capsys, "run", "metacontroller.max_iteration=3", f"run.dir={target}")
    assert code == 2
    assert err.startswith("error: ") and "'metacontroller.max_iteration'" in err and "'max_iterations'" in err
    assert "+metacontroller" not in err
    assert not target.exists()
    code, _, err = run_main(capsys, "check", "metacontroler.max_iterations=3")
    assert code == 2 and "unknown configuration key 'metacontroler'" in err and "'metacontroller'" in err
    # free-form parts are not checked here: the benchmark's arguments, llm.args
    code, _, err = run_main(capsys, "check", "benchmark=synth/calendar", "llm=scripted", "benchmark.n=3")
    assert code == 0, err


def test_a_value_hydra_refuses_leaves_no_run_dir(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "runs" / "bad"
    code, _, _ = run_main(capsys, "run", "llm=scripted", "metacontroller.max_iterations=abc", f"run.dir={target}")
    assert code == 2
    assert not target.exists()
    kept = tmp_path / "kept"  # a directory that was there before is left alone
    kept.mkdir()
    code, _, _ = run_main(capsys, "run", "llm=scripted", "metacontroller.max_iterations=abc", f"run.dir={kept}")
    assert code == 2 and kept.is_dir()


def test_an_unknown_benchmark_lists_every_registered_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "check", "benchmark=travelplaner")
    assert code == 2
    assert "Did you mean 'travelplanner'" in err
    for name in ("natural_plan/trip", "natural_plan/meeting", "natural_plan/calendar", "synth/calendar", "synth/trip"):
        assert name in err


def test_an_unknown_group_option_is_refused_with_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "check", "llm=opnai")
    assert code == 2
    assert "Did you mean 'openai'" in err and "vllm" in err


def test_a_generator_that_cannot_serve_the_benchmark_is_refused_and_leaves_no_run_dir(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_main(capsys, "check", "generator=greedy", "benchmark=synth/calendar")
    assert code == 2 and "generator 'greedy' plans only for travelplanner" in err
    target = tmp_path / "runs" / "bad"
    code, _, err = run_main(capsys, "run", "generator=greedy", "benchmark=synth/calendar", f"hydra.run.dir={target}")
    assert code == 2 and "plans only for travelplanner" in err
    assert not target.exists()


def test_a_missing_launcher_plugin_names_the_pip_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def no_ray(name: str, *args: Any) -> Any:
        return None if name.startswith("hydra_plugins.hydra_ray") else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_ray)
    code, _, err = run_main(capsys, "run", "-m", "hydra/launcher=ray_local", "generator=greedy")
    assert code == 2
    assert 'pip install -e ".[ray]"' in err


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, sub in group.commands.items():
        found += _commands(sub, (*path, name)) if isinstance(sub, click.Group) else [(*path, name)]
    return found


@pytest.mark.parametrize("path", _commands(cli), ids=lambda p: " ".join(p) or "modulo")
def test_every_subcommand_help_exits_zero(capsys: pytest.CaptureFixture[str], path: tuple[str, ...]) -> None:
    code, out, err = run_main(capsys, *path, "--help")
    assert code == 0, err
    assert out.strip(), "no help text"


def test_errored_problems_make_the_run_exit_nonzero_with_the_cause_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    code, out, err = run_main(
        capsys, "run", "llm=vllm", "llm.base_url=http://127.0.0.1:9/v1", "llm.max_retries=0", "benchmark.n=2",
        f"run.dir={run_dir}", "run.report=false", "cache.mode=off",
    )  # fmt: skip
    assert code == 1
    first = err.strip().splitlines()[0]
    assert first.startswith("errors: 2 of 2 problems ended in error"), err
    assert "connection" in first.lower()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counts"]["error"] == 2


def test_a_sweep_names_its_failed_jobs_and_exits_nonzero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_main(
        capsys, "run", "-m", "llm=vllm", "llm.base_url=http://127.0.0.1:9/v1", "llm.max_retries=0", "benchmark.n=1",
        "run.report=false", "cache.mode=off", "metacontroller.max_iterations=1,2", f"hydra.sweep.dir={tmp_path}",
    )  # fmt: skip
    assert code == 1
    assert "sweep: 2 of 2 jobs failed" in err
    assert "metacontroller.max_iterations=1" in err and "metacontroller.max_iterations=2" in err


def test_a_sweep_job_that_cannot_start_is_named_at_the_end_without_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_main(
        capsys, "run", "-m", "benchmark=synth/calendar,travelplanner", "generator=greedy", "benchmark.limit=1",
        "run.report=false", f"hydra.sweep.dir={tmp_path}",
    )  # fmt: skip
    assert code == 1
    assert "Traceback" not in err and "Error executing job" not in err
    assert "sweep: 1 of 2 jobs failed" in err
    assert "benchmark=synth/calendar generator=greedy" in err and "plans only for travelplanner" in err
    assert (tmp_path / "1" / "records.jsonl").is_file()  # the other job ran
    assert not (tmp_path / "0").exists() and f"{tmp_path / '0'}" not in err  # the refused job left nothing


def test_a_sweep_over_presets_that_collapse_names_the_duplicate_jobs_before_it_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from modulo.cli.hydra_app import duplicate_critic_jobs, warn_duplicate_jobs
    from modulo.resources import resource_dir

    conf = resource_dir("conf")
    # synth/calendar has format and hard critics only: [Hard] is [All], [Common] is [Json]
    argv = ["-m", "critics=all,common,hard,json", "benchmark=synth/calendar"]
    assert duplicate_critic_jobs(argv, conf) == [["all", "hard"], ["common", "json"]]
    warn_duplicate_jobs(argv, conf)
    err = capsys.readouterr().err
    assert "critics=all, critics=hard select the same critics" in err and "duplicates" in err
    # on TravelPlanner the four presets differ
    assert duplicate_critic_jobs(["-m", "critics=all,common,hard,json", "benchmark=travelplanner"], conf) == []


def test_the_console_names_skipped_problems_as_skipped_not_errored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_main(
        capsys, "run", "benchmark=synth/calendar", "benchmark.n=4", "llm=scripted", "run.concurrency=1",
        "llm.price_input_per_mtok=1000", "llm.price_output_per_mtok=1000", "run.max_dollars=0.01",
        f"run.dir={tmp_path / 'run'}", "run.report=false", "cache.mode=off",
    )  # fmt: skip
    assert code == 0
    flat = " ".join(out.split())
    assert "on the same 1 problems (3 skipped (never started) left out)" in flat, out
    assert "errored" not in flat


def test_the_override_suggested_for_a_per_critic_hints_argument_works(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "check", "llm=scripted", "+critic_args.synth_busy.hints=true")
    assert code == 2 and "hints are a feedback level now" in err
    suggested = err.split(" or ", 1)[1].split(" (this critic alone)")[0]
    assert suggested.startswith("+critic_args.synth_busy.feedback="), err
    code, _, err = run_main(capsys, "check", "llm=scripted", suggested)
    assert code == 0, err


def test_an_interrupted_sweep_says_how_to_finish_every_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modulo.cli import console, hydra_app

    sweep = tmp_path / "sweep"
    code, _, err = run_main(
        capsys, "run", "-m", "benchmark=travelplanner", "generator=greedy", "benchmark.limit=1,2",
        "run.report=false", f"hydra.sweep.dir={sweep}",
    )  # fmt: skip
    assert code == 0, err
    again = hydra_app.sweep_command(sweep)
    assert again == (
        "modulo run -m benchmark=travelplanner generator=greedy benchmark.limit=1,2 run.report=false "
        f"hydra.sweep.dir={sweep}"
    )
    # resuming the sweep root (not a run) names both ways on
    code, _, err = run_main(capsys, "resume", str(sweep))
    assert code == 2 and "is a sweep, not a run" in err and again in " ".join(err.split())
    # Ctrl-C inside a sweep's job: resuming that job alone would leave the jobs not started out
    monkeypatch.setattr(hydra_app, "current_sweep_dir", lambda: sweep)
    with pytest.raises(console.Interrupted):
        console.interrupted(sweep / "0", "SIGINT")
    err = " ".join(capsys.readouterr().err.split())
    assert f"modulo resume {sweep / '0'}" in err
    assert f"finish the whole sweep (this job and the ones not started) with: {again}" in err


def test_a_critic_timeout_for_a_critic_that_does_not_run_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # a typo in the critic's name would leave the default deadline in force, silently
    args = ("check", "benchmark=synth/calendar", "llm=scripted", "benchmark.n=1")
    code, _, err = run_main(capsys, *args, "+metacontroller.critic_timeouts={synth_bussy: 5}")
    assert code == 2
    assert "metacontroller.critic_timeouts names ['synth_bussy']" in err and "synth_busy" in err
    code, _, err = run_main(capsys, *args, "+metacontroller.critic_timeouts={synth_busy: 5}")
    assert code == 0, err


def test_a_misspelt_critic_mode_is_refused_where_no_critic_reads_it(capsys: pytest.CaptureFixture[str]) -> None:
    # synth/calendar's critics declare no mode: 'offical' reached none of them and run.json recorded it as the mode
    code, _, err = run_main(capsys, "check", "benchmark=synth/calendar", "llm=scripted", "critic_options.mode=offical")
    assert code == 2 and "critic_options.mode must be one of strict, official, not 'offical'" in err


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("llm.temperature=-1", "llm.temperature must be at least 0.0"),
        ("llm.max_tokens=0", "llm.max_tokens must be at least 1"),
        ("llm.backoff_base_s=-1", "llm.backoff_base_s must be at least 0.0"),  # was taken as 0: no backoff
        ("metacontroller.critic_timeout_s=-1", "metacontroller.critic_timeout_s must be more than 0.0"),
        ("+metacontroller.critic_timeouts={synth_busy: 0}", "metacontroller.critic_timeouts.synth_busy must be more"),
    ],
)
def test_a_value_that_cannot_mean_what_it_says_is_refused_at_start(
    capsys: pytest.CaptureFixture[str], override: str, said: str
) -> None:
    # each reached a provider's 400, every problem's run time or a silent clamp instead
    code, _, err = run_main(capsys, "check", "benchmark=synth/calendar", "llm=scripted", override)
    assert code == 2 and said in err


@pytest.mark.parametrize("override", ["benchmark.limit=0", "benchmark.n=0"])
def test_a_run_that_selects_no_problem_is_refused_and_leaves_no_run_dir(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, override: str
) -> None:
    # it ran nothing, exited 0 and wrote summary.json with status "complete" and an empty table
    target = tmp_path / "run"
    code, _, err = run_main(capsys, "run", "benchmark=synth/calendar", "llm=scripted", override, f"run.dir={target}")
    assert code == 2 and ("benchmark.limit must be at least 1" in err or "no problems selected" in err)
    assert not target.exists()
