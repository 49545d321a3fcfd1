"""Sweeps through Hydra's launcher plugins: Ray (a local instance on 127.0.0.1), submitit (its local
executor; SLURM itself is not available here, so the slurm config is only composed), and
``modulo check -m`` under a process launcher.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
from pathlib import Path

import pytest
import yaml

from modulo.testing.fake_server import FakeProvider
from modulo.types import Outcome, ProblemResult

from .conftest import offline

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out

RAY_MISSING = (
    "Ray cannot be used here: hydra-ray-launcher and ray are not installed "
    '(pip install -e ".[ray]"; .ci/run installs them)'
)
SUBMITIT_MISSING = 'hydra-submitit-launcher is not installed (pip install -e ".[slurm]")'


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _outcomes(run: Path) -> dict[str, Outcome]:
    lines = (run / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return {r.problem_id: r.outcome for r in (ProblemResult.model_validate_json(x) for x in lines if x.strip())}


def _final_pass(run: Path) -> float:
    return float(json.loads((run / "evaluation.json").read_text())["metrics"]["final_pass_rate"])


@pytest.mark.skipif(not _installed("hydra_plugins.hydra_ray_launcher"), reason=RAY_MISSING)
def test_sweep_through_the_ray_launcher_on_a_local_instance(fake: FakeProvider, tmp_path: Path) -> None:
    sweep = tmp_path / "ray"
    env = {
        "RAY_USAGE_STATS_ENABLED": "0",
        # Ray authenticates its control plane with a token; give it one for this instance instead of
        # letting it write one under ~/.ray
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_DEDUP_LOGS": "0",
    }
    args = offline.sweep_args(
        fake.openai_base_url,
        sweep,
        tmp_path / "cache",
        launcher="ray_local",
        extra=["critics=all,hard", "hydra.launcher.ray.init.num_cpus=2"],
    )
    code, out, _ = offline.modulo(args, timeout=300, env=env)
    assert code == 0, out[-6000:]
    assert "Ray Launcher is launching 2 jobs" in out
    assert "'address': 'local'" in out and "'_node_ip_address': '127.0.0.1'" in out
    assert "Started a local Ray instance" in out
    runs = offline.job_dirs(sweep)
    assert [r.name for r in runs] == ["0", "1"]
    # the jobs ran in Ray's worker processes, which reached the fake provider on 127.0.0.1
    assert "(_run_job pid=" in out
    assert fake.stats().requests > 0
    for run, critics, expected in ((runs[0], "all", 1.0), (runs[1], "hard", 2 / 3)):
        info = json.loads((run / "run.json").read_text())
        assert ("budget" in info["critics"]) and (("diverse_attractions" in info["critics"]) == (critics == "all"))
        assert set(_outcomes(run).values()) == {Outcome.CERTIFIED}
        assert _final_pass(run) == pytest.approx(expected)


@pytest.mark.skipif(not _installed("hydra_plugins.hydra_submitit_launcher"), reason=SUBMITIT_MISSING)
def test_sweep_through_submitit_local_executor(fake: FakeProvider, tmp_path: Path) -> None:
    """The submitit plugin's local executor: the code path of the SLURM launcher, minus sbatch."""
    sweep = tmp_path / "submitit"
    args = offline.sweep_args(
        fake.openai_base_url, sweep, tmp_path / "cache", launcher="submitit_local", extra=["critics=all,hard"]
    )
    code, out, _ = offline.modulo(args, timeout=300)
    assert code == 0, out[-6000:]
    runs = offline.job_dirs(sweep)
    assert [r.name for r in runs] == ["0", "1"]
    assert (sweep / ".submitit").is_dir()
    for run in runs:
        assert set(_outcomes(run).values()) == {Outcome.CERTIFIED}
    assert fake.stats().requests > 0


@pytest.mark.skipif(not _installed("hydra_plugins.hydra_submitit_launcher"), reason=SUBMITIT_MISSING)
def test_slurm_launcher_config_composes_with_overrides(tmp_path: Path) -> None:
    code, out, _ = offline.modulo(
        [
            "run",
            "hydra/launcher=slurm",
            "hydra.launcher.partition=cpu",
            "hydra.launcher.array_parallelism=4",
            "--cfg",
            "hydra",
            "-p",
            "hydra.launcher",
        ],
        timeout=120,
    )
    assert code == 0, out
    launcher = yaml.safe_load(out.split("# @package hydra.launcher", 1)[1])
    assert launcher["_target_"].endswith("submitit_launcher.SlurmLauncher")
    assert launcher["partition"] == "cpu" and launcher["array_parallelism"] == 4
    assert launcher["timeout_min"] == 720 and launcher["name"] == "modulo"
    assert launcher["submitit_folder"] == "${hydra.sweep.dir}/.submitit/%j"


def test_check_sweep_under_joblib_binds_every_job_and_runs_none(fake: FakeProvider, tmp_path: Path) -> None:
    """``modulo check -m`` stays a check when the jobs run in other processes (joblib's workers)."""
    sweep = tmp_path / "check"
    args = offline.sweep_args(fake.openai_base_url, sweep, tmp_path / "cache", launcher="joblib")
    args[0] = "check"
    code, out, _ = offline.modulo([*args, "hydra.launcher.n_jobs=2"], timeout=300)
    assert code == 0, out[-4000:]
    assert out.count("every component resolved and bound") == 3
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir() and p.name.isdigit())
    assert [p.name for p in jobs] == ["0", "1", "2"]
    assert not any((p / "records.jsonl").exists() for p in jobs)
    assert fake.stats().requests == 0
