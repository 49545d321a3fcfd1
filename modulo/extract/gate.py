"""The extraction gate: a candidate critic against plans labelled by the benchmark's oracle.

A gate set (:meth:`~modulo.benchmark.Benchmark.gate_cases`) is split *by problem* into a training part,
whose failures are sent back to the model as feedback, and a held-out part the extraction never shows
the model. A candidate is **admitted** only when, on each part separately:

- it rejects **no valid plan** (zero false rejections: a critic that blocks good plans misleads the
  planner; a part without a valid plan cannot show that, and does not admit), and
- it rejects at least ``min_recall`` of the invalid plans (default 1.0: the synthesized benchmarks'
  oracles are exact; a permissive critic inflates every pass rate it touches), and
- it never fails: a crash, a timeout, a wrong return type, a changed plan or a sandbox refusal (network,
  processes, writes outside the scratch directory) on any plan is a rejection with that reason.

Every candidate runs in the sandbox (:class:`modulo.sandbox.SandboxExecutor`), never in this process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..audit import Tally
from ..benchmark import GateCase
from ..critic import Critic
from ..errors import ConfigError, CriticError
from ..executor import FrozenPlan

#: defaults, stated in the README and recorded in every gate report
DEFAULT_MIN_RECALL = 1.0
DEFAULT_HELD_OUT = 0.3
DEFAULT_PROBLEMS = 12
DEFAULT_ATTEMPTS = 3
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MEMORY_MB = 1024
#: counterexamples sent back per attempt, and kept per part in the report
DEFAULT_COUNTEREXAMPLES = 3


@dataclass(frozen=True)
class GateSettings:
    """The gate's thresholds and the extraction's budget (all recorded in the gate report)."""

    min_recall: float = DEFAULT_MIN_RECALL
    held_out: float = DEFAULT_HELD_OUT
    problems: int = DEFAULT_PROBLEMS
    seed: int = 0
    attempts: int = DEFAULT_ATTEMPTS
    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_mb: int = DEFAULT_MEMORY_MB
    counterexamples: int = DEFAULT_COUNTEREXAMPLES

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_recall <= 1.0:
            raise ConfigError(f"--min-recall must be in [0, 1], not {self.min_recall}")
        if not 0.0 < self.held_out < 1.0:
            raise ConfigError(f"--held-out must be a fraction strictly between 0 and 1, not {self.held_out}")
        if self.problems < 2:
            raise ConfigError(f"--problems must be at least 2 (one for training, one held out), not {self.problems}")
        if self.attempts < 1:
            raise ConfigError(f"--attempts must be at least 1, not {self.attempts}")
        if not self.timeout_s > 0:
            raise ConfigError(f"--timeout-s must be positive, not {self.timeout_s}")
        if self.counterexamples < 1:
            raise ConfigError(f"--counterexamples must be at least 1, not {self.counterexamples}")

    def to_json(self) -> dict[str, Any]:
        return {
            "false_rejections_allowed": 0,
            "min_recall": self.min_recall,
            "held_out_fraction": self.held_out,
            "problems": self.problems,
            "seed": self.seed,
            "attempts": self.attempts,
            "timeout_s": self.timeout_s,
            "memory_mb": self.memory_mb,
            "counterexamples": self.counterexamples,
        }


def split_cases(cases: Sequence[GateCase], fraction: float, seed: int) -> tuple[list[GateCase], list[GateCase]]:
    """(training, held-out): whole problems (groups) go to one side, chosen by a hash of (seed, id), so the
    split does not depend on the order of the cases. Problems with an invalid plan and problems without
    one are split separately, so that both sides can measure recall; each side gets at least one problem."""
    ids = sorted({_group(c) for c in cases}, key=lambda pid: hashlib.sha256(f"{seed}:{pid}".encode()).hexdigest())
    if len(ids) < 2:
        raise ConfigError(
            f"the gate set covers {len(ids)} problem(s): at least 2 are needed (training and held-out); "
            "raise --problems"
        )
    with_invalid = {_group(c) for c in cases if not c.valid}
    held: set[str] = set()
    for stratum in ([i for i in ids if i in with_invalid], [i for i in ids if i not in with_invalid]):
        if len(stratum) >= 2:
            held.update(stratum[: max(1, round(fraction * len(stratum)))])
    if not held:
        held = {ids[0]}
    if held >= set(ids):
        held.discard(ids[-1])
    return [c for c in cases if _group(c) not in held], [c for c in cases if _group(c) in held]


def _group(case: GateCase) -> str:
    return case.group or case.problem.id


class Confusion(Tally):
    """Valid plans accepted or wrongly rejected (``false_rejects``); invalid plans rejected (``caught``) or
    missed: the audit's tally (:class:`modulo.audit.Tally`), read as a gate."""

    @property
    def recall(self) -> float | None:
        return self.mutation_score

    def to_json(self) -> dict[str, Any]:
        return {
            "valid_plans": self.valid,
            "valid_accepted": self.valid - self.false_rejects,
            "valid_rejected": self.false_rejects,
            "invalid_plans": self.invalid,
            "invalid_rejected": self.caught,
            "invalid_accepted": self.missed,
            "recall": self.recall,
        }


