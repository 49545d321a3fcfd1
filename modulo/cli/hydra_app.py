"""``modulo run`` / ``modulo check``: Hydra composition, then the typed configuration from here on.

The schema (derived from :class:`modulo.config.ModuloConfig` by :mod:`modulo.cli.schema`) is
registered in Hydra's ConfigStore, so an unknown key or a wrong type fails at start with the key's
name. The composed config is converted to :class:`~modulo.config.ModuloConfig` and bound by
:func:`modulo.build.build_session` (every component resolved, every argument checked) before the
first LLM call.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from ..config import ModuloConfig, check_override_key
from ..errors import ConfigError, ModuloError, RunError, UnknownComponentError
from ..redact import check_config, register_config, safe_config
from ..registry import group_entry_points, suggest
from ..resources import resource_dir
from ..runs import RUN_INFO, RunLock, RunLockedError
from ..trackers import log_to_tracker, open_tracker
from .schema import hydra_schema


def register_schema() -> None:
    cs = ConfigStore.instance()
    cs.store(name="modulo_schema", node=hydra_schema(ModuloConfig))
    # ${modulo_first:a,b,...}: the first non-empty value (hydra.run.dir follows run.dir when it is set)
    OmegaConf.register_new_resolver("modulo_first", lambda *xs: next((x for x in xs if x), None), replace=True)


def _did_you_mean(key: str, known: list[str]) -> str:
    hits = suggest(key, known)
    return f" Did you mean {' or '.join(repr(h) for h in hits)}?" if hits else ""


def to_modulo_config(cfg: DictConfig) -> ModuloConfig:
    """The typed configuration of a composed Hydra config (interpolations resolved): the one converter
    of ``modulo run``, ``modulo check``, sweeps, ``modulo resume`` and :func:`compose_config`."""
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
    if not (raw.get("benchmark") or {}).get("name"):
        raise ConfigError("benchmark.name is missing (pick one with benchmark=NAME)")
    return ModuloConfig.from_dict(raw)


def compose_config(overrides: list[str]) -> ModuloConfig:
    """The configuration ``modulo run OVERRIDES`` would run, composed from conf/ (and the benchmarks'
    own config groups) without running anything: the Python API's door to the presets, and the one way
    a command composes a configuration (``modulo critics extract``).

    The overrides are checked as ``modulo run`` checks them (an unknown benchmark or group option is a
    did-you-mean error; a registered benchmark without a config file runs on ``benchmark=custom``), and
    an override Hydra refuses (a typo in a key, a malformed value) is a ConfigError."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    conf_dir = resource_dir("conf")
    checked = check_overrides(list(overrides), conf_dir)
    register_schema()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[*checked, *search_path_override()])
    except ModuloError:
        raise
    except Exception as exc:  # Hydra's own override errors: a typo must read as a config error
        raise ConfigError(f"{type(exc).__name__}: {exc}") from None
    finally:
        GlobalHydra.instance().clear()
    return to_modulo_config(cfg)


def config_yaml(cfg: ModuloConfig) -> str:
    """The resolved config as YAML, secrets redacted and URLs without userinfo (see :mod:`modulo.redact`)."""
    return OmegaConf.to_yaml(OmegaConf.create(safe_config(cfg.to_dict())))


def _task(check: bool, subdir: str | None = None) -> Callable[[DictConfig], Any]:
    """The Hydra task function. The mode travels inside it: launchers such as joblib, Ray and submitit
    run it in other processes, where a module-level flag set by the parent would read its default.
    ``subdir``: where in the run directory the run saves Hydra's files (None: nowhere)."""

    def modulo_task(cfg: DictConfig) -> Any:
        _TASKS_STARTED[0] += 1
        return _main(cfg, check=check, subdir=subdir)

    return modulo_task


#: tasks started in this process (:func:`run_hydra` tells Hydra's own errors, before any task, from a task's)
_TASKS_STARTED = [0]


QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "openai", "anthropic", "urllib3", "aiohttp")


SWEEP_STATUS_ENV = "MODULO_SWEEP_STATUS"


def _multirun() -> bool:
    mode = HydraConfig.get().mode if HydraConfig.initialized() else None
    return mode is not None and mode.name == "MULTIRUN"


def _job_status(run_dir: Path | None, code: int, error: str | None) -> None:
    """One line per sweep job in the file named by $MODULO_SWEEP_STATUS (set by :func:`run_hydra`,
    inherited by launcher workers), so the sweep's end can name the jobs that failed."""
    path = os.environ.get(SWEEP_STATUS_ENV)
    if not path or not _multirun():
        return
    overrides = list(HydraConfig.get().overrides.task)
    line = json.dumps({"dir": str(run_dir) if run_dir else None, "overrides": overrides, "code": code, "error": error})
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def _remove_if_empty(run_dir: Path) -> None:
    """Remove a run directory that a failed bind left holding only Hydra's own files."""
    if not run_dir.is_dir():
        return
    hydra = HydraConfig.get()
    if {p.name for p in run_dir.iterdir()} <= {".hydra", ".lock", f"{hydra.job.name}.log"}:
        shutil.rmtree(run_dir, ignore_errors=True)
        if run_dir.resolve() == Path(hydra.runtime.output_dir).resolve() and not _multirun():
            with contextlib.suppress(OSError):  # runs/DATE/ too when this run was its only entry
                run_dir.parent.rmdir()


#: how many siblings ``NAME-2``, ``NAME-3``, ... of a taken timestamped run directory are tried
MAX_SIBLINGS = 1000


def _new_run_dir() -> tuple[Path, RunLock | None]:
    """The directory of a run that names none (no ``run.dir``): Hydra's timestamped one
    (``runs/DATE/H-M-S``, or an experiment's), or, when another run already has it (runs started within
    one second of each other: quick scripted runs in a row, parallel processes), its first free sibling
    ``H-M-S-2``, ``H-M-S-3``, ...: such a run is always a new run, never the resumption of another that
    started in the same second, nor refused as another configuration. The directory is claimed by its
    lock, which the caller releases (it takes it again, re-entrantly, for the run). A directory named on
    the command line (``hydra.run.dir=...``) and a sweep's job directories are used as they are."""
    hydra = HydraConfig.get()
    path = Path(hydra.runtime.output_dir)
    named = any(o.lstrip("+~").startswith("hydra.run.dir=") for o in hydra.overrides.hydra)
    if _multirun() or named:
        return path, None
    for n in range(1, MAX_SIBLINGS + 1):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        lock = RunLock(candidate)
        try:
            lock.acquire()
        except RunLockedError:  # another process is writing it
            continue
        if not (candidate / RUN_INFO).exists():  # no run started there
            if candidate != path:
                _move_job_log(path, candidate)
            return candidate, lock
        lock.release()
    raise RunError(f"{path} and its {MAX_SIBLINGS - 1} siblings {path.name}-N all hold runs: name one with run.dir")


def _move_job_log(taken: Path, chosen: Path) -> None:
    """Point the job's log file (Hydra opened it in the directory it named, which another run holds) at
    the same name in the directory this run took instead: the run's log lines belong to its own directory,
    never appended to another run's log."""
    for handler in logging.getLogger().handlers:
        if not isinstance(handler, logging.FileHandler):
            continue
        old = Path(handler.baseFilename)
        if old.parent != Path(os.path.abspath(taken)):  # FileHandler keeps its name absolute, unresolved
            continue
        new = chosen / old.name
        chosen.mkdir(parents=True, exist_ok=True)
        handler.acquire()
        try:
            handler.baseFilename = os.path.abspath(new)
            stale = handler.setStream(handler._open())  # its own mode and encoding, at the new name
            if stale is not None:
                stale.close()
        finally:
            handler.release()


