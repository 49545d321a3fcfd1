"""The run-level part of the analysis API: what ran (labels, configuration), never the records.

A :class:`RunMeta` holds a run directory's ``run.json``, ``summary.json`` and ``evaluation.json`` and
the labels every frame carries as columns, so that ``groupby`` works across the jobs of a sweep. The
records themselves are read line by line when a frame is built (:mod:`modulo.analysis.records`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RunError
from ..redact import safe_config
from ..reports.labels import (
    budget_label,
    critics_label,
    feedback_label,
    generator_label,
    method_label,
    requested_critics_label,
    strategy_label,
)
from ..reports.load import RunData, RunInfoView, _assign_names, find_runs
from ..runinfo import RunInfo, read_run_info

#: run.json keys that are bookkeeping, not configuration (left out of ``params``)
_NOT_PARAMS = {
    "version",
    "run_id",
    "created",
    "problem_ids",
    "modulo_version",
    "git_revision",
    "templates",
    "execution",
    "legacy",
}
#: label columns every frame starts with, in this order
LABEL_COLUMNS = (
    "run",
    "method",
    "benchmark",
    "split",
    "model",
    "generator",
    "critics",
    "critics_requested",
    "strategy",
    "feedback",
    "budget",
    "max_iterations",
    "critic_source",
    "critic_mode",
    "sample",
)


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise RunError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists become JSON text so that every value is a scalar."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping):
            nested = flatten(item, f"{name}.")
            out.update(nested if nested else {name: None})
        elif isinstance(item, list | tuple):
            out[name] = json.dumps(list(item), default=str)
        else:
            out[name] = item
    return out


@dataclass
class RunMeta(RunInfoView):
    """One run directory as the analysis API sees it (no records held)."""

    path: Path
    info: RunInfo
    summary: dict[str, Any] | None
    evaluation: dict[str, Any] | None
    name: str = ""
    notes: list[str] = field(default_factory=list)
    labels: dict[str, Any] = field(default_factory=dict)

    @property
    def problem_ids(self) -> list[str]:
        return list(self.info.problem_ids)

    def params(self) -> dict[str, Any]:
        """The run's configuration from run.json as flat dotted keys (what a tracker logs as parameters).

        Passed through :func:`~modulo.redact.safe_config` (run.json holds no secret; this keeps it so)."""
        return flatten(safe_config(self.info.model_dump(mode="json", exclude=_NOT_PARAMS)))

    def report_view(self) -> RunData:
        """A records-less :class:`~modulo.reports.load.RunData` for the reports' label functions."""
        return RunData(path=self.path, info=self.info, records={}, name=self.name)


def label_parts(view: RunData) -> dict[str, str]:
    """What ran, part by part (generator, critics, strategy, feedback, budget, model), as the reports label it."""
    return {
        "generator": generator_label(view),
        "critics": critics_label(view),
        "strategy": strategy_label(view),
        "feedback": feedback_label(view),
        "budget": budget_label(view),
        "model": view.model,
    }


def _labels(meta: RunMeta) -> dict[str, Any]:
    view = meta.report_view()
    info = meta.info
    return {
        "run": meta.name,
        "method": method_label(view),
        "benchmark": meta.benchmark_name,
        "split": meta.split,
        **label_parts(view),
        "critics_requested": requested_critics_label(view),
        "max_iterations": view.max_iterations,
        "critic_source": info.critic_source,
        "critic_mode": info.critic_options.mode,
        "sample": info.sample,
    }


def load_meta(path: Path) -> RunMeta:
    return RunMeta(
        path=path,
        info=read_run_info(path),
        summary=_read_json(path / "summary.json"),
        evaluation=_read_json(path / "evaluation.json"),
    )


def load_metas(paths: Iterable[str | Path]) -> list[RunMeta]:
    """Every run under ``paths`` (run directories or sweep roots), named and labelled."""
    dirs = find_runs(paths)
    metas = [load_meta(p) for p in dirs]
    views = [RunData(path=m.path, info=m.info, records={}) for m in metas]
    _assign_names(views)
    for meta, view in zip(metas, views, strict=True):
        meta.name = view.name
        meta.labels = _labels(meta)
        if meta.evaluation is None:
            meta.notes.append("no evaluation.json (the run did not finish): the benchmark's columns are empty")
    return metas
