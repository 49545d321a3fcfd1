"""A third-party benchmark (tests/plugin_bench, its own pyproject) owns its domain through the plugin door.

Installed for real, it ships its own templates (found through ``template_dir``, not under modulo's
prompts/), its own critic, and its own commands: ``modulo synth``, ``modulo critics audit`` and
``modulo bench ... stats`` reach it only through the Benchmark hooks, and a scripted run on it goes
end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modulo.recordformat import expand_record

from .plugins import ROOT, install, modulo

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out

PLUGIN = ROOT / "tests" / "plugin_bench"


@pytest.fixture(scope="module")
def bench_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return install(PLUGIN, tmp_path_factory.mktemp("bench-site"))


def test_plugin_benchmark_commands_go_through_its_hooks(bench_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    made = modulo(bench_env, "synth", "sum", "--n", "4", "--seed", "2", "--out", str(out))
    assert made.returncode == 0, made.stderr
    assert "toybench wrote 4 problems" in made.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"sum-2-{i}" for i in range(4)]

    stats = modulo(bench_env, "bench", "toybench/sum", "stats", "--limit", "2")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout) == {"benchmark": "toybench/sum", "problems": 2}
    listed = modulo(bench_env, "bench", "toybench/sum")
    assert listed.stdout.split() == ["stats"]
    unknown = modulo(bench_env, "bench", "toybench/sum", "nope")
    assert unknown.returncode == 2 and "no command 'nope'" in unknown.stderr + unknown.stdout

    # --help at every level shows the benchmark's own options; a wrong one is a usage error (exit 2)
    helped = modulo(bench_env, "synth", "toybench/sum", "--help")
    assert helped.returncode == 0 and "Usage: modulo synth toybench/sum [OPTIONS]" in helped.stdout
    assert "--seed" in helped.stdout and "--out" in helped.stdout
    helped = modulo(bench_env, "bench", "toybench/sum", "stats", "--help")
    assert helped.returncode == 0 and "--limit" in helped.stdout
    wrong = modulo(bench_env, "bench", "toybench/sum", "stats", "--limit", "two")
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: ") and "'two'" in wrong.stderr
    assert "modulo bench toybench/sum stats --help" in wrong.stderr

    audit = modulo(bench_env, "critics", "audit", "toybench/sum")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "| toybench/sum_ok |" in audit.stdout and "3/3; 0/3" in audit.stdout

    # a hook the benchmark does not have is a clear error, not a traceback
    missing = modulo(bench_env, "evaluate", "toybench/sum")
    assert missing.returncode == 2 and "has no evaluate command" in missing.stderr + missing.stdout


def test_plugin_benchmark_runs_end_to_end_with_its_own_templates(bench_env: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    # problem sum-0-0: first a wrong plan, then the witness (pool[:2])
    pool = sorted(__import__("random").Random(0).sample(range(1, 20), 5))
    script.write_text(
        json.dumps({"sum-0-0": [json.dumps({"numbers": [pool[0], pool[2]]}), json.dumps({"numbers": pool[:2]})]})
    )
    run_dir = tmp_path / "run"
    proc = modulo(
        bench_env,
        "run",
        "benchmark=custom",
        "benchmark.name=toybench/sum",
        "benchmark.ids=[sum-0-0]",
        "llm=scripted",
        f"llm.script={script}",
        "reformulator=none",
        "generator.prompt=json",
        "critics=all",
        "critic_options.hints=true",
        "cache.mode=off",
        f"run.dir={run_dir}",
        f"hydra.run.dir={run_dir}",
        "run.progress=false",
        "run.report=false",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = expand_record(json.loads((run_dir / "records.jsonl").read_text().splitlines()[-1]))
    first, _second = record["iterations"]
    assert first["prompt"][0]["content"].startswith("TOYBENCH PLUGIN TEMPLATE.")
    verdicts = {v["critic"]: v for v in first["verdicts"]}
    assert verdicts["toybench/sum_ok"]["passed"] is False
    assert f"Try {pool[:2]}." in first["backprompt"]  # the declared hints option reached the plugin's critic
    assert record["outcome"] == "certified"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["critics"] == ["format", "toybench/sum_ok"]
    assert any(str(label).startswith("toybench/sum/json@7#") for label in json.dumps(info["templates"]).split('"'))


def test_plugin_benchmark_ships_its_own_config_defaults(bench_env: dict[str, str]) -> None:
    # benchmark=toybench/sum is found in the plugin's own config group (modulo.configs entry point):
    # its defaults (n: 5, seed: 3) apply, and nothing in modulo's conf/ names it
    assert not list((ROOT / "conf").rglob("*toybench*"))
    checked = modulo(bench_env, "check", "benchmark=toybench/sum", "llm=scripted")
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "toybench/sum / generated (5 problems)" in checked.stdout
    overridden = modulo(bench_env, "check", "benchmark=toybench/sum", "llm=scripted", "benchmark.n=2")
    assert "toybench/sum / generated (2 problems)" in overridden.stdout
    listed = modulo(bench_env, "list", "benchmarks")
    choices = " ".join(listed.stdout.split()).partition("choices with config defaults")[2]
    assert "toybench/sum" in choices and "synth/calendar_small" in choices
    typo = modulo(bench_env, "check", "benchmark=toybench/sun", "llm=scripted")
    assert typo.returncode == 2 and "Did you mean 'toybench/sum'" in typo.stderr
