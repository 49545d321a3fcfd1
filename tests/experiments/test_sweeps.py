"""Sweeps on TravelPlanner against the fake provider: run directories, ``modulo report`` on the sweep
root, and re-runs that reach no backend (the response cache, or the run directories' own records).

The scenario (``experiments/offline.py``): train-1 first answers its annotated plan with an attraction
repeated (a commonsense failure only), train-16 first refuses, train-31 is right at once; every later
iteration answers the annotated plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib import image as mpimg

from modulo.testing.fake_server import FakeProvider
from modulo.types import Outcome, ProblemResult

from .conftest import offline

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: nothing listens there: a request would fail


def _records(run_dir: Path) -> dict[str, ProblemResult]:
    lines = (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
    results = [ProblemResult.model_validate_json(line) for line in lines if line.strip()]
    return {r.problem_id: r for r in results}


def _outcomes(sweep: Path) -> dict[tuple[str, str], Any]:
    """(job, problem) -> (outcome, best plan, iterations used)."""
    out = {}
    for run in offline.job_dirs(sweep):
        for pid, r in _records(run).items():
            out[(run.name, pid)] = (r.outcome, r.best_plan, len(r.iterations))
    return out


def _headline_rows(text: str) -> list[str]:
    """The run names of the printed Table 1 (the rows under the header, up to the first blank line)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Run ") and "Final pass rate" in line)
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        rows.append(line.split()[0])
    return rows


def _check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path.name} is not a PNG"
    pixels = mpimg.imread(path)
    height, width = pixels.shape[:2]
    assert width >= 400 and height >= 300, (path.name, pixels.shape)
    assert float(pixels[..., :3].std()) > 0.01, f"{path.name} is blank"


def _sweep(fake: FakeProvider, sweep: Path, cache: Path, **kwargs: Any) -> tuple[str, float]:
    code, out, secs = offline.modulo(offline.sweep_args(fake.openai_base_url, sweep, cache, **kwargs), timeout=300)
    assert code == 0, out[-4000:]
    return out, secs


