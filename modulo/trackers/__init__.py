"""Experiment trackers: a plugin kind (entry-point group ``modulo.trackers``) that logs finished runs.

``modulo run ... tracker=mlflow`` logs the run, or each job of a sweep, as one tracker run once its
records, summary and report are written. A tracker is a :class:`Tracker` subclass registered under
``modulo.trackers`` (the built-in ``mlflow`` one is declared in modulo's own pyproject.toml exactly as
a third-party package would declare, say, ``wandb``); it is created before the run starts, so a
missing extra or a wrong argument stops the run before any model call. What a tracker logs comes from
:func:`tracked_run`, the same for every tracker:

* parameters: the method label's parts (generator, critics, strategy, feedback, budget, model), the
  benchmark and split, and the run's configuration from run.json (``cfg.*``; run.json holds no secret,
  and it is redacted again here);
* metrics: the benchmark's metrics, the certified rate, outcome counts, usage and cost, and two step
  series over the iteration budget k: ``certified_at_budget`` and ``<primary metric>_at_budget``;
* tags: git revision, modulo version, template versions, critic source, and what the caller adds
  (the sweep directory and job number under Hydra's multirun);
* artifacts: report.md, the figures and CSV tables, records.jsonl, run.json, config.yaml,
  summary.json and evaluation.json.
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..errors import ConfigError
from ..redact import redact_data

#: files of a run directory a tracker stores as artifacts (when present), besides figures and CSV tables
RUN_FILES = ("report.md", "records.jsonl", "run.json", "config.yaml", "summary.json", "evaluation.json")
#: longest parameter value a tracker is given (MLflow's limit is 6000; shorter keeps the UI readable)
MAX_PARAM_CHARS = 500


class Tracker(ABC):
    """Logs finished run directories to an experiment tracker."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""

    @abstractmethod
    def log_run(self, run_dir: Path, *, tags: Mapping[str, str] | None = None) -> str:
        """Log one finished run directory; return where it went (a run id or a URI)."""


@dataclass
class TrackedRun:
    """What every tracker logs for one run directory."""

    name: str
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    #: metric -> [(step, value)]
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _param_text(value: Any) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."


def _status(run_dir: Path) -> str:
    from ..reports import load_run
    from ..reports.load import ensure_evaluation

    run = load_run(run_dir, light=True)
    ensure_evaluation(run, reevaluate=False)
    return run.status


def tracked_run(run_dir: Path) -> TrackedRun:
    """Parameters, metrics, step series, tags and artifacts of a finished run directory."""
    from ..analysis import load_metas
    from ..analysis.budget import UNSCORED, certified_at_budget, pass_rate_at_budget
    from ..analysis.frames import build_frame
    from ..analysis.runs import LABEL_COLUMNS

    (meta,) = load_metas([run_dir])
    info = meta.info
    out = TrackedRun(name=meta.path.name)
    labels = {k: v for k, v in meta.labels.items() if k in LABEL_COLUMNS and k != "run"}
    params: dict[str, Any] = {**labels, **{f"cfg.{k}": v for k, v in meta.params().items()}}
    out.params = {k: _param_text(v) for k, v in redact_data(params).items()}

    evaluation = meta.evaluation or {}
    for key, value in (evaluation.get("metrics") or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out.metrics[str(key)] = float(value)
    problems = build_frame([meta], "problems")
    n = len(problems)
    unpriced = [str(m) for m in (meta.summary or {}).get("unpriced_models") or []]
    out.metrics["problems"] = float(n)
    scored = int((~problems["outcome"].isin(UNSCORED)).sum()) if n else 0
    if scored:  # errored and skipped problems are left out of the rate, as in the report
        out.metrics["certified_rate"] = float(problems["certified"].sum()) / scored
    if n:
        for outcome, count in problems["outcome"].value_counts().items():
            out.metrics[f"n_{outcome}"] = float(count)
        for key in ("calls", "failed_calls", "cached_calls", "input_tokens", "output_tokens", "total_tokens"):
            out.metrics[key] = float(problems[key].sum())
        for key in ("seconds",) if unpriced else ("cost_usd", "cached_cost_usd", "seconds"):
            out.metrics[key] = float(problems[key].sum())
        if unpriced:  # those calls counted $0: a dollar metric would be a lower bound posing as a price
            out.notes.append(f"no dollar metrics: no price is known for {', '.join(unpriced)}")
        out.metrics["iterations"] = float(problems["iterations"].sum())
        out.series["certified_at_budget"] = [(k, hits / total) for k, hits, total in certified_at_budget(meta)]
    curve = pass_rate_at_budget(meta)
    if curve is not None:
        out.series[f"{curve[0]}_at_budget"] = curve[1]

    out.tags = {
        "modulo.run_dir": str(meta.path.resolve()),
        "modulo.benchmark": meta.benchmark_name,
        "modulo.split": meta.split,
        "modulo.git_revision": info.git_revision or "unknown",
        "modulo.version": info.modulo_version or "unknown",
        "modulo.critic_source": info.critic_source or "unknown",
        "modulo.evaluation": "recorded" if meta.evaluation is not None else "missing",
        # how the run ended, as the report's Status column says it (errors, killed, partial, not evaluated)
        "modulo.status": _status(run_dir),
    }
    if unpriced:
        out.tags["modulo.unpriced_models"] = " ".join(unpriced)
    for role, version in info.templates.items():
        out.tags[f"modulo.template.{role}"] = version
    out.tags = {k: str(v) for k, v in redact_data(out.tags).items()}
    out.artifacts = [run_dir / f for f in RUN_FILES if (run_dir / f).is_file()]
    out.artifacts += sorted(p for p in run_dir.iterdir() if p.suffix in (".png", ".csv") and p.is_file())
    out.notes.extend(n for n in dict.fromkeys(meta.notes) if n not in out.notes)
    return out


def open_tracker(name: str | None, args: Mapping[str, Any] | None = None) -> Tracker | None:
    """The tracker named ``name`` bound to ``args`` (None for no tracker). ConfigError when it cannot be made."""
    if not name or name == "none":
        return None
    from .. import components
    from ..registry import bind_arguments

    factory = components.trackers.get(name)
    kwargs = bind_arguments("tracker", name, factory, dict(args or {}))
    tracker = factory(**kwargs)
    if not isinstance(tracker, Tracker):
        raise ConfigError(f"tracker {name!r} made a {type(tracker).__name__}, not a modulo.trackers.Tracker")
    return tracker


#: exit code of ``modulo run`` when the run finished but its tracker could not log it
EXIT_NOT_TRACKED = 4


def log_to_tracker(tracker: Tracker, run_dir: Path, tags: Mapping[str, str] | None = None) -> int:
    """Log a finished run and say where it went; 0, or EXIT_NOT_TRACKED (with the reason) when logging failed.

    The run's records are safe on disk either way: ``modulo track RUN_DIR`` logs it again later.
    """
    try:
        where = tracker.log_run(run_dir, tags=tags)
    except Exception as exc:  # any failure of a tracker's own library: the run itself is done and on disk
        print(
            f"tracker {tracker.name}: the run was NOT logged ({type(exc).__name__}: {exc}); "
            f"log it later with: modulo track {run_dir} --tracker {tracker.name}",
            file=sys.stderr,
        )
        return EXIT_NOT_TRACKED
    print(f"tracker {tracker.name}: logged {run_dir} to {where}")
    return 0


__all__ = [
    "EXIT_NOT_TRACKED",
    "MAX_PARAM_CHARS",
    "RUN_FILES",
    "TrackedRun",
    "Tracker",
    "log_to_tracker",
    "open_tracker",
    "tracked_run",
]