#: where Hydra saves its files in a run directory unless told otherwise (``hydra.output_subdir``)
HYDRA_SUBDIR = ".hydra"


def hydra_files(cfg: DictConfig, subdir: str = HYDRA_SUBDIR) -> dict[str, str]:
    """What Hydra would save in ``subdir`` (``.hydra/``: config, hydra, overrides), written by the run only
    once the run directory is locked and accepts the configuration (a refused run must not overwrite them).
    ``hydra.yaml`` holds ``output_subdir`` as the user set it (Hydra itself was told to save nothing)."""
    hc = HydraConfig.get()
    hydra_node = OmegaConf.to_container(hc, resolve=False)
    assert isinstance(hydra_node, dict)
    hydra_node["output_subdir"] = subdir
    return {
        f"{subdir}/config.yaml": OmegaConf.to_yaml(cfg),
        f"{subdir}/hydra.yaml": OmegaConf.to_yaml(OmegaConf.create({"hydra": hydra_node})),
        f"{subdir}/overrides.yaml": OmegaConf.to_yaml(OmegaConf.create(list(hc.overrides.task))),
    }


def hydra_subdir(argv: list[str]) -> str | None:
    """Where the overrides ask for Hydra's files (the last ``hydra.output_subdir=`` wins; ``.hydra`` when
    none does); None when they ask for none (``null``, or the key deleted)."""
    subdir: str | None = HYDRA_SUBDIR
    for a in argv:
        name, sep, value = a.lstrip("+").partition("=")
        if name == "~hydra.output_subdir":
            subdir = None
        elif sep and name == "hydra.output_subdir":
            value = value.strip().strip("'\"")
            subdir = None if value.lower() in ("", "null", "none") else value
    return subdir


def _main(cfg: DictConfig, *, check: bool = False, subdir: str | None = None) -> Any:
    for name in QUIET_LOGGERS:  # one INFO line per HTTP request drowns the progress bar
        logging.getLogger(name).setLevel(logging.WARNING)
    from ..build import build_session
    from .console import run_and_report

    run_dir: Path | None = None
    try:
        mcfg = to_modulo_config(cfg)
        tracker = open_tracker(mcfg.tracker.name, mcfg.tracker.args)  # a missing extra stops the run here
        if check:
            session = build_session(mcfg)
            from .console import print_check

            print_check(session)
            asyncio.run(session.aclose())
            return 0
        run_dir, claimed = (Path(mcfg.run.dir), None) if mcfg.run.dir else _new_run_dir()
        try:
            with RunLock(run_dir):  # one writer per run directory (re-entrant: run_hydra may hold it already)
                saved = config_yaml(mcfg)  # before the server log's place is filled in: it is not a setting
                keep_server_log(mcfg, run_dir)
                extra = hydra_files(cfg, subdir) if subdir is not None else None
                code = run_and_report(mcfg, run_dir, saved, extra)
        finally:
            if claimed is not None:
                claimed.release()
        if tracker is not None:
            code = log_to_tracker(tracker, run_dir, _job_tags()) or code
        _job_status(run_dir, code, None)
        if code and not _multirun():
            sys.exit(code)  # Hydra drops the task's return value: a failed run must not exit 0
        return code
    except ModuloError as exc:
        from .console import error

        error(exc)
        if HydraConfig.initialized() and not check and not isinstance(exc, RunLockedError):
            _remove_if_empty(run_dir or Path(HydraConfig.get().runtime.output_dir))
        _job_status(run_dir, 2, f"{type(exc).__name__}: {exc}")
        # in multirun, one failing job must not kill the sweep silently: a launcher on this machine shares the
        # status file, and the sweep's end names the job (run_hydra); elsewhere, raise so Hydra reports it
        if _multirun():
            if _local_launcher():
                return 2
            raise
        sys.exit(2)


