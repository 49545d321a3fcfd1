"""The experiment presets compose, name only things that exist, and sweep what their comments say."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from modulo import components
from modulo.cli.hydra_app import register_schema, search_path_override, to_modulo_config
from modulo.config import CRITIC_PRESETS
from modulo.resources import resource_dir

CONF = resource_dir("conf")
ROOT = Path(__file__).resolve().parents[2]
METHODS = {
    # +method value: (label, critics, max_iterations, planner prompt)
    "direct": ("Direct", "json", 1, "direct"),
    "cot": ("CoT", "json", 1, "cot"),
    "modulo_all": ("LLM-Modulo [All]", "all", 10, "direct"),
    "modulo_common": ("LLM-Modulo [Common]", "common", 10, "direct"),
    "modulo_hard": ("LLM-Modulo [Hard]", "hard", 10, "direct"),
    "modulo_json": ("LLM-Modulo [Json]", "json", 10, "direct"),
}


@pytest.fixture
def composed() -> Iterator[Any]:
    register_schema()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):

        def run(*overrides: str, hydra: bool = False) -> Any:
            """The composed config; with ``hydra=True`` its ``hydra`` node too (sweeper, output dirs)."""
            extra = search_path_override()  # the benchmarks' own config groups, as modulo run adds them
            return compose("config", overrides=[*overrides, *extra], return_hydra_config=hydra)

        yield run
    GlobalHydra.instance().clear()


def _sweep_values(cfg: Any) -> dict[str, list[str]]:
    node = cfg.hydra.sweeper.params
    params = OmegaConf.to_container(node) if node is not None else {}
    return {str(k): [v.strip() for v in str(val).split(",")] for k, val in params.items()}


@pytest.mark.slow
def test_table1_preset_sweeps_the_six_methods_of_the_paper(composed: Any) -> None:
    cfg = composed("+experiment=llm_modulo_table1", hydra=True)
    assert _sweep_values(cfg) == {"+method": list(METHODS)}
    assert str(cfg.hydra.sweep.dir).startswith("multirun/llm_modulo_table1/")
    for method, (label, critics, budget, prompt) in METHODS.items():
        assert (CONF / "method" / f"{method}.yaml").is_file()
        mcfg = to_modulo_config(composed("+experiment=llm_modulo_table1", f"+method={method}"))
        assert mcfg.labels == {"experiment": "llm_modulo_table1", "method": label}
        assert (mcfg.critics, mcfg.metacontroller.max_iterations, mcfg.generator.prompt) == (critics, budget, prompt)
        assert mcfg.backprompt.name == "all" and mcfg.benchmark.split == "validation-ref"


def test_a_model_sweep_on_the_command_line_keeps_each_method(composed: Any) -> None:
    mcfg = to_modulo_config(
        composed("+experiment=llm_modulo_table1", "+method=modulo_hard", "llm=openai", "llm.model=gpt-4-turbo")
    )
    assert (mcfg.llm.name, mcfg.llm.model, mcfg.critics) == ("openai", "gpt-4-turbo", "hard")


def test_critic_ablation_sweeps_presets_and_registered_strategies(composed: Any) -> None:
    cfg = composed("+experiment=critic_ablation", hydra=True)
    values = _sweep_values(cfg)
    assert set(values) == {"critics", "backprompt"}
    assert set(values["critics"]) <= set(CRITIC_PRESETS) and len(values["critics"]) == 4
    strategies = set(components.backprompts.names())
    for name in values["backprompt"]:
        assert (CONF / "backprompt" / f"{name}.yaml").is_file() and name in strategies
        mcfg = to_modulo_config(composed("+experiment=critic_ablation", f"backprompt={name}", "critics=hard"))
        assert mcfg.backprompt.name == name and mcfg.critics == "hard"
    assert str(cfg.hydra.sweep.dir).startswith("multirun/critic_ablation/")


def test_budget_sweep_is_one_long_run(composed: Any) -> None:
    cfg = composed("+experiment=budget_sweep", hydra=True)
    assert _sweep_values(cfg) == {}
    mcfg = to_modulo_config(composed("+experiment=budget_sweep"))
    assert mcfg.metacontroller.max_iterations == 20 and mcfg.critics == "all"
    assert mcfg.labels["experiment"] == "budget_sweep"
    assert str(cfg.hydra.run.dir).startswith("runs/budget_sweep/")


@pytest.mark.parametrize("launcher", ["ray_local", "slurm"])
def test_shipped_launcher_configs_extend_a_plugin_config(launcher: str) -> None:
    text = (CONF / "hydra" / "launcher" / f"{launcher}.yaml").read_text()
    assert text.startswith("# @package hydra.launcher\n")
    base = {"ray_local": "ray", "slurm": "submitit_slurm"}[launcher]
    assert f"defaults:\n  - {base}\n  - _self_\n" in text


def test_experiments_readme_names_existing_presets_and_launchers() -> None:
    readme = (Path(__file__).resolve().parents[2] / "experiments" / "README.md").read_text()
    for preset in ("llm_modulo_table1", "critic_ablation", "budget_sweep"):
        assert f"+experiment={preset}" in readme
    for launcher in ("joblib", "ray_local", "ray", "slurm", "submitit_local"):
        assert f"hydra/launcher={launcher}" in readme


@pytest.mark.parametrize("script", ["table1.sh", "critic_ablation.sh", "budget_sweep.sh"])
@pytest.mark.parametrize(("run_status", "reported"), [(0, True), (1, True), (2, False)])
def test_an_experiment_script_reports_a_run_with_errors_and_exits_with_its_status(
    tmp_path: Path, script: str, run_status: int, reported: bool
) -> None:
    """The scripts ran under `set -e`: a run or sweep that exits 1 (a problem ended in error, its records on
    disk) stopped them before `modulo report`, so a sweep's comparison report was never written and its
    errors never seen there. Now the report follows a run that exits 0 or 1 (it marks the errors), not one
    that ran nothing (2), and the script exits with the run's status. `modulo` is a stand-in here that logs
    its calls."""
    import os
    import subprocess

    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    stub = bin_dir / "modulo"
    stub.write_text(
        f'#!/usr/bin/env bash\necho "$1" >> {log}\nif [ "$1" = run ]; then exit {run_status}; fi\nexit 0\n',
        encoding="utf-8",
    )
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "OUT": str(tmp_path / "o")}
    done = subprocess.run(["bash", str(ROOT / "experiments" / script)], env=env, capture_output=True, timeout=60)
    assert done.returncode == run_status, done.stderr
    assert log.read_text(encoding="utf-8").split() == ["check", "run", *(["report"] if reported else [])]
