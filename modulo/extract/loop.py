"""LLM-Modulo applied to writing critics: ask, test in the sandbox against the gate, send back the failures.

For each constraint: the model gets the task (:func:`~modulo.extract.prompt.task_messages`); its code is
parsed (never run here), written to a file and run in a sandbox worker on the gate's training part and
held-out part; when the gate does not admit it, the training part's confusion matrix and counterexamples
go back to the model (:func:`~modulo.extract.prompt.feedback_message`), up to ``attempts`` candidates.
Every model call goes through the :class:`~modulo.llm.client.LLMClient` (cache, retries, accounting) and
is recorded in the constraint's gate report, cached or fresh.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..benchmark import Benchmark, ConstraintInfo, GateCase
from ..errors import ConfigError, LLMError
from ..llm.base import LLMRequest
from ..sandbox import SandboxExecutor, SandboxLimits, SandboxSpec
from ..types import LLMCall, Message, Problem, Usage
from .gate import GateSettings, PartResult, run_part, split_cases
from .prompt import code_of, feedback_message, task_messages
from .runtime import extracted_critic

#: the default prefix of extracted critics' names (``extracted/synth_busy``)
DEFAULT_PREFIX = "extracted"


def identifier(text: str) -> str:
    """``text`` as a Python identifier (file and attribute names of the generated package)."""
    out = re.sub(r"\W+", "_", text).strip("_") or "critic"
    return "_" + out if out[0].isdigit() else out


@dataclass
class Attempt:
    """One candidate: the model's reply, its code and what the gate said."""

    number: int
    call: dict[str, Any]
    code: str = ""
    #: why the reply is not a usable function (it is then not run at all)
    unusable: str | None = None
    training: PartResult | None = None
    held_out: PartResult | None = None
    admitted: bool = False
    reason: str = ""
    #: the feedback sent to the model after this attempt (None: none was sent)
    feedback: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "call": self.call,
            "code": self.code,
            "unusable": self.unusable,
            "training": self.training.to_json() if self.training else None,
            "held_out": self.held_out.to_json() if self.held_out else None,
            "admitted": self.admitted,
            "reason": self.reason,
            "feedback_sent": self.feedback,
        }


@dataclass
class ConstraintResult:
    """The extraction of one constraint: every attempt and the gate's decision."""

    benchmark: str
    info: ConstraintInfo
    critic: str
    settings: GateSettings
    backend: str
    model: str
    prompt: list[Message] = field(default_factory=list)
    gate_set: dict[str, Any] = field(default_factory=dict)
    attempts: list[Attempt] = field(default_factory=list)
    admitted: bool = False
    reason: str = ""
    #: the admitted code (the last attempt's, when admitted)
    code: str = ""

    @property
    def final(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "constraint": self.info.name,
            "description": self.info.description,
            "reference_critic": self.info.reference,
            "critic": self.critic,
            "admitted": self.admitted,
            "reason": self.reason,
            "backend": self.backend,
            "model": self.model,
            "gate": self.settings.to_json(),
            "gate_set": self.gate_set,
            "prompt": [m.model_dump() for m in self.prompt],
            "attempts": [a.to_json() for a in self.attempts],
        }


def call_json(call: LLMCall | None, error: LLMError | None = None) -> dict[str, Any]:
    """How a model call was served (recorded with each attempt)."""
    if call is None:
        call = getattr(error, "call", None)
    out: dict[str, Any] = {}
    if call is not None:
        out = {
            "model": call.model,
            "cached": call.cached,
            "usage": call.usage.model_dump(),
            "finish_reason": call.finish_reason,
            "faults": [f.model_dump() for f in call.faults],
            "seconds": round(call.seconds, 3),
            "reply": call.reply,
        }
    if error is not None:
        out["error"] = f"{type(error).__name__}: {error}"
    return out


def pick_examples(
    cases: Sequence[GateCase], view: Callable[[Problem], Any], per_label: int = 2
) -> tuple[list[GateCase], GateCase | None]:
    """A few labelled plans of one training problem with both valid and invalid plans (the prompt's
    examples): the problem whose view is shortest, so the prompt stays small."""
    by_problem: dict[str, list[GateCase]] = {}
    for case in cases:
        by_problem.setdefault(case.problem.id, []).append(case)
    mixed = [g for g in by_problem.values() if any(c.valid for c in g) and any(not c.valid for c in g)]
    pool = mixed or list(by_problem.values())
    if not pool:
        return [], None
    group = min(pool, key=lambda g: len(json.dumps(view(g[0].problem), default=str)))
    chosen = [c for c in group if c.valid][:per_label] + [c for c in group if not c.valid][:per_label]
    return chosen, group[0]