#: Hydra launchers whose jobs run on this machine, with this process's environment (the sweep status file)
LOCAL_LAUNCHERS = ("BasicLauncher", "JoblibLauncher")


def _local_launcher() -> bool:
    """Whether this sweep's jobs run on this machine (Hydra's basic launcher or joblib)."""
    if not os.environ.get(SWEEP_STATUS_ENV) or not HydraConfig.initialized():
        return False
    target = str(HydraConfig.get().launcher.get("_target_", ""))
    return target.rpartition(".")[2] in LOCAL_LAUNCHERS


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


def keep_server_log(cfg: ModuloConfig, run_dir: Path) -> None:
    """A backend that runs a server of its own (``log_file`` argument, such as llm=local) writes the
    server's log into the run directory unless told otherwise, so a crash leaves its evidence there."""
    from .. import components

    if "log_file" in cfg.llm.args or cfg.llm.name not in components.llms.names():
        return
    try:
        factory = components.llms.get(cfg.llm.name)
    except ModuloError:
        return  # binding reports it
    if "log_file" in inspect.signature(factory).parameters:
        cfg.llm.args["log_file"] = str(run_dir / SERVER_LOG)


#: the file name of a local server's log inside the run directory
SERVER_LOG = "llm-server.log"


def report_sweep(status_file: Path) -> int:
    """After a sweep: name every job that failed or ended with errored problems. Returns an exit code."""
    try:
        jobs = [json.loads(line) for line in status_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return 0
    failed = [j for j in jobs if j.get("code")]
    if not failed:
        return 0
    from .console import err_console

    err_console.print(f"[bold red]sweep: {len(failed)} of {len(jobs)} jobs failed[/]")
    reasons = {1: "problems ended in error", 2: "did not start", 3: "stopped", 4: "finished, not logged to the tracker"}
    for job in failed:
        what = job.get("error") or reasons.get(job.get("code"), f"exit code {job.get('code')}")
        where = job.get("dir") if job.get("dir") and Path(job["dir"]).is_dir() else ""  # a refused job's is removed
        err_console.print(
            f"  {' '.join(job.get('overrides') or []) or '(no overrides)'}: {what}  {where}",
            markup=False,
            soft_wrap=True,
        )
    return 1


#: Hydra launchers and the extra of pyproject.toml that installs each one's plugin
LAUNCHER_EXTRAS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "joblib"),
    "ray": ("hydra_plugins.hydra_ray_launcher", "ray"),
    "ray_local": ("hydra_plugins.hydra_ray_launcher", "ray"),
    "slurm": ("hydra_plugins.hydra_submitit_launcher", "slurm"),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "slurm"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "slurm"),
}


#: the entry-point group through which a package ships Hydra config group entries (its benchmarks' defaults)
CONFIG_GROUP = "modulo.configs"


def config_dirs() -> list[Path]:
    """The config directories packages ship (entry points of ``modulo.configs``), added to Hydra's search
    path after modulo's own conf/: ``NAME = "package.sub.dir"`` names a directory inside an installed
    package holding config groups (``benchmark/mylab/bench.yaml``). Found without importing the package:
    listing config options never runs plugin code. A directory that does not exist is an error."""
    import importlib.util

    found_eps = sorted(group_entry_points(CONFIG_GROUP), key=lambda e: e[0].name)
    if not any(dist == "modulo" for _, dist in found_eps):
        # modulo's own package declares its benchmarks' config folders: none means an install made
        # before they existed, whose benchmark defaults would silently be missing
        raise ConfigError(
            f"modulo's installed metadata declares no {CONFIG_GROUP} entry points (the install is older than "
            'the source): re-run the install, e.g. pip install -e ".[dev]" in the modulo checkout'
        )
    out: list[Path] = []
    for ep, dist in found_eps:
        top, *rest = ep.value.split(":")[0].strip().split(".")
        spec = importlib.util.find_spec(top)
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        found = [Path(loc).joinpath(*rest) for loc in locations if Path(loc).joinpath(*rest).is_dir()]
        if not found:
            raise ConfigError(
                f"the config directory {ep.value!r} registered under {CONFIG_GROUP} as {ep.name!r} "
                f"(package {dist or '?'}) does not exist; reinstall that package"
            )
        out.append(found[0].resolve())
    return out