@dataclass
class PartResult:
    """A candidate on one part of the gate set (``training`` or ``held-out``)."""

    part: str
    cases: int
    checked: int = 0
    confusion: Confusion = field(default_factory=Confusion)
    #: the first failure (crash, timeout, sandbox refusal), with the plan it happened on; checking stops there
    error: dict[str, Any] | None = None
    #: disagreements with the oracle: false rejections first, then misses
    counterexamples: list[dict[str, Any]] = field(default_factory=list)

    def passes(self, min_recall: float) -> tuple[bool, str]:
        """Whether this part admits the candidate, and why not."""
        c = self.confusion
        if self.error is not None:
            return False, f"{self.part}: failed on a plan: {self.error['error']}"
        if c.false_rejects:
            return False, f"{self.part}: rejected {c.false_rejects} of {c.valid} valid plans"
        if not c.valid:  # zero false rejections of no valid plan would say nothing
            return False, f"{self.part}: no valid plan to measure false rejections on"
        if c.recall is None:
            return False, f"{self.part}: no invalid plan to measure recall on"
        if c.recall < min_recall:
            missed = f"{c.missed} of {c.invalid} invalid plans accepted"
            return False, f"{self.part}: recall {c.recall:.3f} < {min_recall:g} ({missed})"
        return True, ""

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "cases": self.cases,
            "checked": self.checked,
            "confusion": self.confusion.to_json(),
            "error": self.error,
            "counterexamples": self.counterexamples,
        }


def failure_reason(exc: CriticError) -> str:
    """What went wrong, in one line: the sandbox's reason, or the critic's own exception."""
    from ..sandbox import SandboxError

    cause = exc.cause
    return str(cause) if isinstance(cause, SandboxError) else f"{type(cause).__name__}: {cause}"


def case_json(case: GateCase, view: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "problem_id": case.problem.id,
        "group": _group(case),
        "plan": case.plan,
        "origin": case.origin,
        "oracle_valid": case.valid,
        "oracle": case.oracle,
    }
    if view is not None:
        out["problem"] = view
    return out


async def run_part(
    executor: Any,
    critic: Critic,
    cases: Sequence[GateCase],
    part: str,
    settings: GateSettings,
    view: Any,
) -> PartResult:
    """``critic`` on every case through ``executor`` (the sandbox); stops at the first failure."""
    result = PartResult(part=part, cases=len(cases))
    false_rejections: list[dict[str, Any]] = []
    misses: list[dict[str, Any]] = []
    for case in cases:
        try:
            verdict = await executor.run(critic, case.problem, FrozenPlan.of(case.plan), settings.timeout_s)
        except CriticError as exc:
            result.error = {**case_json(case, view(case.problem)), "error": failure_reason(exc)}
            break
        result.checked += 1
        rejected = not verdict.accepts
        result.confusion.add(case.valid, rejected)
        if rejected == case.valid:  # a disagreement with the oracle
            example = {
                **case_json(case, view(case.problem)),
                "critic_rejected": rejected,
                "critic_feedback": verdict.feedback,
            }
            (false_rejections if case.valid else misses).append(example)
    result.counterexamples = (false_rejections + misses)[: settings.counterexamples]
    return result
