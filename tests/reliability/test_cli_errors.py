"""Broken data and configuration typos, through the real command line: a clear error, no traceback.

The broken-data cases run ``modulo check`` as its own process (a child of a fork server, so that it
starts in milliseconds): a missing data directory, malformed rows of TravelPlanner, NATURAL PLAN and
synthesized-problem files. The typos in keys, values, types, group options and names run the same
``modulo check``/``modulo run`` command line in process (its exit code and everything it prints), as
the fast lane's other CLI tests do: starting the fork server costs more than all of them together.
No LLM is called (the LLM points at a closed port on 127.0.0.1).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from modulo.testing.drills import Launcher, benchmark_override

from ..cli_support import invoke

NO_LLM = ["llm=openai", "llm.base_url=http://127.0.0.1:9/v1", "reformulator=none", "generator.prompt=json"]


@pytest.fixture(scope="module")
def launcher() -> Iterator[Launcher]:
    launch = Launcher(
        fork=True,
        preload=["critics.travelplanner.benchmark", "critics.natural_plan.benchmark", "critics.synth.benchmark"],
    )
    yield launch
    launch.close()


def modulo(launcher: Launcher | None, tmp: Path, *args: str) -> tuple[int, str]:
    """``modulo ARGS``: (exit code, output), as a child of the fork server, or in process without one."""
    if launcher is None:
        return invoke(*args, f"hydra.run.dir={tmp / 'hydra'}")
    log = tmp / f"out-{len(list(tmp.glob('out-*')))}.log"
    if launcher.fork is None:  # pragma: no cover - the fixture always forks
        raise AssertionError
    launcher.fork.start([*args, f"hydra.run.dir={tmp / 'hydra'}"], log)
    code = launcher.fork.wait()
    return code, log.read_text(errors="replace")


def clean_error(code: int, out: str, *fragments: str) -> None:
    assert code != 0, out
    assert "Traceback" not in out, out
    for fragment in fragments:
        assert fragment in out, (fragment, out[-2000:])


@pytest.mark.slow
def test_missing_data_directory(launcher: Launcher, tmp_path: Path) -> None:
    code, out = modulo(launcher, tmp_path, "check", "benchmark=travelplanner", "data_dir=/nonexistent/data", *NO_LLM)
    clean_error(code, out, "DataError", "/nonexistent/data/travelplanner", "MODULO_DATA_DIR")


@pytest.mark.slow  # whole modulo runs in subprocesses over a copied database
def test_malformed_travelplanner_rows(launcher: Launcher, tmp_path: Path, data_dir: Path) -> None:
    rows = (data_dir / "travelplanner" / "validation.jsonl").read_text().splitlines()[:3]
    bad = tmp_path / "data" / "travelplanner"
    bad.mkdir(parents=True)
    (bad / "database").symlink_to(data_dir / "travelplanner" / "database")
    (bad / "validation.jsonl").write_text("\n".join([*rows, '{"org": "X", "days": "three"', *rows]) + "\n")
    code, out = modulo(
        launcher, tmp_path, "check", "benchmark=travelplanner", "benchmark.split=validation",
        f"data_dir={tmp_path / 'data'}", *NO_LLM,
    )  # fmt: skip
    clean_error(code, out, "DataError", "line 4", "not valid JSON")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "breakage"),
    [("calendar", "cut"), ("meeting", "types"), ("trip", "types")],
)
def test_malformed_natural_plan_instances(
    launcher: Launcher, tmp_path: Path, data_dir: Path, task: str, breakage: str
) -> None:
    name = {"calendar": "calendar_scheduling", "meeting": "meeting_planning", "trip": "trip_planning"}[task]
    src = data_dir / "natural_plan" / "subsets_100"
    dst = tmp_path / "data" / "natural_plan" / "subsets_100"
    dst.mkdir(parents=True)
    for f in src.glob(f"{name}_100*.json"):
        (dst / f.name).write_text(f.read_text())
    target = dst / f"{name}_100.json"
    if breakage == "cut":
        text = target.read_text()
        target.write_text(text[: len(text) // 2])
        expected = ["DataError", "not valid JSON"]
    else:
        data = json.loads(target.read_text())
        key = next(iter(data))
        data[key] = {**data[key], "num_people": "two", "num_cities": None, "constraints": [[1]], "durations": 5}
        target.write_text(json.dumps(data))
        expected = ["DataError", key]
    code, out = modulo(
        launcher, tmp_path, "check", *benchmark_override(f"natural_plan/{task}"), "benchmark.split=subset100",
        f"data_dir={tmp_path / 'data'}", *NO_LLM,
    )  # fmt: skip
    clean_error(code, out, *expected)


@pytest.mark.slow
def test_malformed_synthesized_problem_file(launcher: Launcher, tmp_path: Path) -> None:
    path = tmp_path / "problems.jsonl"
    path.write_text('{"id": "p1", "benchmark": "synth/tasks", "query": "q"}\n{"id": 5, "query": [}\n')
    code, out = modulo(
        launcher, tmp_path, "check", *benchmark_override("synth/tasks"), "benchmark.split=generated",
        f"++benchmark.path={path}", *NO_LLM,
    )  # fmt: skip
    clean_error(code, out, "DataError", "problems.jsonl:2")


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("metacontroller.max_iteration=3", ["max_iteration"]),  # a key that does not exist
        ("llm.max_retries=many", ["max_retries", "many"]),  # a value of the wrong type
        ("metacontroller.on_critic_error=ignore", ["on_critic_error", "one of record, stop"]),  # a bad choice
        ("benchmark=travelplaner", ["travelplaner"]),  # a config group option that does not exist
        ("critics=[format,budgt]", ["budgt", "Did you mean 'budget'"]),  # an unknown critic
        ("backprompt=histroy", ["histroy"]),  # an unknown strategy
        ("+backprompt.args.windw=2", ["windw"]),  # an argument the strategy does not take
        ("cache.mode=sometimes", ["cache.mode", "sometimes"]),
    ],
)
def test_configuration_typos(tmp_path: Path, override: str, fragments: list[str]) -> None:
    code, out = modulo(None, tmp_path, "check", *benchmark_override("synth/tasks"), "benchmark.split=generated",
                       "++benchmark.n=2", *NO_LLM, override)  # fmt: skip
    clean_error(code, out, *fragments)
    assert code == 2, out  # nothing ran (1 would say a run finished with errors), Hydra's own errors included


def test_a_run_with_typos_makes_no_call_and_writes_no_records(tmp_path: Path) -> None:
    code, out = modulo(None, tmp_path, "run", *benchmark_override("synth/tasks"), "benchmark.split=generated",
                       "++benchmark.n=2", *NO_LLM, f"run.dir={tmp_path / 'run'}", "critics=[formt]")  # fmt: skip
    clean_error(code, out, "formt", "Did you mean 'format'")
    assert code == 2, out
    assert not (tmp_path / "run" / "records.jsonl").exists()


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_key_hydra_refuses_exits_2_as_every_typo_does(tmp_path: Path, command: str) -> None:
    code, out = modulo(None, tmp_path, command, *benchmark_override("synth/tasks"), "benchmark.split=generated",
                       "++benchmark.n=2", *NO_LLM, f"run.dir={tmp_path / 'run'}", "run.gc_treshold=5")  # fmt: skip
    clean_error(code, out, "gc_treshold")
    assert code == 2, out
    assert not (tmp_path / "run" / "records.jsonl").exists()