def search_path_override() -> list[str]:
    """``hydra.searchpath=[...]`` with every package's config directory (none when no package ships one)."""
    dirs = config_dirs()
    if not dirs:
        return []
    return ["hydra.searchpath=[" + ",".join(f"'file://{d}'" for d in dirs) + "]"]


def group_options(conf_dir: Path, group: str) -> list[str]:
    """The options of a config group: its YAML files in conf/ and in every package's config directory,
    ``natural_plan/trip`` for nested ones."""
    options: set[str] = set()
    for base in (conf_dir, *config_dirs()):
        root = base / group
        options.update(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))
    return sorted(options)


def _override_values(arg: str) -> tuple[str, list[str]] | None:
    """``(group, [values])`` of an override that picks config-group options (``llm=openai``,
    ``+experiment=x``, ``critics`` excluded: it is a plain field); None for anything else."""
    if arg.startswith("-") or "=" not in arg:
        return None
    key, _, value = arg.lstrip("+~").partition("=")
    if "." in key or "(" in value or "[" in value or not value:
        return None  # sweeps through choice()/range() and list values are Hydra's to parse
    return key, [v.strip() for v in value.split(",")]


def check_overrides(argv: list[str], conf_dir: Path) -> list[str]:
    """Refuse an unknown config-group option before Hydra composes anything, with a did-you-mean.

    A benchmark name lists every registered benchmark (config files and plugins); a registered
    benchmark without a config file runs through ``benchmark=custom``; a launcher whose plugin is not
    installed names the pip command that brings it. Returns ``argv``, rewritten for such benchmarks.
    """
    import importlib.util

    from .. import components

    groups = {p.name for base in (conf_dir, *config_dirs()) for p in base.iterdir() if p.is_dir() and p.name != "hydra"}
    out: list[str] = []
    for arg in argv:
        key = arg.partition("=")[0]
        if "=" in arg and "." in key and not arg.startswith(("-", "+", "~")) and not {"/", "@"} & set(key):
            if key.split(".")[0] != "hydra":  # Hydra's own keys are Hydra's to check
                check_override_key(key)
        parsed = _override_values(arg)
        if parsed is None:
            out.append(arg)
            continue
        group, values = parsed
        if group == "hydra/launcher":
            for value in values:
                module, extra = LAUNCHER_EXTRAS.get(value, ("", ""))
                if module and importlib.util.find_spec(module.split(".")[0]) is not None:
                    found = importlib.util.find_spec(module) is not None
                else:
                    found = not module
                if not found:
                    raise ConfigError(
                        f"hydra/launcher={value} needs Hydra's launcher plugin ({module}), which is not "
                        f'installed. Install it with: pip install -e ".[{extra}]"   (in a modulo checkout)'
                    )
            out.append(arg)
            continue
        if group not in groups:
            out.append(arg)
            continue
        options = group_options(conf_dir, group)
        if group == "benchmark":
            registered = components.benchmarks.names()
            missing = [v for v in values if v not in options and v not in registered]
            if missing:
                known = sorted(set(registered) | (set(options) - {"custom"}))
                raise UnknownComponentError("benchmark", missing[0], known, suggest(missing[0], known))
            plugins = [v for v in values if v not in options]
            if plugins and len(values) == 1:  # registered, no config file: the generic benchmark node
                out += ["benchmark=custom", f"benchmark.name={plugins[0]}"]
                continue
            if plugins:
                raise ConfigError(
                    f"benchmark {plugins[0]!r} has no config file to sweep over; run it on its own with "
                    f"benchmark=custom benchmark.name={plugins[0]}"
                )
        else:
            for value in values:
                if value not in options:
                    raise ConfigError(
                        f"unknown {group} {value!r}.{_did_you_mean(value, options)} "
                        f"Options of {group}: {', '.join(options)}"
                    )
        out.append(arg)
    return out


