"""Oracle critics on a test split need ``run.allow_test_oracle=true``, and a run that uses it says so."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from modulo import components
from modulo.benchmark import Benchmark
from modulo.critic import critic
from modulo.types import Problem, Verdict
from tests.cli_support import invoke

GUARD = "guard_toy"


class GuardToy(Benchmark):
    """Pick an even ``x``. Its ``test`` split is a test split; its critic is the evaluator's own check."""

    name = GUARD
    test_splits: ClassVar[tuple[str, ...]] = ("test",)

    def __init__(self, data_dir: Any = None) -> None:
        super().__init__(None)

    def splits(self) -> list[str]:
        return ["dev", "test"]

    def load(self, split: str) -> list[Problem]:
        return [Problem(id=f"{split}-{i}", benchmark=GUARD, query="Pick an even x.") for i in range(2)]

    def critic_names(self) -> list[str]:
        return ["format", "guard_even"]


@critic("guard_even", group="hard", benchmarks=(GUARD,), source="oracle", description="x is even")
def guard_even(problem: Problem, plan: Any) -> Verdict:
    return Verdict.ok() if plan.get("x", 1) % 2 == 0 else Verdict.fail("x must be even.")


@pytest.fixture
def guard_toy() -> Iterator[None]:
    components.benchmarks.register(GUARD, GuardToy, replace=True)
    components.critics.register("guard_even", guard_even, replace=True)
    yield
    components.critics.unregister("guard_even")
    components.benchmarks.unregister(GUARD)


def _toy_args(tmp_path: Path, split: str, *more: str) -> list[str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"*": ['{"x": 2}']}))
    return [
        "benchmark=custom",
        f"benchmark.name={GUARD}",
        f"benchmark.split={split}",
        "llm=scripted",
        f"llm.script={script}",
        "reformulator=none",
        "cache.mode=off",
        "run.progress=false",
        *more,
    ]


@pytest.mark.slow
def test_oracle_critics_on_a_test_split_are_refused_without_the_override(guard_toy: None, tmp_path: Path) -> None:
    code, out = invoke("check", *_toy_args(tmp_path, "test"))
    assert code == 2
    assert "test split" in out and "run.allow_test_oracle=true" in out
    run_dir = tmp_path / "refused"
    code, out = invoke("run", *_toy_args(tmp_path, "test", f"run.dir={run_dir}", f"hydra.run.dir={run_dir}"))
    assert code == 2 and not (run_dir / "records.jsonl").exists()
    # the same critics on the development split need nothing
    code, out = invoke("check", *_toy_args(tmp_path, "dev"))
    assert code == 0, out


@pytest.mark.slow
def test_the_override_runs_and_the_run_records_split_source_and_override(guard_toy: None, tmp_path: Path) -> None:
    run_dir = tmp_path / "allowed"
    code, out = invoke(
        "run",
        *_toy_args(tmp_path, "test", "run.allow_test_oracle=true", f"run.dir={run_dir}", f"hydra.run.dir={run_dir}"),
    )
    assert code == 0, out
    info = json.loads((run_dir / "run.json").read_text())
    assert info["benchmark"]["split"] == "test" and info["critic_source"] == "oracle"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["run"]["allow_test_oracle"] is True and info["allow_test_oracle"] is True
    assert len((run_dir / "records.jsonl").read_text().splitlines()) == 2


def test_natural_plan_trip_test_split_needs_no_override(tmp_path: Path) -> None:
    """NATURAL PLAN's trip critics check only what the prompt itself states (parsed from its text) and
    never read the gold answer, so they are 'reimplemented', not the benchmark's evaluation (exact
    match against gold): running them on the test split writes no evaluation cue into a prompt."""
    env = os.environ.get("MODULO_DATA_DIR")
    if not env or not (Path(env) / "natural_plan" / "trip_planning.json").is_file():
        pytest.skip("NATURAL PLAN data not found: set MODULO_DATA_DIR")
    code, out = invoke(
        "check",
        "benchmark=natural_plan/trip",
        "benchmark.split=test",
        "benchmark.limit=1",
        "llm=openai",
        "llm.base_url=http://127.0.0.1:9/v1",
    )
    assert code == 0 and "run.allow_test_oracle" not in out, out
