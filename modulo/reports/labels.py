"""Labels that say exactly what ran, derived from a run's ``run.json`` (the request and what it resolved to).

* :func:`method_parts` / :func:`method_label`: generator and prompt, critics as requested and as
  resolved, backprompt strategy, feedback level, budget, model and temperature;
* :func:`short_labels`: per run, only the parts that differ within a group of runs (legends and panel
  titles), with :func:`common_label` for the parts they share (figure subtitles);
* :func:`duplicate_groups`: runs of a sweep whose resolved configurations are identical (for example
  ``critics=hard`` and ``critics=all`` on a benchmark without commonsense critics).

A free-form ``labels.method`` given by the user is shown beside the derived label, never instead of it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ModuloError
from ..types import canonical_json
from .load import RunData
from .metrics import critic_groups

#: run.json keys that say nothing about what ran (identity, time, provenance, how it was labelled or executed)
_NOT_CONFIGURATION = frozenset(
    {
        "version",
        "run_id",
        "created",
        "git_revision",
        "modulo_version",
        "execution",
        "labels",
        "critics_requested",
        "legacy",
    }
)


def critic_presets(run: RunData) -> list[tuple[str, list[str]]]:
    """The critic presets of the run's benchmark, in order [All], [Common], [Hard], [Json], with members.

    Empty when the benchmark (or its critic list) is not available here.
    """
    bench = run.benchmark_or_none()
    every: list[str] = []
    if bench is not None:
        try:
            every = list(bench.critic_names())
        except (ModuloError, NotImplementedError):
            every = []
    if not every:
        return []
    groups = critic_groups(run, every)
    fmt = [c for c in every if groups.get(c) == "format"] or [c for c in every if c == "format"]
    common = [c for c in every if groups.get(c) == "commonsense"]
    hard = [c for c in every if groups.get(c) == "hard"]
    presets = [("[All]", every)]
    if common:
        presets.append(("[Common]", fmt + common))
    if hard:
        presets.append(("[Hard]", fmt + hard))
    if fmt:
        presets.append(("[Json]", fmt))
    return presets


def critics_label(run: RunData, groups: dict[str, str] | None = None) -> str:
    """The critics that ran: [All]/[Common]/[Hard]/[Json] when the set equals a preset, else their names.

    This is the *resolved* set; :func:`requested_critics_label` says what was asked for.
    """
    chosen = run.critics
    if not chosen:
        return "-"
    for label, members in critic_presets(run):
        if set(chosen) == set(members):
            return label
    if len(chosen) <= 3:
        return "+".join(chosen)
    return f"{len(chosen)} critics: {', '.join(chosen[:2])}, ..."


def requested_critics(run: RunData) -> list[str] | None:
    """The ``critics`` request as given (presets and names), or None for runs that did not record it."""
    raw = run.info.critics_requested
    return list(raw) if raw is not None else None


def requested_critics_label(run: RunData) -> str:
    """``hard (= [All])``: the request, and what it resolved to when the two read differently."""
    resolved = critics_label(run)
    asked = requested_critics(run)
    if asked is None:
        return resolved
    text = "+".join(asked) if asked else "none"
    if len(asked) == 1 and resolved == f"[{asked[0].capitalize()}]":
        return resolved
    if asked == run.critics or (len(asked) <= 3 and "+".join(asked) == resolved):
        return resolved
    return f"{text} (= {resolved})"


def budget_label(run: RunData) -> str:
    budget = run.info.budget
    parts: list[str] = [f"{budget.max_iterations} it"]
    if budget.max_tokens is not None:
        parts.append(f"{budget.max_tokens} tok")
    if budget.max_dollars is not None:
        parts.append(f"${budget.max_dollars}")
    if budget.max_seconds is not None:
        parts.append(f"{budget.max_seconds} s")
    return ", ".join(parts) or "unbounded"


def strategy_label(run: RunData) -> str:
    """The backprompt strategy (with arguments); "single shot" for a run of one iteration."""
    if run.max_iterations == 1:
        return "single shot"
    bp = run.info.backprompt
    if not bp.name:
        return "?"
    extra = ", ".join(f"{k}={v}" for k, v in sorted(bp.args.items()))
    return f"{bp.name}({extra})" if extra else bp.name


def generator_label(run: RunData) -> str:
    gen = run.info.generator
    name = gen.name or "?"
    role = gen.prompt_role
    reform = run.info.reformulator
    text = f"{name}/{role}" if role else name
    return f"{text}, reformulator {reform}" if reform else text


def feedback_label(run: RunData) -> str:
    """The critics' feedback level (binary | explain | hint) as recorded; older runs: from ``hints``.

    Critics set apart from the run's level (``critic_feedback`` in run.json) are named after it:
    ``explain (synth_earliest: hint)``.
    """
    options = run.info.critic_options
    level = "?"
    for value in (run.info.feedback, options.feedback):
        if value:
            level = value
            break
    else:
        if options.hints is not None:
            level = "hint" if options.hints else "explain"
    apart = {k: v for k, v in run.info.critic_feedback.items() if v != level}
    if apart:
        level += " (" + ", ".join(f"{k}: {v}" for k, v in sorted(apart.items())) + ")"
    return level


def temperature_label(run: RunData) -> str:
    llm = run.info.llm
    if llm is None:
        return "-"
    return "T=?" if llm.temperature is None else f"T={llm.temperature:g}"


def user_label(run: RunData) -> str:
    """The free-form ``labels.method`` of the run's configuration ("" when none was given)."""
    return run.info.labels.get("method", "")