def duplicate_critic_jobs(argv: list[str], conf_dir: Path) -> list[list[str]]:
    """Values of a swept ``critics=a,b,...`` that select the same critics on the chosen benchmark
    (``hard`` and ``all`` on a benchmark with no commonsense critics): each group runs the same job.

    The config is composed once, with the first value of every swept list, to learn the benchmark.
    """
    from ..binding import bind_benchmark
    from ..build import expand_critics

    swept = [a for a in argv if a.startswith("critics=") and "," in a and "[" not in a and "(" not in a]
    if not swept:
        return []
    values = [v.strip() for v in swept[-1].partition("=")[2].split(",")]
    first = []
    for arg in argv:
        if arg.startswith("-"):
            continue
        key, eq, value = arg.partition("=")
        if eq and "," in value and not value.startswith(("[", "'", '"')) and "(" not in value:
            arg = f"{key}={value.split(',')[0]}"
        first.append(arg)
    mcfg = compose_config(first)
    bench = bind_benchmark(mcfg.benchmark.name, mcfg.benchmark.args, mcfg.data_dir)
    groups: dict[tuple[str, ...], list[str]] = {}
    for value in values:
        groups.setdefault(tuple(sorted(expand_critics(value, bench))), []).append(value)
    return [names for names in groups.values() if len(names) > 1]


def warn_duplicate_jobs(argv: list[str], conf_dir: Path) -> None:
    """Name the jobs of a sweep that would repeat one another, before any of them starts."""
    try:
        duplicates = duplicate_critic_jobs(argv, conf_dir)
    except Exception as exc:  # the sweep itself reports a config problem; this is only a notice
        logging.getLogger(__name__).debug("duplicate-job check skipped: %s", exc)
        return
    from .console import err_console

    for names in duplicates:
        err_console.print(
            f"[yellow]sweep:[/] critics={', critics='.join(names)} select the same critics on this "
            "benchmark: those jobs are duplicates (their results will be identical up to sampling)",
            soft_wrap=True,
        )


