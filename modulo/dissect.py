"""Error dissection (after PDoctor): why does the planner fail a problem?

For every problem a run failed (outcome ``exhausted`` or ``failed``), the cascade asks, step by step,
whether the failure goes away when something irrelevant changes:

1. ``probability``: the same problem again, ``repeats`` times, each with a fresh sample index (the
   index enters the response-cache key, so each is a real new draw, never a replay of the run);
2. ``wording``: the same constraint set with the constraints worded differently;
3. ``topic``: the same constraint set under another skin (names, domain);
4. ``structure``: an equivalent constraint set written as another problem.

The label is the first step whose run certifies; ``constraint`` when none does (the constraint set
itself defeats the planner). Steps 2-4 use the benchmark's ``variant(problem, wording_seed=...,
topic=..., restructure_seed=...)`` method when it has one (the synthesized benchmarks do); a benchmark
without it gets only step 1 and the label ``persistent`` when the failure survives it. A step whose
variant would read exactly like the original query is skipped (it would be a plain re-run). A step
that could not be run to its end (an LLM error, a spent ``--max-dollars``) labels the problem
``incomplete``; a later call retries it.

Every step is a real :meth:`modulo.metacontroller.Metacontroller.solve` with the run's own loop (critics,
backprompt strategy, budget). The temperature is the run's unless ``temperature`` is given: at
temperature 0 a fresh draw may repeat the first one word for word, which the table counts.

The ``component`` column says which part failed in the run's last iteration: ``format`` (no plan was
read, or a format critic rejected it), ``reformulation`` (an LLM reformulator was used and the
benchmark's deterministic parser reads a plan from the same reply that every critic accepts, so the
generator had it right and the rewrite lost it), else ``plan``.

Outputs, in the run directory or ``out``: ``dissect.jsonl`` (one :class:`Dissection` per problem,
appended as each finishes; a second call skips the problems already there), ``dissect-records.jsonl``
(the full :class:`~modulo.types.ProblemResult` of every step run, tagged in ``metadata``, as lines of
``records.jsonl``: see :mod:`modulo.recordformat`) and
``dissect.md`` (the table).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .build import Session, build_generator, build_session
from .config import ModuloConfig, load_config
from .critic import FORMAT_GROUP
from .errors import ConfigError, RunError
from .metacontroller import Metacontroller, RunAborted, RunBudget
from .runinfo import RunInfo, read_run_info
from .runs import RUN_INFO, latest_records, record_line
from .types import IterationRecord, Outcome, Problem, ProblemResult, Usage, canonical_json

STEPS = ("probability", "wording", "topic", "structure")
VARIANT_STEPS = STEPS[1:]
LABELS = ("probability", "wording", "topic", "structure", "constraint", "persistent", "incomplete")
DISSECTED_OUTCOMES = (Outcome.EXHAUSTED, Outcome.FAILED)
DISSECT_JSONL = "dissect.jsonl"
DISSECT_RECORDS = "dissect-records.jsonl"
DISSECT_MD = "dissect.md"
#: seeds tried per variant step until the variant reads differently from the original query
VARIANT_TRIES = 5

LABEL_MEANING = {
    "probability": "a fresh draw of the same problem certifies: the failure is chance",
    "wording": "the same constraints worded differently certify",
    "topic": "the same constraints under another topic certify",
    "structure": "an equivalent constraint set written as another problem certifies",
    "constraint": "every variant fails too: the constraint set itself defeats the planner",
    "persistent": "only re-runs were possible (the benchmark has no variants) and every one failed",
    "incomplete": "a step could not be run to its end (an LLM error or the dollar budget); retried next time",
}


# -- records ---------------------------------------------------------------------------------------
class StepRun(BaseModel):
    """One solve of one cascade step."""

    step: str
    #: the id solved: the original id for re-runs, the variant's id otherwise
    problem_id: str
    sample_index: int
    #: the variant's arguments (wording_seed, topic or restructure_seed); empty for re-runs
    variant: dict[str, Any] = Field(default_factory=dict)
    outcome: Outcome
    stop_reason: str
    iterations: int
    component: str
    failing: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    #: re-runs only: whether the first reply repeated the run's first reply word for word
    same_first_reply: bool | None = None
    error: str | None = None

    @property
    def certified(self) -> bool:
        return self.outcome is Outcome.CERTIFIED


class Dissection(BaseModel):
    """One line of ``dissect.jsonl``: the cascade of one failed problem."""

    problem_id: str
    outcome: Outcome
    iterations: int
    component: str
    failing: list[str] = Field(default_factory=list)
    label: str
    steps: list[StepRun] = Field(default_factory=list)
    #: steps not run, with the reason (no variants, the variant reads like the original, ...)
    skipped: dict[str, str] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    settings: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


@dataclasses.dataclass
class DissectOptions:
    repeats: int = 3
    limit: int | None = None
    ids: list[str] | None = None
    #: temperature for every dissection solve (None: the run's own)
    temperature: float | None = None
    #: where dissect.* go (default: the run directory)
    out: Path | None = None
    #: first seed tried for the wording and structure variants
    seed: int = 1
    #: problems dissected at once (default: the run's run.concurrency)
    concurrency: int | None = None
    #: stop spending past this many dollars (problems cut short are labelled incomplete)
    max_dollars: float | None = None

    def __post_init__(self) -> None:
        if self.repeats < 0:
            raise ConfigError(f"dissect: --repeats must be >= 0, not {self.repeats}")
        if self.limit is not None and self.limit < 0:
            raise ConfigError(f"dissect: --limit must be >= 0, not {self.limit}")
        if self.temperature is not None and self.temperature < 0:
            raise ConfigError(f"dissect: --temperature must be >= 0, not {self.temperature}")
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError(f"dissect: --concurrency must be >= 1, not {self.concurrency}")


@dataclasses.dataclass
class DissectResult:
    out_dir: Path
    dissections: list[Dissection]
    #: failed problems of the run, in run order (before --ids / --limit)
    failed_ids: list[str]
    #: problems taken from an earlier dissect.jsonl instead of being dissected again
    resumed: int
    markdown: str
    summary: dict[str, Any]


# -- which problems, which component -----------------------------------------------------------------
def failed_records(records: dict[str, ProblemResult], order: Sequence[str] = ()) -> list[ProblemResult]:
    """Records whose outcome is exhausted or failed, in ``order`` (the run's problem order), then the rest."""
    rank = {pid: i for i, pid in enumerate(order)}
    chosen = [r for r in records.values() if r.outcome in DISSECTED_OUTCOMES]
    return sorted(chosen, key=lambda r: (rank.get(r.problem_id, len(rank)), r.problem_id))


def failing_critics(it: IterationRecord | None) -> list[str]:
    if it is None:
        return []
    return [v.critic or "?" for v in it.verdicts if not v.accepts]


def component_of(result: ProblemResult, problem: Problem, loop: Metacontroller) -> str:
    """``format``, ``reformulation`` or ``plan``: which part failed in the last iteration (see module doc)."""
    last = result.iterations[-1] if result.iterations else None
    if last is None:
        return "none"
    if _reformulation_lost_it(last, problem, loop):
        return "reformulation"
    if last.plan is None or any(v.group == FORMAT_GROUP and not v.accepts for v in last.verdicts):
        return "format"
    return "plan"


def _reformulation_lost_it(it: IterationRecord, problem: Problem, loop: Metacontroller) -> bool:
    bench = loop.benchmark
    if loop.reformulator.mode != "llm" or not it.raw_reply or not bench.has_parser:
        return False
    try:
        parsed = bench.validate_plan(bench.parse(it.raw_reply, problem))
    except Exception:  # domain code: no plan in the text means no evidence either way
        return False
    if it.plan is not None and canonical_json(parsed) == canonical_json(it.plan):
        return False
    try:
        if bench.check_format(problem, parsed):
            return False
        return all(c(problem, parsed).accepts for c in loop.critics)
    except Exception:
        return False


# -- variants -----------------------------------------------------------------------------------------
def has_variants(benchmark: Any) -> bool:
    return callable(getattr(benchmark, "variant", None))


def topics_of(benchmark: Any) -> list[str]:
    """The skins a benchmark's variants may take (``variant_topics`` or ``family.topics``), else none."""
    names = getattr(benchmark, "variant_topics", None)
    if names is None:
        names = getattr(getattr(benchmark, "family", None), "topics", None)
    if callable(names):
        names = names()
    return [str(t) for t in names] if isinstance(names, list | tuple) else []


def plan_variants(benchmark: Any, problem: Problem, seed: int = 1) -> dict[str, tuple[Problem, dict[str, Any]] | str]:
    """For each variant step, the variant problem and its arguments, or the reason it is skipped.

    Wording and structure try seeds ``seed, seed+1, ...`` until the query reads differently; the topic
    is another of the benchmark's topics, picked from the problem id (so the choice is stable)."""
    if not has_variants(benchmark):
        reason = f"benchmark {getattr(benchmark, 'name', '?')!r} has no variants"
        return {step: reason for step in VARIANT_STEPS}
    make: Callable[..., Problem] = benchmark.variant
    out: dict[str, tuple[Problem, dict[str, Any]] | str] = {}

    def first_different(candidates: list[dict[str, Any]], what: str) -> tuple[Problem, dict[str, Any]] | str:
        errors: list[str] = []
        for args in candidates:
            try:
                v = make(problem, **args)
            except Exception as exc:  # domain code: record why, try the next
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            if v.query != problem.query:
                return v, args
        if errors:
            return f"no {what} variant could be made ({errors[-1]})"
        return f"every {what} variant tried ({len(candidates)}) reads like the original"

    seeds = range(seed, seed + VARIANT_TRIES)
    out["wording"] = first_different([{"wording_seed": s} for s in seeds], "wording")
    current = str(problem.constraints.get("topic") or problem.metadata.get("topic") or "")
    others = [t for t in topics_of(benchmark) if t != current]
    if others:
        start = int(hashlib.sha256(problem.id.encode()).hexdigest(), 16) % len(others)
        ordered = others[start:] + others[:start]
        out["topic"] = first_different([{"topic": t} for t in ordered], "topic")
    else:
        out["topic"] = "the benchmark names no other topic"
    out["structure"] = first_different([{"restructure_seed": s} for s in seeds], "structure")
    return out


# -- the cascade ----------------------------------------------------------------------------------------
class Dissector:
    """Runs the cascade for failed problems with a session's loop (one :class:`Metacontroller` per sample index)."""

    def __init__(
        self, session: Session, options: DissectOptions, *, records_sink: Callable[[ProblemResult], None]
    ) -> None:
        self.session = session
        self.options = options
        self.sink = records_sink
        self.base_sample = session.config.run.sample
        unpriced = session.unknown_cost_models() if options.max_dollars is not None else []
        if unpriced:
            raise ConfigError(
                f"dissect: --max-dollars is set, but the run's configuration knows no price for "
                f"{', '.join(repr(m) for m in unpriced)} (no llm.price_input_per_mtok / llm.price_output_per_mtok): "
                "its calls count as $0, so the budget would never stop the dissection. Drop --max-dollars"
            )
        self.budget = RunBudget(max_dollars=options.max_dollars)
        gen = session.loop.generator
        self.fresh_draws = hasattr(gen, "sample_index")
        self.deterministic = not self.fresh_draws and not gen.needs_llm
        self._loops: dict[int, Metacontroller] = {self.base_sample: session.loop}
        self.variants = has_variants(session.benchmark)

    def loop_for(self, sample: int) -> Metacontroller:
        """The run's loop whose generator draws with sample index ``sample``."""
        if sample not in self._loops:
            cfg = self.session.config
            cfg_k = cfg.model_copy(update={"run": cfg.run.model_copy(update={"sample": sample})})
            base = self.session.loop
            # the run's loop in every other part: its critic executor (a sandbox or worker processes), its
            # user in the loop, its settings; only the generator draws with another sample index
            self._loops[sample] = base.with_generator(build_generator(cfg_k, base.benchmark))
        return self._loops[sample]

    def settings(self) -> dict[str, Any]:
        return {
            "repeats": self.options.repeats,
            "seed": self.options.seed,
            "temperature": self.session.config.llm.temperature if self.session.llm is not None else None,
            "base_sample": self.base_sample,
        }

    async def _solve(
        self, step: str, problem: Problem, sample: int, variant: dict[str, Any], original: ProblemResult
    ) -> StepRun:
        loop = self.loop_for(sample)
        started = time.perf_counter()
        try:
            result = await loop.solve(problem, self.budget)
        except RunAborted as exc:
            result = exc.result
        except Exception as exc:  # one step's crash is recorded (label incomplete), never the whole call's
            result = ProblemResult(
                problem_id=problem.id,
                benchmark=loop.benchmark.name,
                outcome=Outcome.ERROR,
                stop_reason="error",
                error=f"{type(exc).__name__}: {exc}",
                seconds=time.perf_counter() - started,
            )
        tags = {"dissect_step": step, "dissect_of": original.problem_id, "sample_index": sample, **variant}
        self.sink(result.model_copy(update={"metadata": {**result.metadata, **tags}}))
        last = result.iterations[-1] if result.iterations else None
        same: bool | None = None
        if step == "probability" and result.iterations and original.iterations:
            same = result.iterations[0].raw_reply == original.iterations[0].raw_reply
        return StepRun(
            step=step,
            problem_id=problem.id,
            sample_index=sample,
            variant=variant,
            outcome=result.outcome,
            stop_reason=result.stop_reason,
            iterations=len(result.iterations),
            component=component_of(result, problem, loop) if result.iterations else "none",
            failing=failing_critics(last),
            usage=result.usage,
            seconds=result.seconds,
            same_first_reply=same,
            error=result.error,
        )

    async def dissect(self, problem: Problem, original: ProblemResult) -> Dissection:
        started = time.perf_counter()
        last = original.iterations[-1] if original.iterations else None
        d = Dissection(
            problem_id=problem.id,
            outcome=original.outcome,
            iterations=len(original.iterations),
            component=component_of(original, problem, self.session.loop),
            failing=failing_critics(last),
            label="",
            settings=self.settings(),
        )
        label = await self._cascade(problem, original, d)
        d.label = label
        d.usage = sum((s.usage for s in d.steps), Usage())
        d.seconds = time.perf_counter() - started
        return d

    async def _cascade(self, problem: Problem, original: ProblemResult, d: Dissection) -> str:
        def broken(run: StepRun) -> bool:
            if run.outcome in (Outcome.ERROR, Outcome.SKIPPED):
                d.error = run.error or f"{run.step} step ended with {run.outcome.value} ({run.stop_reason})"
                return True
            return False

        # 1. probability: fresh draws of the very same problem
        if self.deterministic:
            d.skipped["probability"] = "the generator is deterministic (no sample index): a re-run repeats the run"
        elif self.options.repeats == 0:
            d.skipped["probability"] = "--repeats 0"
        else:
            for k in range(1, self.options.repeats + 1):
                run = await self._solve("probability", problem, self.base_sample + k, {}, original)
                d.steps.append(run)
                if broken(run):
                    return "incomplete"
                if run.certified:
                    return "probability"
        # 2-4. variants that keep the constraint set
        plans = plan_variants(self.session.benchmark, problem, self.options.seed)
        ran = 0
        for step in VARIANT_STEPS:
            planned = plans[step]
            if isinstance(planned, str):
                d.skipped[step] = planned
                continue
            variant, args = planned
            run = await self._solve(step, variant, self.base_sample, args, original)
            d.steps.append(run)
            ran += 1
            if broken(run):
                return "incomplete"
            if run.certified:
                return step
        return "constraint" if ran else "persistent"


# -- output -------------------------------------------------------------------------------------------
class _Appender:
    """Append JSON lines to a file, flushed and fsync'ed per line (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line.rstrip("\n") + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def read_dissections(path: Path) -> dict[str, Dissection]:
    """The last line per problem of a ``dissect.jsonl`` (a torn last line, from a killed call, is skipped)."""
    file = path / DISSECT_JSONL if path.is_dir() else path
    if not file.exists():
        return {}
    out: dict[str, Dissection] = {}
    lines = file.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            d = Dissection.model_validate_json(line)
        except ValueError as exc:
            if n == len(lines) - 1:
                break
            raise RunError(f"{file}: line {n + 1} is not a dissection record: {exc}") from exc
        out[d.problem_id] = d
    return out


def _drop_torn_tail(path: Path) -> None:
    if path.exists():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            with path.open("r+b") as fh:
                fh.truncate(data.rfind(b"\n") + 1)


def _cell(runs: list[StepRun], skipped: str | None) -> str:
    if runs:
        parts = [f"{r.outcome.value}/{r.iterations}" for r in runs]
        return ", ".join(parts)
    if skipped:
        return "skipped"
    return ""


def _money(x: float) -> str:
    return f"{x:.4f}" if x < 1 else f"{x:.2f}"


def summarise(dissections: Sequence[Dissection]) -> dict[str, Any]:
    counts = Counter(d.label for d in dissections)
    usage = sum((d.usage for d in dissections), Usage())
    reruns = [s for d in dissections for s in d.steps if s.step == "probability"]
    return {
        "problems": len(dissections),
        "labels": {label: counts[label] for label in LABELS if counts[label]},
        "components": dict(Counter(d.component for d in dissections)),
        "by_component": {
            comp: dict(Counter(d.label for d in dissections if d.component == comp))
            for comp in sorted({d.component for d in dissections})
        },
        "solves": sum(len(d.steps) for d in dissections),
        "reruns": len(reruns),
        "reruns_repeating_first_reply": sum(bool(s.same_first_reply) for s in reruns),
        "usage": usage.model_dump(),
        "seconds": sum(d.seconds for d in dissections),
    }


def render_markdown(dissections: Sequence[Dissection], meta: dict[str, Any]) -> str:
    """The ``dissect.md`` text: the settings, totals per label, one row per problem, the money spent."""
    s = summarise(dissections)
    n = len(dissections)
    lines = [f"# Error dissection of run `{meta.get('run_id', '?')}`", ""]
    lines += [
        "PDoctor's cascade for each problem the planner failed (outcome exhausted or failed): re-run it with "
        "fresh draws (`probability`), then with the constraints worded differently (`wording`), under another "
        "topic (`topic`), and as an equivalent constraint set written as another problem (`structure`). The "
        "label is the first step whose run certifies; `constraint` when none does. Each step is a full run of "
        "the loop with the run's critics, backprompt strategy and budget.",
        "",
        f"- benchmark: {meta.get('benchmark')} ({meta.get('split')}); generator {meta.get('generator')}, "
        f"reformulator {meta.get('reformulator')}; budget {meta.get('max_iterations')} iterations",
        f"- critics: {', '.join(meta.get('critics', []))}",
        f"- model: {meta.get('model') or 'none (search generator)'}",
        f"- temperature: run {meta.get('run_temperature')}, dissection {meta.get('temperature')}",
        f"- re-runs: {meta.get('repeats')} per problem, sample indices {meta.get('samples')} "
        f"(the run drew with sample index {meta.get('base_sample')}); variant seed {meta.get('seed')}",
        f"- problems: {meta.get('n_failed')} failed in the run; {n} dissected here",
    ]
    recorded, total, errored = meta.get("n_recorded"), meta.get("n_problems"), meta.get("n_errored")
    if isinstance(recorded, int) and isinstance(total, int) and recorded < total:
        lines.append(f"- **the run did not finish**: {recorded} of its {total} problems ran")
    if errored:
        lines.append(f"- **{errored} problem(s) ended in error** in the run: not planner failures, not dissected")
    if not meta.get("variants", True):
        lines.append(
            f"- **{meta.get('benchmark')} has no variants**: only the probability step can run, and a failure "
            "that survives it is labelled `persistent` (wording, topic and structure were not tested)."
        )
    if meta.get("deterministic"):
        lines.append("- the generator is deterministic (no sample index): the probability step was skipped.")
    temp = meta.get("temperature")
    if temp is not None and float(temp) == 0.0 and s["reruns"]:
        lines.append(
            f"- **temperature 0**: a fresh sample index only bypasses the cache; the model may answer the same. "
            f"{s['reruns_repeating_first_reply']} of {s['reruns']} re-runs repeated the run's first reply word for "
            "word. Re-run with `--temperature` (PDoctor re-ran 3x at the project's own temperature) to test chance."
        )
    lines += ["", "## Labels", "", "| label | problems | share | meaning |", "|---|---:|---:|---|"]
    for label in LABELS:
        c = s["labels"].get(label, 0)
        if c or label not in ("persistent", "incomplete"):
            share = f"{100 * c / n:.0f}%" if n else "-"
            lines.append(f"| {label} | {c} | {share} | {LABEL_MEANING[label]} |")
    if s["by_component"]:
        lines += ["", "## Labels by failing component", "", "| component | problems | labels |", "|---|---:|---|"]
        for comp, labs in s["by_component"].items():
            text = ", ".join(f"{k} {v}" for k, v in sorted(labs.items(), key=lambda kv: LABELS.index(kv[0])))
            lines.append(f"| {comp} | {sum(labs.values())} | {text} |")
    lines += [
        "",
        "## Per problem",
        "",
        "Step cells: outcome/iterations of each run (re-runs in order); empty: not run because an earlier step "
        "certified; `skipped` steps are explained below the table.",
        "",
        "| problem | outcome | component | failing critics | label | re-runs | wording | topic | structure | calls |"
        " $ |",
        "|---|---|---|---|---|---|---|---|---|---:|---:|",
    ]
    notes: list[str] = []
    for d in dissections:
        cells = []
        for step in STEPS:
            runs = [r for r in d.steps if r.step == step]
            cells.append(_cell(runs, d.skipped.get(step)))
            if step in d.skipped and not runs:
                notes.append(f"- `{d.problem_id}` {step}: {d.skipped[step]}")
        failing = ", ".join(d.failing) if d.failing else "-"
        label = f"**{d.label}**"
        sent = d.usage.calls - d.usage.cached_calls
        lines.append(
            f"| {d.problem_id} | {d.outcome.value}/{d.iterations} | {d.component} | {failing} | {label} | "
            + " | ".join(cells)
            + f" | {sent} | {_money(d.usage.cost_usd)} |"
        )
        if d.error:
            notes.append(f"- `{d.problem_id}` incomplete: {d.error}")
    if notes:
        lines += ["", "Notes:", "", *_dedupe_notes(notes)]
    u = Usage.model_validate(s["usage"])
    lines += [
        "",
        "## Spent",
        "",
        f"- solves: {s['solves']} ({s['reruns']} re-runs); LLM calls sent {u.calls - u.cached_calls}, "
        f"answered from the cache {u.cached_calls}, failed attempts {u.failed_calls}",
        f"- tokens: {u.input_tokens:,} in, {u.output_tokens:,} out; dollars: {_money(u.cost_usd)}",
        f"- seconds: {s['seconds']:.1f} (summed over problems)",
        "",
    ]
    return "\n".join(lines)


def _dedupe_notes(notes: list[str]) -> list[str]:
    """Collapse identical reasons (``no variants`` on every problem) into one line with a count."""
    by_reason: dict[str, list[str]] = {}
    order: list[str] = []
    for note in notes:
        head, _, reason = note.partition(": ")
        step = head.split("` ", 1)[1] if "` " in head else head
        key = f"{step}: {reason}"
        if key not in by_reason:
            by_reason[key] = []
            order.append(key)
        by_reason[key].append(head)
    out = []
    for key in order:
        heads = by_reason[key]
        out.append(heads[0] + ": " + key.split(": ", 1)[1] if len(heads) == 1 else f"- {len(heads)} problems, {key}")
    return out


# -- the whole run ----------------------------------------------------------------------------------------
def _session_for(run_dir: Path, options: DissectOptions, config: ModuloConfig | None) -> tuple[Session, float]:
    """The run's session (temperature overridden when asked) and the run's own temperature."""
    if config is None:
        if not (run_dir / "config.yaml").is_file():
            raise RunError(f"{run_dir} has no config.yaml: it is not a run directory (cannot rebuild its loop)")
        config = load_config(run_dir)
        if not config.data_dir:  # the run may have found its data through the environment
            info = _run_info(run_dir)
            if info is not None and info.benchmark.data_dir:
                config.data_dir = info.benchmark.data_dir
    cfg = config.model_copy(
        update={
            "llm": config.llm.model_copy(),
            "run": config.run.model_copy(),
            "benchmark": config.benchmark.model_copy(),
        }
    )
    run_temperature = float(config.llm.temperature)
    if options.temperature is not None:
        cfg.llm.temperature = options.temperature
    return build_session(cfg, load_problems=False), run_temperature


def _run_info(run_dir: Path) -> RunInfo | None:
    """The run's run.json (None when it has none: a run written by a notebook or test)."""
    return read_run_info(run_dir) if (run_dir / RUN_INFO).is_file() else None


def _meta(
    run_dir: Path,
    session: Session,
    dissector: Dissector,
    options: DissectOptions,
    n_failed: int,
    run_temperature: float,
    records: dict[str, ProblemResult],
) -> dict[str, Any]:
    cfg = session.config
    info = _run_info(run_dir)
    has_llm = session.llm is not None
    base = dissector.base_sample
    return {
        "run_id": info.run_id if info is not None and info.run_id else run_dir.name,
        "benchmark": session.benchmark.name,
        "split": session.split,
        "generator": f"{cfg.generator.name} ({session.loop.generator.prompt_role} prompt)",
        "reformulator": session.loop.reformulator.mode,
        "critics": [c.name for c in session.critics],
        "max_iterations": session.loop.settings.max_iterations,
        "model": f"{cfg.llm.name}/{cfg.llm.model}".rstrip("/") if has_llm else None,
        "run_temperature": run_temperature if has_llm else None,
        "temperature": cfg.llm.temperature if has_llm else None,
        "repeats": options.repeats,
        "samples": f"{base + 1}-{base + options.repeats}" if options.repeats else "none",
        "base_sample": base,
        "seed": options.seed,
        "n_failed": n_failed,
        # how much of the run there was to dissect: its problems, those it recorded, those that errored
        "n_problems": len(info.problem_ids) if info is not None else None,
        "n_recorded": sum(1 for r in records.values() if r.outcome is not Outcome.SKIPPED),
        "n_errored": sum(1 for r in records.values() if r.outcome is Outcome.ERROR),
        "variants": dissector.variants,
        "deterministic": dissector.deterministic,
    }


async def dissect_run(
    run_dir: Path,
    options: DissectOptions | None = None,
    *,
    config: ModuloConfig | None = None,
    progress: Callable[[Dissection, int, int], None] | None = None,
) -> DissectResult:
    """Dissect every failed problem of ``run_dir`` (resuming ``dissect.jsonl``); write the outputs.

    ``config`` replaces the run's ``config.yaml`` (a notebook or test that built the run with objects
    YAML cannot hold, such as a scripted backend's function)."""
    options = options or DissectOptions()
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"{run_dir} is not a directory")
    records = latest_records(run_dir)
    if not records:
        raise RunError(f"{run_dir} holds no records (records.jsonl is missing or empty)")
    out_dir = Path(options.out) if options.out else run_dir
    out_dir.mkdir(parents=True, exist_ok=True)

    session, run_temperature = _session_for(run_dir, options, config)
    try:
        info = _run_info(run_dir)
        failed = failed_records(records, list(info.problem_ids) if info is not None else [])
        failed_ids = [r.problem_id for r in failed]
        chosen = failed
        if options.ids:
            wanted = [str(i) for i in options.ids]
            unknown = [i for i in wanted if i not in records]
            if unknown:
                raise ConfigError(f"dissect --ids: {unknown} are not problems of {run_dir}")
            not_failed = [f"{i} ({records[i].outcome.value})" for i in wanted if i not in set(failed_ids)]
            if not_failed:
                raise ConfigError(
                    f"dissect --ids: {', '.join(not_failed)} did not fail in the run; only problems whose outcome "
                    "is exhausted or failed are dissected"
                )
            chosen = [r for r in failed if r.problem_id in set(wanted)]
        if options.limit is not None:
            chosen = chosen[: options.limit]

        jsonl = out_dir / DISSECT_JSONL
        _drop_torn_tail(jsonl)
        _drop_torn_tail(out_dir / DISSECT_RECORDS)
        records_out = _Appender(out_dir / DISSECT_RECORDS)
        lines_out = _Appender(jsonl)
        dissector = Dissector(session, options, records_sink=lambda r: records_out(record_line(r).decode("utf-8")))
        previous = read_dissections(jsonl)
        settings = dissector.settings()
        for d in previous.values():
            if d.settings != settings:
                raise RunError(
                    f"{jsonl} was written with other settings ({d.settings}, now {settings}); "
                    "use --out for another directory or the same settings"
                )
        done = {pid: d for pid, d in previous.items() if d.label != "incomplete"}
        todo = [r for r in chosen if r.problem_id not in done]
        ids = [r.problem_id for r in todo]
        problems = {p.id: p for p in session.benchmark.select(session.split, ids=ids)} if ids else {}
        results: dict[str, Dissection] = {pid: d for pid, d in done.items() if pid in {r.problem_id for r in chosen}}
        resumed = len(results)
        sem = asyncio.Semaphore(options.concurrency or session.config.run.concurrency)
        finished = [0]

        async def one(record: ProblemResult) -> None:
            async with sem:
                d = await dissector.dissect(problems[record.problem_id], record)
            await asyncio.to_thread(lines_out, d.model_dump_json())
            results[d.problem_id] = d
            finished[0] += 1
            if progress is not None:
                progress(d, finished[0], len(todo))

        await asyncio.gather(*(one(r) for r in todo))
        ordered = [results[r.problem_id] for r in chosen if r.problem_id in results]
        meta = _meta(run_dir, session, dissector, options, len(failed), run_temperature, records)
    finally:
        await session.aclose()
    markdown = render_markdown(ordered, meta)
    (out_dir / DISSECT_MD).write_text(markdown, encoding="utf-8")
    summary = {**summarise(ordered), "settings": meta}
    return DissectResult(out_dir, ordered, failed_ids, resumed, markdown, summary)
