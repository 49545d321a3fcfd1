"""``modulo run`` / ``modulo check``: Hydra composition, then plain dataclasses from here on.

The schema (:class:`CLIConfig`) is registered in Hydra's ConfigStore, so an unknown key or a wrong
type fails at start with the key's name. The composed config is converted to
:class:`modulo.config.ModuloConfig` and bound by :func:`modulo.build.build_session` (every
component resolved, every argument checked) before the first LLM call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict  # noqa: UP035 - OmegaConf needs typing generics

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from ..config import (
    BackpromptConf,
    BenchmarkConf,
    CacheConf,
    CriticOptions,
    GeneratorConf,
    LLMConf,
    MetacontrollerConf,
    ModuloConfig,
    ReformulatorConf,
    RunConf,
    TrackerConf,
)
from ..errors import ConfigError, ModuloError
from ..redact import check_config, register_config, safe_config
from ..resources import resource_dir
from ..trackers import log_to_tracker, open_tracker

BENCHMARK_KEYS = {"name", "split", "limit", "ids"}


@dataclass
class CLIConfig(ModuloConfig):
    """ModuloConfig as Hydra sees it: the benchmark node also holds the benchmark's own arguments."""

    benchmark: Dict[str, Any] = field(default_factory=lambda: {"name": "travelplanner"})  # type: ignore[assignment]  # noqa: UP006


def register_schema() -> None:
    cs = ConfigStore.instance()
    cs.store(name="modulo_schema", node=CLIConfig)
    # ${modulo_first:a,b,...}: the first non-empty value (hydra.run.dir follows run.dir when it is set)
    OmegaConf.register_new_resolver("modulo_first", lambda *xs: next((x for x in xs if x), None), replace=True)


def to_modulo_config(cfg: DictConfig) -> ModuloConfig:
    """Plain dataclasses from a composed Hydra config (resolving interpolations)."""
    unresolved = OmegaConf.to_container(cfg, resolve=False)
    if isinstance(unresolved, dict):
        unresolved.pop("hydra", None)
    check_config(unresolved)  # a secret written in a config file, not read from the environment
    try:
        raw: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[assignment]
    except InterpolationResolutionError as exc:  # ${oc.env:VAR} with VAR unset, most often
        raise ConfigError(f"{getattr(exc, 'full_key', '') or 'the configuration'}: {exc.msg}") from None
    raw.pop("hydra", None)
    register_config(raw)  # the resolved secrets: every writer redacts them from now on
    bench = dict(raw.pop("benchmark") or {})
    if "name" not in bench:
        raise ConfigError("benchmark.name is missing (pick one with benchmark=NAME)")
    args = {k: v for k, v in bench.items() if k not in BENCHMARK_KEYS}
    extra_args = args.pop("args", None) or {}
    args.update(extra_args)
    ids = bench.get("ids")
    benchmark = BenchmarkConf(
        name=str(bench["name"]),
        split=bench.get("split"),
        limit=bench.get("limit"),
        ids=[str(i) for i in ids] if ids is not None else None,
        args=args,
    )

    def sub(cls: Any, key: str) -> Any:
        return cls(**(raw.pop(key, None) or {}))

    return ModuloConfig(
        benchmark=benchmark,
        generator=sub(GeneratorConf, "generator"),
        reformulator=sub(ReformulatorConf, "reformulator"),
        critics=raw.pop("critics", "all"),
        critic_options=sub(CriticOptions, "critic_options"),
        critic_args=raw.pop("critic_args", None) or {},
        backprompt=sub(BackpromptConf, "backprompt"),
        metacontroller=sub(MetacontrollerConf, "metacontroller"),
        llm=sub(LLMConf, "llm"),
        cache=sub(CacheConf, "cache"),
        run=sub(RunConf, "run"),
        data_dir=raw.pop("data_dir", None),
        labels={str(k): str(v) for k, v in (raw.pop("labels", None) or {}).items()},
        tracker=sub(TrackerConf, "tracker"),
    )


def config_yaml(cfg: ModuloConfig) -> str:
    """The resolved config as YAML, secrets redacted and URLs without userinfo (see :mod:`modulo.redact`)."""
    return OmegaConf.to_yaml(OmegaConf.create(safe_config(dataclasses.asdict(cfg))))


def _task(check: bool) -> Callable[[DictConfig], Any]:
    """The Hydra task function. The mode travels inside it: launchers such as joblib, Ray and submitit
    run it in other processes, where a module-level flag set by the parent would read its default."""

    def modulo_task(cfg: DictConfig) -> Any:
        return _main(cfg, check=check)

    return modulo_task


QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "openai", "anthropic", "urllib3", "aiohttp")


def _main(cfg: DictConfig, *, check: bool = False) -> Any:
    for name in QUIET_LOGGERS:  # one INFO line per HTTP request drowns the progress bar
        logging.getLogger(name).setLevel(logging.WARNING)
    from ..build import build_session
    from .console import run_and_report

    try:
        mcfg = to_modulo_config(cfg)
        tracker = open_tracker(mcfg.tracker.name, mcfg.tracker.args)  # a missing extra stops the run here
        if check:
            session = build_session(mcfg)
            from .console import print_check

            print_check(session)
            asyncio.run(session.aclose())
            return 0
        run_dir = Path(mcfg.run.dir) if mcfg.run.dir else Path(HydraConfig.get().runtime.output_dir)
        code = run_and_report(mcfg, run_dir, config_yaml(mcfg))
        if tracker is not None:
            code = log_to_tracker(tracker, run_dir, _job_tags()) or code
        mode = HydraConfig.get().mode if HydraConfig.initialized() else None
        if code and (mode is None or mode.name != "MULTIRUN"):
            sys.exit(code)  # Hydra drops the task's return value: a stopped run must not exit 0
        return code
    except ModuloError as exc:
        from .console import error

        error(exc)
        # in multirun, one failing job must not kill the sweep silently: raise so Hydra reports it
        mode = HydraConfig.get().mode if HydraConfig.initialized() else None
        if mode is not None and mode.name == "MULTIRUN":
            raise
        sys.exit(2)


def _job_tags() -> dict[str, str]:
    """Tags that place a run in its sweep: the sweep directory, the job number and its overrides."""
    if not HydraConfig.initialized():
        return {}
    hc = HydraConfig.get()
    tags = {"modulo.overrides": " ".join(hc.overrides.task)}
    if hc.mode is not None and hc.mode.name == "MULTIRUN":
        tags["modulo.sweep_dir"] = str(Path(hc.sweep.dir).resolve())
        tags["modulo.job_num"] = str(hc.job.num)
        tags["modulo.job_name"] = f"{Path(hc.sweep.dir).name}/{hc.job.num}"
    return tags


def run_hydra(argv: list[str], *, check: bool = False) -> None:
    """Run the Hydra app on ``argv`` (overrides and Hydra flags such as ``-m``)."""
    from ..llm.keys import reject_secret_overrides

    reject_secret_overrides(argv)  # before Hydra writes the overrides into the run directory
    register_schema()
    conf_dir = str(resource_dir("conf"))
    app = hydra.main(config_path=conf_dir, config_name="config", version_base="1.3")(_task(check))
    if check and not {"-m", "--multirun"} & set(argv):
        # a check runs nothing: no output directory, no log file, no saved config
        argv = [*argv, "hydra.output_subdir=null", "hydra.run.dir=.", "hydra/job_logging=none"]
    old = sys.argv
    sys.argv = ["modulo " + ("check" if check else "run"), *argv]
    try:
        app()
    finally:
        sys.argv = old
