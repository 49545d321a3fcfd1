"""``modulo critics extract BENCHMARK [CONSTRAINT ...] [llm=... llm.KEY=VALUE ...] [options]``.

The ``KEY=VALUE`` arguments are Hydra overrides of the same ``llm``, ``cache``, ``benchmark`` and
``data_dir`` keys ``modulo run`` takes (composed here, converted to plain dataclasses, then handed to
:mod:`modulo.extract`, which never sees Hydra).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError, ModuloError
from ..extract.gate import (
    DEFAULT_ATTEMPTS,
    DEFAULT_COUNTEREXAMPLES,
    DEFAULT_HELD_OUT,
    DEFAULT_MEMORY_MB,
    DEFAULT_MIN_RECALL,
    DEFAULT_PROBLEMS,
    DEFAULT_TIMEOUT_S,
)
from ..extract.loop import DEFAULT_PREFIX

#: the configuration keys an extraction reads
ALLOWED = ("llm", "cache", "benchmark", "data_dir")


def compose_config(benchmark: str, overrides: list[str]):  # type: ignore[no-untyped-def]
    """The ModuloConfig of ``benchmark=BENCHMARK`` plus ``overrides`` (checked like ``modulo run``'s)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from ..llm.keys import reject_secret_overrides
    from ..resources import resource_dir
    from .hydra_app import check_overrides, register_schema, search_path_override, to_modulo_config

    for arg in overrides:
        key = arg.lstrip("+~").partition("=")[0].split(".")[0]
        if key not in ALLOWED:
            raise ConfigError(
                f"modulo critics extract takes overrides of {', '.join(k + '.*' for k in ALLOWED[:3])} and data_dir; "
                f"{arg!r} is not one of them"
            )
    reject_secret_overrides(overrides)
    conf_dir = resource_dir("conf")
    argv = check_overrides([f"benchmark={benchmark}", *overrides], conf_dir)
    register_schema()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[*argv, *search_path_override()])
    except Exception as exc:  # Hydra's own override errors: a typo must read as a config error
        if isinstance(exc, ModuloError):
            raise
        raise ConfigError(f"{type(exc).__name__}: {exc}") from None
    finally:
        GlobalHydra.instance().clear()
    return to_modulo_config(cfg)


@click.command("extract", context_settings={"ignore_unknown_options": False})
@click.argument("benchmark")
@click.argument("args", nargs=-1)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="folder (default extracted/BENCH)")
@click.option("--attempts", type=int, default=DEFAULT_ATTEMPTS, show_default=True, help="candidates per constraint")
@click.option(
    "--min-recall",
    type=float,
    default=DEFAULT_MIN_RECALL,
    show_default=True,
    help="recall on invalid plans needed on each part (false rejections allowed: none)",
)
@click.option("--held-out", type=float, default=DEFAULT_HELD_OUT, show_default=True, help="problems held out")
@click.option("--problems", type=int, default=DEFAULT_PROBLEMS, show_default=True, help="problems in the gate set")
@click.option("--seed", type=int, default=0, show_default=True, help="gate set and split seed")
@click.option("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S, show_default=True, help="deadline per plan")
@click.option("--memory-mb", type=int, default=DEFAULT_MEMORY_MB, show_default=True, help="sandbox memory limit")
@click.option("--counterexamples", type=int, default=DEFAULT_COUNTEREXAMPLES, show_default=True)
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="critics are named PREFIX/CONSTRAINT")
@click.option("--force", is_flag=True, help="replace an earlier extraction in --out")
def critics_extract(
    benchmark: str, args: tuple[str, ...], out: Path | None, prefix: str, force: bool, **gate: Any
) -> None:
    """Extract critics with an LLM, admitted only through the benchmark's oracle gate.

    \b
    Example:
      modulo critics extract synth/calendar llm=scripted llm.script=experiments/scripts/extract_calendar.json
      modulo critics extract synth/calendar synth_busy llm=openai llm.model=gpt-4o --attempts 5
    Writes the gate reports, extraction.md/.json and (when any critic is admitted) an installable plugin
    package into --out. Exit 0 when every constraint's critic was admitted, 1 when some were not, 2 when
    nothing could run.
    """
    from ..build import build_benchmark, build_llm
    from ..extract.gate import GateSettings
    from ..extract.run import run_extraction
    from .console import err_console, error

    constraints = [a for a in args if "=" not in a]
    overrides = [a for a in args if "=" in a]
    try:
        cfg = compose_config(benchmark, overrides)
        settings = GateSettings(**gate)  # --attempts ... --counterexamples are the gate's settings by name
        bench = build_benchmark(cfg)
        client = build_llm(cfg)
        folder = out if out is not None else Path("extracted") / cfg.benchmark.name.replace("/", "-")

        def progress(line: str) -> None:
            err_console.print(f"[dim]extract[/] {line}", markup=True, highlight=False, soft_wrap=True)

        async def go() -> Any:
            try:
                await client.start()  # a backend with a start step (llm=local) starts and checks itself first
                return await run_extraction(
                    bench,
                    constraints,
                    client,
                    settings,
                    folder,
                    prefix=prefix,
                    benchmark_args=cfg.benchmark.args,
                    temperature=cfg.llm.temperature,
                    force=force,
                    progress=progress,
                )
            finally:
                await client.aclose()

        result = asyncio.run(go())
    except ModuloError as exc:
        error(exc)
        sys.exit(2)
    text = (result.out / "extraction.md").read_text(encoding="utf-8")
    click.echo(text)
    click.echo(f"written to {result.out}")
    sys.exit(0 if len(result.admitted) == len(result.results) else 1)