def run_hydra(argv: list[str], *, check: bool = False) -> None:
    """Run the Hydra app on ``argv`` (overrides and Hydra flags such as ``-m``)."""
    from ..llm.keys import reject_secret_overrides

    reject_secret_overrides(argv)  # before Hydra writes the overrides into the run directory
    argv = check_overrides(argv, resource_dir("conf"))
    register_schema()
    conf_dir = str(resource_dir("conf"))
    multirun = bool({"-m", "--multirun"} & set(argv))
    # Hydra saves .hydra/ (or the user's hydra.output_subdir) before the task runs, into a directory another
    # run may hold; the run saves those files instead, once its directory is locked and accepts the configuration
    subdir = None if check else hydra_subdir(argv)
    app = hydra.main(config_path=conf_dir, config_name="config", version_base="1.3")(_task(check, subdir))
    if check and not multirun:
        # a check runs nothing: no output directory, no log file, no saved config
        argv = _with_overrides(argv, ["hydra.output_subdir=null", "hydra.run.dir=.", "hydra/job_logging=none"])
    else:
        argv = _with_overrides(
            [a for a in argv if a.lstrip("+~").partition("=")[0] != "hydra.output_subdir"], ["hydra.output_subdir=null"]
        )
    argv = _with_overrides(argv, search_path_override())  # the benchmarks' own config groups
    # a sweep into a timestamped directory claims its own first (another sweep may have started this second)
    claimed = claim_sweep_dir(argv) if multirun and not check else None
    if claimed is not None:
        argv = _with_overrides(argv, [f"hydra.sweep.dir={_override_value(str(claimed))}"])
    # a single run into a known directory is locked before Hydra creates its log file there
    lock = RunLock(Path(known)) if not check and not multirun and (known := _run_dir_of(argv)) else None
    made = lock is not None and not lock.path.exists()  # the lock makes the directory: a refusal removes it
    ran = False
    old = sys.argv
    sys.argv = ["modulo " + ("check" if check else "run"), *argv]
    status: Path | None = None
    if {"-m", "--multirun"} & set(argv) and not check:
        warn_duplicate_jobs(argv, resource_dir("conf"))
        handle, name = tempfile.mkstemp(prefix="modulo-sweep-", suffix=".jsonl")
        os.close(handle)
        status = Path(name)
        os.environ[SWEEP_STATUS_ENV] = name
    started = _TASKS_STARTED[0]
    try:
        if lock is not None:
            lock.acquire()
        try:
            app()
        except SystemExit as exc:
            from .console import EXIT_ERRORS, EXIT_NOT_STARTED

            # Hydra exits 1 after printing its own error (an override naming no key, a value it cannot parse),
            # before any task ran: nothing ran, which is exit 2, not 1 ("done, but not all well")
            ran = _TASKS_STARTED[0] > started or (status is not None and status.stat().st_size > 0)
            if exc.code == EXIT_ERRORS and not ran:
                raise SystemExit(EXIT_NOT_STARTED) from None
            raise
        ran = True
        code = report_sweep(status) if status is not None else 0
    finally:
        sys.argv = old
        if lock is not None:
            lock.release()
            # Hydra refused an override before any task ran: the directory only the lock made goes too
            if made and not ran and _TASKS_STARTED[0] == started and lock.path.is_dir():
                if {p.name for p in lock.path.iterdir()} <= {".lock"}:
                    shutil.rmtree(lock.path, ignore_errors=True)
        if claimed is not None and not ran and _TASKS_STARTED[0] == started:
            with contextlib.suppress(OSError):  # Hydra refused the sweep: the directory it claimed goes (if empty)
                claimed.rmdir()
        if status is not None:
            os.environ.pop(SWEEP_STATUS_ENV, None)
            status.unlink(missing_ok=True)
    if code:
        sys.exit(code)


#: Hydra's flags that print or complete and launch nothing (a sweep given one makes no directory)
_NO_LAUNCH_FLAGS = frozenset(
    {"-c", "--cfg", "-i", "--info", "-h", "--help", "--hydra-help", "-sc", "--shell-completion", "--resolve"}
)


def claim_sweep_dir(argv: list[str]) -> Path | None:
    """The sweep directory of a sweep whose directory is timestamped (``multirun/DATE/H-M-S``, or an
    experiment's), claimed before Hydra starts: Hydra's own, or, when another sweep already holds it (sweeps
    started within one second of each other), its first free sibling ``H-M-S-2``, ``H-M-S-3``, ... The claim
    is the directory's creation (``mkdir`` is atomic: of two processes, one makes it), and run_hydra passes it
    as ``hydra.sweep.dir=``, so every job, in this process or a launcher's, reads the same literal directory.
    None, and nothing made, for a sweep that names its directory (``hydra.sweep.dir=...``, or a preset whose
    directory has no timestamp): running into it again resumes each job, as before."""
    if any(a.lstrip("+~").startswith("hydra.sweep.dir=") for a in argv):
        return None
    if any(a.partition("=")[0] in _NO_LAUNCH_FLAGS for a in argv):
        return None
    template, resolved = _sweep_dir_of(argv)
    if "${now:" not in template.replace(" ", ""):
        return None
    path = Path(resolved)
    path.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, MAX_SIBLINGS + 1):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise RunError(f"{path} and its {MAX_SIBLINGS - 1} siblings are taken; name one with hydra.sweep.dir=DIR")