def test_critic_subset_sweep_with_joblib_then_report_then_cached_rerun(fake: FakeProvider, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, again = tmp_path / "first", tmp_path / "again"
    out, _ = _sweep(fake, first, cache, launcher="joblib", extra=["hydra.launcher.n_jobs=2"])
    assert "Joblib.Parallel(n_jobs=2" in out

    runs = offline.job_dirs(first)
    assert [r.name for r in runs] == ["0", "1", "2"]
    sent = fake.stats().requests
    assert sent > 0
    expected_critics = {"0": "all", "1": "common", "2": "hard"}
    for run in runs:
        info = json.loads((run / "run.json").read_text())
        assert info["benchmark"]["name"] == "travelplanner" and info["benchmark"]["split"] == "train"
        assert info["problem_ids"] == offline.PROBLEM_IDS
        assert info["llm"]["model"] == "gpt-4o-mini" and info["critic_source"] == "oracle"
        assert "git_revision" in info and info["templates"]
        groups = {"all": 14, "common": 9, "hard": 6}[expected_critics[run.name]]
        assert len(info["critics"]) == groups, info["critics"]
        records = _records(run)
        assert set(records) == set(offline.PROBLEM_IDS)
        assert all(r.outcome is Outcome.CERTIFIED for r in records.values())
    # the hard critics cannot see the repeated attraction: that job certifies train-1's first plan
    assert len(_records(runs[2])["train-1"].iterations) == 1
    assert len(_records(runs[0])["train-1"].iterations) == 2

    code, text, _ = offline.modulo(["report", str(first), "--resamples", "500"], timeout=300)
    assert code == 0, text[-4000:]
    assert _headline_rows(text) == ["0", "1", "2"], text
    table = pd.read_csv(first / "table1.csv").set_index("run")
    assert list(table["critics"]) == ["[All]", "[Common]", "[Hard]"]
    assert table["final_pass_rate"].tolist() == pytest.approx([100.0, 100.0, 200 / 3])
    assert table["delivery_rate"].tolist() == pytest.approx([100.0, 100.0, 100.0])
    assert table.loc[2, "commonsense_macro"] == pytest.approx(200 / 3)

    curve = pd.read_csv(first / "budget_curve.csv")
    by_run = {run: g.sort_values("budget")["value_pct"].tolist()[:2] for run, g in curve.groupby("run")}
    assert by_run[0] == pytest.approx([100 / 3, 100.0])  # train-31 at budget 1, all three at 2
    assert by_run[2] == pytest.approx([100 / 3, 200 / 3])
    firing = pd.read_csv(first / "critic_firing.csv")
    at0 = firing[firing["iteration"] == 0].groupby(["run", "critic"])["fired"].sum()
    assert at0[(0, "format")] == 1 and at0[(0, "diverse_attractions")] == 1
    assert at0[(2, "format")] == 1 and (2, "diverse_attractions") not in at0.index
    for name in ("critic_firing.png", "budget_curve.png"):
        _check_png(first / name)

    # the same sweep again, into a new sweep directory, with the same response cache
    _sweep(fake, again, cache, launcher="joblib", extra=["hydra.launcher.n_jobs=2"])
    assert fake.stats().requests == sent, "the cached re-run reached the backend"
    usage = offline.sweep_usage(again)
    assert usage["calls"] > 0 and usage["cached_calls"] == usage["calls"]
    assert usage["cost_usd"] == 0.0 and usage["cached_cost_usd"] > 0.0  # free, and what it would have cost
    assert _outcomes(again) == _outcomes(first)


def test_table1_preset_runs_six_methods_and_a_finished_sweep_resumes_without_calls(
    fake: FakeProvider, tmp_path: Path
) -> None:
    sweep = tmp_path / "table1"
    _sweep(fake, sweep, tmp_path / "cache", preset="table1", launcher="basic")
    runs = offline.job_dirs(sweep)
    assert len(runs) == 6
    methods = []
    for run in runs:
        info = json.loads((run / "run.json").read_text())
        method = info["labels"]["method"]
        methods.append(method)
        assert info["labels"]["experiment"] == "llm_modulo_table1"
        assert info["budget"]["max_iterations"] == (1 if method in ("Direct", "CoT") else 10)
        assert info["reformulator"] == "llm" and info["backprompt"]["name"] == "all"
        assert info["generator"]["prompt_role"] == ("cot" if method == "CoT" else "direct")
    assert methods == [
        "Direct",
        "CoT",
        "LLM-Modulo [All]",
        "LLM-Modulo [Common]",
        "LLM-Modulo [Hard]",
        "LLM-Modulo [Json]",
    ]

    code, text, _ = offline.modulo(["report", str(sweep), "--resamples", "200", "--no-figures"], timeout=300)
    assert code == 0, text[-4000:]
    table = pd.read_csv(sweep / "table1.csv")
    got = dict(zip(table["label"], table["final_pass_rate"], strict=True))
    assert got == pytest.approx({m: offline.EXPECTED_FINAL_PASS[m] for m in methods})
    assert _headline_rows(text) == [str(i) for i in range(6)], text
    for method in methods:
        assert method in text

    # the same command on the finished sweep directory, with the cache off: every problem is already
    # recorded, so nothing is asked again
    sent = fake.stats().requests
    before = {run.name: (run / "records.jsonl").read_bytes() for run in runs}
    _sweep(fake, sweep, tmp_path / "cache", preset="table1", launcher="basic", extra=["cache.mode=off"])
    assert fake.stats().requests == sent
    assert {run.name: (run / "records.jsonl").read_bytes() for run in runs} == before

    # the cache file alone reproduces the sweep: read-only, so not one request reaches the server (the
    # cache key names the endpoint, so the replay names the same base URL)
    replay = tmp_path / "replay"
    sent = fake.stats().requests
    args = offline.sweep_args(
        fake.openai_base_url, replay, tmp_path / "cache", preset="table1", extra=["cache.mode=read-only"]
    )
    code, out, _ = offline.modulo(args, timeout=300)
    assert code == 0, out[-4000:]
    assert fake.stats().requests == sent
    assert _outcomes(replay) == _outcomes(sweep)
    assert offline.sweep_usage(replay)["cached_calls"] == offline.sweep_usage(sweep)["calls"]
