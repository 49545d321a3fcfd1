"""Critic audits: how far a benchmark's critics agree with a reference (an oracle, recorded verdicts).

A benchmark's ``audit_command`` hook (``modulo critics audit BENCHMARK``) mutates known-good plans or
replays recorded verdicts, and tallies here, per critic and per mutation kind, how many invalid plans
each critic rejected (its mutation score) and how many valid plans it wrongly rejected. The reference
and the mutations belong to the benchmark; the tally, the report and the binding of the critics
(through :func:`modulo.binding.bind_critics`, as the loop binds them) are shared.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .benchmark import Benchmark
from .binding import bind_critics
from .critic import FORMAT_GROUP, Critic, critic_meta
from .errors import CriticError
from .types import Problem, attributes

ALL = "(all critics)"


@dataclass
class Tally:
    """Counts for one (critic, mutation kind) cell."""

    invalid: int = 0
    caught: int = 0
    valid: int = 0
    false_rejects: int = 0

    def add(self, valid: bool, rejected: bool) -> None:
        """Count one plan: a valid one (wrongly rejected or not), or an invalid one (caught or missed)."""
        if valid:
            self.valid += 1
            self.false_rejects += rejected
        else:
            self.invalid += 1
            self.caught += rejected

    @property
    def missed(self) -> int:
        return self.invalid - self.caught

    @property
    def mutation_score(self) -> float | None:
        return self.caught / self.invalid if self.invalid else None

    @property
    def false_reject_rate(self) -> float | None:
        return self.false_rejects / self.valid if self.valid else None


@dataclass
class AuditReport:
    """Per critic and per mutation kind: invalid plans rejected, valid plans wrongly rejected."""

    benchmark: str
    reference: str
    cells: dict[tuple[str, str], Tally] = field(default_factory=lambda: defaultdict(Tally))
    problems: int = 0
    plans: int = 0
    unreadable: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    max_examples: int = 20

    def add(self, critic: str, kind: str, *, invalid: bool, rejected: bool, example: dict[str, Any]) -> None:
        self.cells[(critic, kind)].add(not invalid, rejected)
        if invalid != rejected and len(self.examples) < self.max_examples:
            self.examples.append({"critic": critic, "mutation": kind, "expected_reject": invalid, **example})

    def tally(self, critic: str, kind: str | None = None) -> Tally:
        """One cell, or a critic's total over every mutation kind (``kind=None``)."""
        if kind is not None:
            return self.cells.get((critic, kind), Tally())
        total = Tally()
        for (c, _k), t in self.cells.items():
            if c == critic:
                total.invalid += t.invalid
                total.caught += t.caught
                total.valid += t.valid
                total.false_rejects += t.false_rejects
        return total

    def critics(self) -> list[str]:
        names = sorted({c for c, _k in self.cells if c != ALL})
        return [*names, ALL] if any(c == ALL for c, _k in self.cells) else names

    def kinds(self) -> list[str]:
        return sorted({k for _c, k in self.cells})

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for (c, k), t in sorted(self.cells.items()):
            out.append(
                {
                    "critic": c,
                    "mutation": k,
                    "invalid": t.invalid,
                    "rejected": t.caught,
                    "missed": t.missed,
                    "valid": t.valid,
                    "wrongly_rejected": t.false_rejects,
                    "mutation_score": t.mutation_score,
                    "false_reject_rate": t.false_reject_rate,
                }
            )
        return out

    @property
    def clean(self) -> bool:
        """Every invalid plan rejected and no valid plan rejected, by every critic."""
        return all(t.missed == 0 and t.false_rejects == 0 for t in self.cells.values())

    def render(self) -> str:
        lines = [
            f"# Critic audit: {self.benchmark} (reference: {self.reference})",
            "",
            f"{self.problems} problems, {self.plans} plans checked, {self.unreadable} unreadable plans skipped.",
            "",
        ]
        kinds = self.kinds()
        lines.append("| critic | " + " | ".join(kinds) + " | total |")
        lines.append("|---" * (len(kinds) + 2) + "|")
        for c in self.critics():
            cells = [_cell(self.tally(c, k)) for k in kinds]
            lines.append(f"| {c} | " + " | ".join(cells) + f" | {_cell(self.tally(c))} |")
        lines += [
            "",
            "Each cell: invalid plans rejected / invalid plans; then valid plans wrongly rejected / valid plans.",
        ]
        if self.examples:
            lines += ["", "Disagreements (first ones):"]
            for ex in self.examples:
                want = "reject" if ex["expected_reject"] else "accept"
                lines.append(
                    f"- {ex['critic']} on {ex.get('problem_id')} ({ex['mutation']}): should {want}. "
                    f"{str(ex.get('feedback', ''))[:200]}"
                )
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        facts = attributes(self, "benchmark", "reference", "problems", "plans", "unreadable", "clean")
        return {**facts, "rows": self.rows(), "examples": self.examples}


def _cell(t: Tally) -> str:
    if not t.invalid and not t.valid:
        return "-"
    return f"{t.caught}/{t.invalid}; {t.false_rejects}/{t.valid}"


def load_critics(
    benchmark: Benchmark, names: Sequence[str] | None = None, options: Mapping[str, Any] | None = None
) -> dict[str, Critic]:
    """The critics to audit (default: the benchmark's own, format excluded), bound as the loop binds
    them; ``options`` are run-wide critic options (``mode="official"``), given to critics that declare them."""
    from . import components

    wanted = (
        list(names)
        if names
        else [n for n in benchmark.critic_names() if critic_meta(components.critics.get(n))["group"] != FORMAT_GROUP]
    )
    return {c.name: c for c in bind_critics(wanted, benchmark, options)}


def rejects(critic: Critic, problem: Problem, plan: Any) -> tuple[bool, str]:
    """Whether ``critic`` rejects ``plan`` (a crash counts as a rejection) and its feedback."""
    try:
        v = critic(problem, plan)
    except CriticError as exc:
        return True, f"crashed: {exc}"
    return (not v.accepts), v.feedback


def finish(report: AuditReport, out: TextIO, json_path: Path | None) -> int:
    """Print the report (and write it as JSON); exit code 0 when clean, 1 when a critic disagrees."""
    out.write(report.render())
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report.to_json(), indent=1, default=str), encoding="utf-8")
    return 0 if report.clean else 1