@dataclass
class Extraction:
    """What :func:`extract_constraint` needs besides the constraint: the benchmark (bound, with the
    arguments and data directory a sandbox worker binds it with), the client, the settings, where to write."""

    benchmark: Benchmark
    client: Any
    settings: GateSettings
    workdir: Path
    prefix: str = DEFAULT_PREFIX
    benchmark_args: Mapping[str, Any] = field(default_factory=dict)
    temperature: float = 0.0
    #: called with a line of progress (the CLI prints it)
    progress: Callable[[str], None] = lambda line: None

    def critic_name(self, constraint: str) -> str:
        return f"{self.prefix}/{constraint}"

    def sandbox_spec(self, loader: Path) -> SandboxSpec:
        data_dir = self.benchmark.data_dir
        return SandboxSpec(
            benchmark=self.benchmark.name,
            benchmark_args=dict(self.benchmark_args),
            data_dir=str(data_dir) if data_dir is not None else None,
            imports=(str(loader.resolve()),),
        )


def write_candidate(ex: Extraction, info: ConstraintInfo, code: str, where: Path) -> Path:
    """The candidate's code file and the loader a sandbox worker imports (it registers the critic there,
    through :func:`~modulo.extract.runtime.extracted_critic`, exactly as the generated package does)."""
    where.mkdir(parents=True, exist_ok=True)
    code_file = where / "check.py"
    code_file.write_text(code, encoding="utf-8")
    name = ex.critic_name(info.name)
    loader = where / "register.py"
    loader.write_text(
        "from modulo import components\n"
        "from modulo.extract.runtime import extracted_critic\n\n"
        f"components.critics.register(\n    {name!r},\n    extracted_critic(\n        {name!r},\n"
        f"        constraint={info.name!r},\n        benchmark={ex.benchmark.name!r},\n"
        f"        description={info.description!r},\n        code={str(code_file.resolve())!r},\n    ),\n"
        "    replace=True,\n)\n",
        encoding="utf-8",
    )
    return loader


async def gate_candidate(
    ex: Extraction, info: ConstraintInfo, loader: Path, training: list[GateCase], held_out: list[GateCase]
) -> tuple[PartResult, PartResult | None]:
    """The candidate registered by ``loader`` on both parts, in a sandbox worker of its own. The held-out
    part is checked only when the training part ran without a failure (it is reported, never fed back)."""
    name = ex.critic_name(info.name)
    factory = extracted_critic(
        name, constraint=info.name, benchmark=ex.benchmark.name, description=info.description, code=""
    )
    stand_in = factory(benchmark=ex.benchmark)  # names the critic for the executor; never runs here (untrusted)
    limits = SandboxLimits(memory_mb=ex.settings.memory_mb, workers=1, startup_timeout_s=120.0)
    executor = SandboxExecutor([name], ex.sandbox_spec(loader), limits)
    try:
        train = await run_part(executor, stand_in, training, "training", ex.settings, ex.benchmark.critic_view)
        held = None
        if train.error is None:
            held = await run_part(executor, stand_in, held_out, "held-out", ex.settings, ex.benchmark.critic_view)
        return train, held
    finally:
        executor.close()