def method_parts(run: RunData) -> dict[str, str]:
    """What ran, part by part, in a fixed order (each value reads on its own: ``critics hard (= [All])``)."""
    return {
        "generator": generator_label(run),
        "critics": "critics " + requested_critics_label(run),
        "strategy": "backprompt " + strategy_label(run),
        "feedback": "feedback " + feedback_label(run),
        "budget": "budget " + budget_label(run),
        "model": run.model,
        "temperature": temperature_label(run),
    }


def method_label(run: RunData) -> str:
    """The full label: every part of :func:`method_parts`, after the user's ``labels.method`` if any."""
    derived = "; ".join(method_parts(run).values())
    user = user_label(run)
    return f"{user}: {derived}" if user else derived


def short_labels(runs: Sequence[RunData]) -> dict[str, str]:
    """Run name -> the parts of its label that differ within ``runs`` (the run name alone if none differ).

    Runs whose parts read alike though their configurations differ (a sweep over ``run.sample`` or
    ``critic_options.mode``) are told apart by the configuration keys they differ in."""
    parts = [method_parts(r) for r in runs]
    varying = [k for k in (parts[0] if parts else {}) if len({p[k] for p in parts}) > 1]
    users = {user_label(r) for r in runs}
    bits: dict[str, list[str]] = {}
    for run, p in zip(runs, parts, strict=True):
        bits[run.name] = [p[k] for k in varying]
        if len(users) > 1 and user_label(run):
            bits[run.name].insert(0, user_label(run))
    for name, apart in configuration_apart(runs, {r.name: tuple(bits[r.name]) for r in runs}).items():
        bits[name] += apart
    return {name: f"{name}: {'; '.join(b)}" if b else name for name, b in bits.items()}


def configuration_apart(runs: Sequence[RunData], labels: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """Run name -> ``key value`` for each configuration key (run.json, dotted) in which it differs from the
    runs that carry the same ``labels`` entry; empty for a run whose label is its own, or whose twins resolve
    to the very same configuration (those are flagged by :func:`duplicate_warnings`)."""
    from ..analysis.runs import flatten

    groups: dict[tuple[str, ...], list[RunData]] = {}
    for run in runs:
        groups.setdefault(labels[run.name], []).append(run)
    out: dict[str, list[str]] = {run.name: [] for run in runs}
    for group in groups.values():
        if len(group) < 2:
            continue
        flat = [
            flatten(r.info.model_dump(mode="json", exclude=set(_NOT_CONFIGURATION | {"problem_ids"}))) for r in group
        ]
        keys = sorted({k for f in flat for k in f if len({repr(g.get(k)) for g in flat}) > 1})
        for run, f in zip(group, flat, strict=True):
            out[run.name] = [f"{k} {_short(f.get(k))}" for k in keys]
    return out


def _short(value: object, limit: int = 40) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def common_label(runs: Sequence[RunData]) -> str:
    """The parts of the label that every run in ``runs`` shares."""
    parts = [method_parts(r) for r in runs]
    if not parts:
        return ""
    return "; ".join(v for k, v in parts[0].items() if all(p[k] == v for p in parts))


def resolved_configuration(run: RunData) -> str:
    """A canonical text of what the run resolved to (run.json without identity, time and labels)."""
    data = run.info.model_dump(mode="json", exclude=set(_NOT_CONFIGURATION))
    return canonical_json(dict(sorted(data.items())))


def duplicate_groups(runs: Sequence[RunData]) -> list[list[RunData]]:
    """Groups of two or more runs whose resolved configurations are identical (first-seen order)."""
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        groups.setdefault(resolved_configuration(run), []).append(run)
    return [g for g in groups.values() if len(g) > 1]


def duplicate_warnings(runs: Sequence[RunData]) -> list[str]:
    """One sentence per group of runs that resolve to the same configuration, naming each by its request."""
    lines: list[str] = []
    for group in duplicate_groups(runs):
        named = ", ".join(f"{r.name} (critics {requested_critics_label(r)})" for r in group)
        lines.append(
            f"runs {named} resolve to the same configuration (critics: {', '.join(group[0].critics) or 'none'}; "
            f"{common_label(group)}): they repeat one experiment and do not compare two"
        )
    return lines


def templates_label(run: RunData) -> str:
    templates = run.info.templates
    if not templates:
        return "-"
    return "; ".join(f"{role}={name}" for role, name in sorted(templates.items()))
