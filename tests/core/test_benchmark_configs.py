"""Benchmark-owned config defaults (issue 12 item 1): the built-in benchmark packages ship their Hydra
config group entries through the same entry-point group a plugin uses (``modulo.configs``), and
modulo's own conf/ holds none of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from modulo.cli.hydra_app import compose_config, config_dirs, group_options
from modulo.errors import ConfigError
from modulo.resources import resource_dir

ROOT = Path(__file__).resolve().parents[2]


def test_builtin_benchmarks_ship_their_configs_in_their_packages() -> None:
    dirs = config_dirs()
    assert {d.relative_to(ROOT / "critics").parts[0] for d in dirs if ROOT / "critics" in d.parents} >= {
        "travelplanner",
        "natural_plan",
        "synth",
    }
    own = {p.stem for p in (resource_dir("conf") / "benchmark").rglob("*.yaml")}
    assert own == {"custom"}  # the generic node only: no benchmark's defaults live in the core's conf/
    options = group_options(resource_dir("conf"), "benchmark")
    assert {"travelplanner", "natural_plan/trip", "synth/calendar", "synth/calendar_small", "custom"} <= set(options)


def test_a_package_config_is_composed_with_its_defaults() -> None:
    cfg = compose_config(["benchmark=synth/trip", "llm=scripted"])
    assert cfg.benchmark.name == "synth/trip" and cfg.benchmark.args["n"] == 50
    assert compose_config(["llm=scripted"]).benchmark.args["n"] == 8  # the primary config's default, found there


def test_an_install_older_than_the_source_is_named_not_silently_missing_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    with pytest.raises(ConfigError, match=r"declares no modulo\.configs entry points .* re-run the install"):
        config_dirs()
