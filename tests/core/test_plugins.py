"""A third-party package (tests/plugin_pkg, with its own pyproject) registers critics by entry point.

It is installed for real (pip, into a target directory put on the path of a subprocess), then
``modulo critics list`` shows it, a run that names it uses it, and a broken plugin stops the run
before any LLM call with the plugin's own error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modulo.recordformat import expand_record

from .plugins import ROOT, install, modulo

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out

PLUGIN = ROOT / "tests" / "plugin_pkg"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return install(PLUGIN, tmp_path_factory.mktemp("plugin-site"))


def test_plugin_critic_is_listed(plugin_env: dict[str, str]) -> None:
    names = modulo(plugin_env, "critics", "list", "--names")
    assert names.returncode == 0, names.stderr
    assert "example/max_words" in names.stdout.split()
    full = modulo(plugin_env, "critics", "list")
    assert "example/max_words" in full.stdout and "modulo-example-plugin" in full.stdout
    assert "failed to load" in full.stdout  # example/broken is listed as broken, the listing goes on


def _day(n: int, note: str) -> dict[str, object]:
    return {
        "days": n,
        "current_city": "Somewhere",
        "transportation": "-",
        "breakfast": "-",
        "attraction": note,
        "lunch": "-",
        "dinner": "-",
        "accommodation": "-",
    }


def test_plugin_critic_takes_part_in_a_run(plugin_env: dict[str, str], tmp_path: Path, data_dir: Path) -> None:
    long_plan = json.dumps([_day(d, "a very long attraction entry " * 5 if d == 2 else "Park;") for d in (1, 2, 3)])
    short_plan = json.dumps([_day(d, "Park;") for d in (1, 2, 3)])
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"validation-12": [long_plan, short_plan]}))
    run_dir = tmp_path / "run"
    proc = modulo(
        plugin_env,
        "run",
        "benchmark=travelplanner",
        "benchmark.ids=[validation-12]",
        "llm=scripted",
        f"llm.script={script}",
        "reformulator=none",
        "generator.prompt=json",
        "critics=[format,example/max_words]",
        "+critic_args={example/max_words: {max_words: 10}}",
        "cache.mode=off",
        f"run.dir={run_dir}",
        f"hydra.run.dir={run_dir}",
        "run.progress=false",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = expand_record(json.loads((run_dir / "records.jsonl").read_text().splitlines()[-1]))
    first, _second = record["iterations"]
    verdicts = {v["critic"]: v for v in first["verdicts"]}
    assert verdicts["example/max_words"]["passed"] is False
    assert "keep every entry under 10" in first["backprompt"]
    assert record["outcome"] == "certified" and len(record["iterations"]) == 2
    info = json.loads((run_dir / "run.json").read_text())
    assert info["critics"] == ["format", "example/max_words"]


def test_broken_plugin_stops_the_run_with_its_own_error(plugin_env: dict[str, str], tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = modulo(
        plugin_env,
        "run",
        "benchmark=travelplanner",
        "benchmark.limit=1",
        "critics=[format,example/broken]",
        f"run.dir={run_dir}",
        f"hydra.run.dir={run_dir}",
    )
    out = proc.stderr + proc.stdout
    assert proc.returncode == 2
    assert "example/broken" in out and "broken on purpose" in out
    assert not (run_dir / "records.jsonl").exists()  # stopped before any problem ran
