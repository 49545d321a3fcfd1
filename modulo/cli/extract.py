"""``modulo critics extract BENCHMARK [CONSTRAINT ...] [llm=... llm.KEY=VALUE ...] [options]``.

The ``KEY=VALUE`` arguments are Hydra overrides of the same ``llm``, ``cache``, ``benchmark`` and
``data_dir`` keys ``modulo run`` takes, composed and checked by the one composition path
(:func:`modulo.cli.hydra_app.compose_config`) into the typed configuration handed to
:mod:`modulo.extract`, which never sees Hydra. Errors go to the CLI's one error printer (exit 2).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from ..config import ModuloConfig
from ..errors import ConfigError
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


def extraction_config(benchmark: str, overrides: list[str]) -> ModuloConfig:
    """The ModuloConfig of ``benchmark=BENCHMARK`` plus ``overrides``, composed and checked as ``modulo run``
    composes them (:func:`modulo.cli.hydra_app.compose_config`); only the keys an extraction reads."""
    from ..llm.keys import reject_secret_overrides
    from .hydra_app import compose_config

    for arg in overrides:
        key = arg.lstrip("+~").partition("=")[0].split(".")[0]
        if key not in ALLOWED:
            raise ConfigError(
                f"modulo critics extract takes overrides of {', '.join(k + '.*' for k in ALLOWED[:3])} and data_dir; "
                f"{arg!r} is not one of them"
            )
    reject_secret_overrides(overrides)
    return compose_config([f"benchmark={benchmark}", *overrides])


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
    from .console import err_console

    constraints = [a for a in args if "=" not in a]
    overrides = [a for a in args if "=" in a]
    cfg = extraction_config(benchmark, overrides)
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
    text = (result.out / "extraction.md").read_text(encoding="utf-8")
    click.echo(text)
    click.echo(f"written to {result.out}")
    sys.exit(0 if len(result.admitted) == len(result.results) else 1)
