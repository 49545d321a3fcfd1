"""Run an extraction end to end and write its files (see :mod:`modulo.extract`)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..benchmark import Benchmark
from ..errors import ConfigError
from .gate import GateSettings
from .loop import DEFAULT_PREFIX, Extraction, ExtractionResult, extract, identifier, select_constraints
from .package import package_names, write_package
from .report import render_summary, write_gate_report, write_json, write_text

#: the file that marks a folder as an extraction's output (a re-run with --force may replace only such a folder)
SUMMARY = "extraction.json"


def prepare_out(out: Path, force: bool) -> None:
    """Refuse to write into a non-empty folder, unless it holds an earlier extraction and ``force`` is set."""
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ConfigError(f"{out} is not empty: choose another --out, or --force to replace an earlier extraction")
        if not (out / SUMMARY).is_file():
            raise ConfigError(f"{out} is not empty and holds no earlier extraction ({SUMMARY}): refusing to replace it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


async def run_extraction(
    bench: Benchmark,
    names: Sequence[str],
    client: Any,
    settings: GateSettings,
    out: Path,
    *,
    prefix: str = DEFAULT_PREFIX,
    benchmark_args: Mapping[str, Any] | None = None,
    temperature: float = 0.0,
    force: bool = False,
    progress: Callable[[str], None] = lambda line: None,
) -> ExtractionResult:
    """Extract a critic for each constraint ``names`` (all when empty) and write the gate reports, the
    summary (``extraction.json``/``.md``) and, when any critic was admitted, the plugin package into ``out``."""
    constraints = select_constraints(bench, names)
    if not prefix or "/" in prefix:
        raise ConfigError(f"--prefix must be a plain name (critics are named PREFIX/CONSTRAINT), not {prefix!r}")
    prepare_out(out, force)
    args = dict(benchmark_args or {})
    ex = Extraction(
        bench, client, settings, out, prefix=prefix, benchmark_args=args, temperature=temperature, progress=progress
    )
    results = await extract(ex, constraints)
    admitted = [r for r in results if r.admitted]
    for r in results:
        if not r.admitted:
            write_gate_report(r, out / "rejected")
    package = write_package(out, bench.name, prefix, admitted) if admitted else None
    usage = client.usage
    summary = {
        "benchmark": bench.name,
        "benchmark_args": args,
        "gate": settings.to_json(),
        "backend": results[0].backend if results else None,
        "model": results[0].model if results else None,
        "usage": usage.model_dump(),
        "package": str(package) if package else None,
        "constraints": [
            {
                "constraint": r.info.name,
                "critic": r.critic,
                "admitted": r.admitted,
                "reason": r.reason,
                "attempts": len(r.attempts),
                "gate_report": (
                    f"{package_names(bench.name, prefix)[1]}/gate/{identifier(r.info.name)}.json"
                    if r.admitted
                    else f"rejected/{identifier(r.info.name)}.json"
                ),
            }
            for r in results
        ],
    }
    write_json(out / SUMMARY, summary)
    write_text(out / "extraction.md", render_summary(bench.name, results, package, usage))
    return ExtractionResult(benchmark=bench.name, results=results, usage=usage, out=out, package=package)
