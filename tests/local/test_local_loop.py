"""The whole loop with a real model: SmolLM2-135M under llama.cpp on synthesized calendar problems.

This is the quickstart's configuration (``modulo run`` with no overrides) on fewer problems and a
smaller budget: real replies, real verdicts, real backprompts, recorded outcomes; and every plan the
critics certified is checked again, on its own, by the benchmark's evaluator (which uses Z3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from modulo import components
from modulo.cli.main import cli
from modulo.runs import read_records

from .local_support import needs_model

pytestmark = [*needs_model, pytest.mark.slow]


def test_quickstart_loop_with_the_real_local_model(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        ["run", "benchmark.n=3", "metacontroller.max_iterations=4", "cache.mode=off", f"run.dir={run_dir}",
         "run.progress=false", "run.report=false"],
    )
    assert result.exit_code == 0, result.output[-3000:]
    assert "Certified" in result.output and "first plan (no backprompt)" in result.output

    info = json.loads((run_dir / "run.json").read_text())
    assert info["llm"]["name"] == "local" and info["reformulator"] == "none"
    assert info["generator"]["prompt_role"] == "json"
    records = list(read_records(run_dir))
    assert len(records) == 3
    assert any(len(r.iterations) >= 2 for r in records), "no problem needed a backprompt"
    for r in records:
        assert r.outcome.value in ("certified", "exhausted", "failed")
        for it in r.iterations:
            assert it.raw_reply and it.calls and it.calls[0].model  # a real reply from the server
            assert it.calls[0].usage.input_tokens > 0 and it.calls[0].usage.output_tokens > 0
            assert it.verdicts
        for before, after in zip(r.iterations, r.iterations[1:], strict=False):
            assert before.backprompt and before.backprompt == after.prompt[-1].content
            assert any(not v.accepts for v in before.verdicts)

    # every certified plan passes the benchmark's evaluator when checked again on its own
    bench = components.benchmarks.get("synth/calendar")(n=3, seed=0, difficulty="easy")
    problems = {p.id: p for p in bench.load("generated")}
    for r in records:
        if r.outcome.value == "certified":
            ev = bench.evaluate([problems[r.problem_id]], [r.best_plan])
            assert ev.per_problem[0]["passed"], (r.problem_id, r.best_plan, ev.per_problem[0])
