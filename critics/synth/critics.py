"""Critics derived from the synthesized constraint sets: one binary critic per kind of requirement.

Each critic checks every constraint of its kinds in ``problem.constraints`` and, when the plan breaks
some, quotes each broken constraint in the query's own words together with the part of the plan that
breaks it. A problem with no constraint of the critic's kinds gets a not-applicable verdict.
"""

from __future__ import annotations

from modulo.critic import CriticFactory, critic
from modulo.errors import PlanFormatError
from modulo.types import PlanJSON, Problem, Verdict

from .common import capitalize
from .families import FAMILIES, get_family


def check(problem: Problem, plan: PlanJSON, name: str, hints: bool = False) -> Verdict:
    """Run the synthesized critic ``name`` (shared body of every critic in this module); ``hints``: add
    the family's constructive suggestions for the broken constraints (feedback level ``hint``)."""
    spec = problem.constraints
    family = get_family(str(spec.get("family", "")))
    kinds = family.critic_kinds.get(name)
    if kinds is None:
        return Verdict.not_applicable(f"{name} does not apply to {family.benchmark} problems")
    try:
        applicable, broken = family.violations(spec, plan, kinds)
    except PlanFormatError as exc:
        return Verdict.fail(f"The plan cannot be checked: {exc}.", format_error=str(exc))
    if applicable == 0:
        return Verdict.not_applicable()
    if not broken:
        return Verdict.ok()
    lines = [f'You were asked: "{capitalize(c.get("text") or family.describe(c))}". {why}' for c, why in broken]
    suggestions = [h for c, _why in broken if (h := family.hint(c, spec, plan))] if hints else []
    return Verdict.fail(
        "\n".join(lines),
        hint=" ".join(suggestions) or None,
        violated=[c["id"] for c, _why in broken],
        kinds=sorted({c["kind"] for c, _why in broken}),
        evidence=[why for _c, why in broken],
    )


_DESCRIPTIONS: dict[str, str] = {
    "synth_task_coverage": "every task appears exactly once and no unknown task appears",
    "synth_task_duration": "every task lasts exactly its stated duration",
    "synth_no_overlap": "no two tasks overlap (one task at a time)",
    "synth_horizon": "every task lies within the working day",
    "synth_precedence": "ordering requirements: the first task ends before the second starts",
    "synth_window": "time windows: not before, no later than, between",
    "synth_meeting_duration": "the meeting lasts exactly the requested time",
    "synth_work_hours": "the meeting is on an allowed day within work hours",
    "synth_busy": "the meeting overlaps nobody's blocked time",
    "synth_preference": "the participants' day and time preferences hold",
    "synth_deadline": "the meeting ends by the group's deadline",
    "synth_earliest": "the meeting is at the group's earliest availability",
    "synth_trip_days": "the trip starts on day 1, ends on the last day, flight days shared",
    "synth_trip_cities": "every city is visited exactly once and no other city",
    "synth_stay": "each city's stay has the requested length",
    "synth_direct_flight": "consecutive cities have a direct flight",
    "synth_event": "every dated event lies inside the stay in its city",
    "synth_trip_endpoints": "the trip starts and ends in the requested cities",
}


def _make(name: str, benchmark: str) -> CriticFactory:
    def fn(problem: Problem, plan: PlanJSON, *, hints: bool = False) -> Verdict:
        return check(problem, plan, name, hints)

    fn.__name__ = name
    fn.__doc__ = _DESCRIPTIONS[name]
    return critic(
        name,
        group="hard",
        description=_DESCRIPTIONS[name],
        benchmarks=(benchmark,),
        source="derived",
        options=("hints",),
    )(fn)


CRITICS: dict[str, CriticFactory] = {
    name: _make(name, fam.benchmark) for fam in FAMILIES.values() for name in fam.critic_kinds
}

synth_task_coverage = CRITICS["synth_task_coverage"]
synth_task_duration = CRITICS["synth_task_duration"]
synth_no_overlap = CRITICS["synth_no_overlap"]
synth_horizon = CRITICS["synth_horizon"]
synth_precedence = CRITICS["synth_precedence"]
synth_window = CRITICS["synth_window"]
synth_meeting_duration = CRITICS["synth_meeting_duration"]
synth_work_hours = CRITICS["synth_work_hours"]
synth_busy = CRITICS["synth_busy"]
synth_preference = CRITICS["synth_preference"]
synth_deadline = CRITICS["synth_deadline"]
synth_earliest = CRITICS["synth_earliest"]
synth_trip_days = CRITICS["synth_trip_days"]
synth_trip_cities = CRITICS["synth_trip_cities"]
synth_stay = CRITICS["synth_stay"]
synth_direct_flight = CRITICS["synth_direct_flight"]
synth_event = CRITICS["synth_event"]
synth_trip_endpoints = CRITICS["synth_trip_endpoints"]


def entry_point_lines() -> list[str]:
    """The ``pyproject.toml`` lines that register these critics (kept in sync by a test)."""
    return [f'{name} = "critics.synth.critics:{name}"' for name in CRITICS]