async def extract_constraint(ex: Extraction, info: ConstraintInfo) -> ConstraintResult:
    """Extract one critic for ``info``: at most ``settings.attempts`` candidates, feedback from the training part."""
    settings = ex.settings
    llm_settings = ex.client.settings
    result = ConstraintResult(
        benchmark=ex.benchmark.name,
        info=info,
        critic=ex.critic_name(info.name),
        settings=settings,
        backend=str(getattr(ex.client, "backend_name", llm_settings.name)),
        model=str(llm_settings.model or llm_settings.name),
    )
    started = time.monotonic()
    cases = ex.benchmark.gate_cases(info.name, problems=settings.problems, seed=settings.seed)
    training, held_out = split_cases(cases, settings.held_out, settings.seed)
    result.gate_set = {
        "cases": len(cases),
        "training": _part_summary(training),
        "held_out": _part_summary(held_out),
        "seconds_to_build": round(time.monotonic() - started, 3),
    }
    examples, example_case = pick_examples(training, ex.benchmark.critic_view)
    if example_case is None:
        raise ConfigError(f"{ex.benchmark.name}: the gate set of {info.name} is empty")
    messages = task_messages(ex.benchmark, info, examples, ex.benchmark.critic_view(example_case.problem))
    result.prompt = list(messages)
    for number in range(1, settings.attempts + 1):
        request = LLMRequest(
            messages=tuple(messages),
            temperature=ex.temperature,
            tags={"problem_id": info.name, "iteration": str(number), "stage": "extract"},
        )
        try:
            call = await ex.client.call(request, "extract")
        except LLMError as exc:
            attempt = Attempt(number=number, call=call_json(None, exc), reason=f"the model call failed: {exc}")
            result.attempts.append(attempt)
            result.reason = f"not admitted: {attempt.reason}"
            ex.progress(f"{info.name}: attempt {number}: {attempt.reason}")
            break
        attempt = Attempt(number=number, call=call_json(call))
        result.attempts.append(attempt)
        attempt.code, attempt.unusable = code_of(call.reply or "")
        if attempt.unusable is not None:
            attempt.reason = attempt.unusable
            feedback = Message(
                role="user",
                content=f"Your answer was not usable: {attempt.unusable}. "
                "Answer with the function in one ```python block.",
            )
        else:
            where = ex.workdir / "attempts" / identifier(info.name) / str(number)
            loader = write_candidate(ex, info, attempt.code, where)
            attempt.training, attempt.held_out = await gate_candidate(ex, info, loader, training, held_out)
            train_ok, why = attempt.training.passes(settings.min_recall)
            held_ok, held_why = attempt.held_out.passes(settings.min_recall) if attempt.held_out else (False, "")
            attempt.admitted = train_ok and held_ok
            attempt.reason = why if not train_ok else held_why
            if attempt.admitted:
                result.admitted, result.code, result.reason = True, attempt.code, "admitted"
                ex.progress(f"{info.name}: attempt {number}: admitted")
                break
            if train_ok:  # only the held-out part failed: it is never fed back, so a retry has nothing to learn from
                result.reason = f"rejected: {held_why} (the training part passed; the held-out part is never fed back)"
                ex.progress(f"{info.name}: attempt {number}: {held_why}")
                break
            feedback = feedback_message(attempt.training, why)
        result.reason = f"rejected after {number} attempt(s): {attempt.reason}"
        ex.progress(f"{info.name}: attempt {number}: {attempt.reason}")
        if number < settings.attempts:
            attempt.feedback = feedback.content
            messages = [*messages, Message(role="assistant", content=call.reply or ""), feedback]
    return result


def _part_summary(cases: Sequence[GateCase]) -> dict[str, Any]:
    return {
        "problems": len({c.group or c.problem.id for c in cases}),
        "plans": len(cases),
        "valid": sum(c.valid for c in cases),
        "invalid": sum(not c.valid for c in cases),
    }


@dataclass
class ExtractionResult:
    """Every constraint's result, the usage of the whole extraction, and where the files are."""

    benchmark: str
    results: list[ConstraintResult]
    usage: Usage
    out: Path
    package: Path | None = None

    @property
    def admitted(self) -> list[ConstraintResult]:
        return [r for r in self.results if r.admitted]


async def extract(ex: Extraction, constraints: Sequence[ConstraintInfo]) -> list[ConstraintResult]:
    """:func:`extract_constraint` for each constraint in turn."""
    out = []
    for info in constraints:
        ex.progress(f"{info.name}: building the gate set")
        out.append(await extract_constraint(ex, info))
    return out


def select_constraints(bench: Benchmark, names: Sequence[str]) -> list[ConstraintInfo]:
    """The benchmark's constraints named ``names`` (all of them when empty); an unknown name is a ConfigError."""
    from ..registry import suggest

    known = {c.name: c for c in bench.extraction_constraints()}
    if not known:
        raise ConfigError(
            f"benchmark {bench.name!r} offers no constraints to extract critics for "
            "(its extraction_constraints hook is empty)"
        )
    unknown = [n for n in names if n not in known]
    if unknown:
        hits = suggest(unknown[0], list(known))
        mean = f" Did you mean {hits[0]!r}?" if hits else ""
        raise ConfigError(f"{bench.name} has no constraint {unknown[0]!r}.{mean} Its constraints: {', '.join(known)}")
    return [known[n] for n in names] if names else list(known.values())