def _sweep_dir_of(argv: list[str]) -> tuple[str, str]:
    """``(template, resolved)``: the sweep directory the overrides of ``argv`` compose, as written (with its
    interpolations) and resolved now, as Hydra's multirun composes it (the job name is Hydra's: this file's)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import setup_globals
    from hydra.types import RunMode

    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    register_schema()
    GlobalHydra.instance().clear()
    try:
        conf_dir = str(resource_dir("conf"))
        with initialize_config_dir(config_dir=conf_dir, version_base="1.3", job_name=Path(__file__).stem):
            setup_globals()
            cfg = (
                GlobalHydra.instance()
                .config_loader()
                .load_configuration(config_name="config", overrides=overrides, run_mode=RunMode.MULTIRUN)
            )
            sweep = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)
            assert isinstance(sweep, dict)
            return str(sweep["dir"]), str(cfg.hydra.sweep.dir)
    except ModuloError:
        raise
    except Exception as exc:  # Hydra's own override errors: a typo must read as a config error
        raise ConfigError(
            f"the sweep directory could not be composed ({type(exc).__name__}: {exc}); "
            "name one with hydra.sweep.dir=DIR"
        ) from None
    finally:
        GlobalHydra.instance().clear()


def _override_value(value: str) -> str:
    """``value`` as a Hydra override's value: bare when Hydra's grammar reads it as that string, else quoted
    (a quote or a backslash in it, which Hydra's quoting would change, is refused)."""
    import re

    if re.fullmatch(r"[\w./:@~+-]+", value):
        return value
    if "'" in value or "\\" in value:
        raise ConfigError(f"the sweep directory {value!r} cannot be passed to Hydra; name one with hydra.sweep.dir=DIR")
    return f"'{value}'"


#: overrides run_hydra adds to every sweep: left out of the command that runs a sweep again
_ADDED_SWEEP_OVERRIDES = ("hydra.sweep.dir=", "hydra.output_subdir=", "hydra.searchpath=", "hydra.mode=")


def sweep_command(sweep_dir: Path) -> str | None:
    """The ``modulo run -m ...`` command that runs the sweep in ``sweep_dir`` again into it (each job resumes
    its own directory: finished problems are kept), from its ``multirun.yaml``; None when there is none."""
    import shlex

    import yaml

    try:
        saved = yaml.safe_load((sweep_dir / "multirun.yaml").read_bytes().decode("utf-8"))
        overrides = saved["hydra"]["overrides"]
        args = [str(o) for o in [*overrides.get("hydra", []), *overrides.get("task", [])]]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError, AttributeError):
        return None
    args = [a for a in args if not a.startswith(_ADDED_SWEEP_OVERRIDES)]
    return shlex.join(["modulo", "run", "-m", *args, f"hydra.sweep.dir={sweep_dir}"])


def current_sweep_dir() -> Path | None:
    """The sweep directory of the running sweep job (None outside a sweep)."""
    if not _multirun():
        return None
    return Path(str(HydraConfig.get().sweep.dir))


def _with_overrides(argv: list[str], extra: list[str]) -> list[str]:
    """``argv`` with ``extra`` overrides placed among the user's own.

    Hydra's argument parser takes the overrides as one run of positional arguments: an override put
    after a flag's value (``--cfg hydra -p hydra.launcher``) would be refused, so the extras go right
    after the user's last override (or first, when there is none).
    """
    last = max((i for i, a in enumerate(argv) if "=" in a and not a.startswith("-")), default=-1)
    return [*argv[: last + 1], *extra, *argv[last + 1 :]]


def _run_dir_of(argv: list[str]) -> str | None:
    """The run directory a single run's overrides name (run.dir, else hydra.run.dir), or None."""
    found: dict[str, str] = {}
    for a in argv:
        name, sep, value = a.lstrip("+~").partition("=")
        if sep and name in ("run.dir", "hydra.run.dir") and value and "${" not in value:
            found[name] = value.strip("'\"")
    return found.get("run.dir") or found.get("hydra.run.dir")
