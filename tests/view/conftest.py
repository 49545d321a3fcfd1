"""The viewer's fixture: a finished scripted TravelPlanner run with verdict flips and hostile replies.

Built once per session, offline, with the real CLI: TravelPlanner's greedy baseline plans two
validation-ref problems; a scripted "model" then answers each problem three times through the
deterministic parser: first a refusal carrying a script tag (no plan: format fails, the rest are
gated), then the greedy plan with an ``<img onerror>`` breakfast (format passes, within_sandbox fails
and its feedback quotes the markup), then the greedy plan itself (within_sandbox flips to pass).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from modulo.types import ProblemResult
from tests.cli_support import modulo

HOSTILE_REPLY = '<script>window.__pwned = 1</script>I cannot plan this trip. </pre></textarea><b id="pwn">bold</b>'
HOSTILE_FIELD = '<img src=x onerror="window.__pwned = 2">'


def _modulo(*args: str) -> None:
    result = modulo(*args)  # in this process: a second interpreter would import and compile everything again
    assert result.exit_code == 0, result.output[-4000:]


def _tp_data() -> Path | None:
    data = os.environ.get("MODULO_DATA_DIR")
    path = Path(data) / "travelplanner" if data else None
    return path if path is not None and path.is_dir() else None


@pytest.fixture(scope="session")
def tp_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if _tp_data() is None:
        pytest.skip("TravelPlanner data not found under $MODULO_DATA_DIR")
    root = tmp_path_factory.mktemp("view-tp")
    common = ["benchmark=travelplanner", "benchmark.split=validation-ref", "benchmark.limit=2", "run.report=false"]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MODULO_CACHE_DIR", str(root / "cache"))
        _scripted_run(root, common)
    return root / "scripted"


def _scripted_run(root: Path, common: list[str]) -> None:
    from critics.travelplanner.planformat import render_text

    _modulo("run", *common, "generator=greedy", f"run.dir={root / 'greedy'}")
    script: dict[str, list[str]] = {}
    for line in (root / "greedy" / "records.jsonl").read_text().splitlines():
        rec = ProblemResult.model_validate_json(line)
        plan = rec.best_plan
        bad = [dict(day) for day in plan]
        bad[1]["breakfast"] = f"{HOSTILE_FIELD}, {bad[1]['current_city']}"
        script[rec.problem_id] = [HOSTILE_REPLY, render_text(bad), render_text(plan)]
    (root / "script.json").write_text(json.dumps(script))
    run_dir = root / "scripted"
    _modulo(
        "run",
        *common,
        "llm=scripted",
        f"llm.script={root / 'script.json'}",
        "reformulator.mode=parser",
        "metacontroller.max_iterations=3",
        "cache.mode=off",
        f"run.dir={run_dir}",
    )
