"""What ``modulo critics extract synth/FAMILY`` needs: each critic's constraint in words, and gate sets
labelled by Z3.

A gate set for one constraint (one built-in critic: ``synth_busy``, ...) holds, for freshly synthesized
problems that have a requirement of the constraint's kinds (medium and hard alternately; a few that have
none are kept too), the Z3 witness and its mutants (the operators of ``modulo critics audit``: swaps,
shifts, collisions, and boundary mutants one step outside or exactly on a limit), each labelled with
Z3's verdict on the constraints of that critic's kinds alone. Plans the format check refuses are left
out (the format critic gates every other critic).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from modulo.benchmark import ConstraintInfo, GateCase
from modulo.types import PlanJSON, Problem

from .common import rng_for
from .critics import _DESCRIPTIONS

if TYPE_CHECKING:
    from .benchmark import SynthBenchmark

_TIMES = (
    "Times in the problem's constraints are minutes after midnight (540 is 9:00); the plan's times are "
    "'H:MM' strings on a 24-hour clock (for example '9:30', '13:00')."
)

#: family -> how the problem's structured constraints and the plan encode each kind of requirement
NOTES: dict[str, str] = {
    "calendar": (
        "problem['constraints'] has 'people', 'days' (the weekdays considered, in order) and 'constraints': a "
        "list of objects, each with 'id', 'kind', 'text' (the query's words) and the fields of its kind: "
        "meeting_duration {minutes}; work_hours {start, end, days}; busy {person, day, start, end} (the person "
        "is busy from start up to end: a meeting that ends exactly at start or starts exactly at end does not "
        "overlap); avoid_before {person, day, time} (on that day the meeting must not start before time); "
        "avoid_after {person, day, time} (on that day the meeting must not end after time); avoid_day "
        "{person, day}; deadline {day, time} (the meeting must end by time on that day; a later day in "
        "'days' is too late); earliest {} (the slot must be the earliest one, on a 30-minute grid from the "
        "work hours' start, that satisfies every other constraint). The plan is {'day': weekday, 'start': "
        "'H:MM', 'end': 'H:MM'}. " + _TIMES
    ),
    "tasks": (
        "problem['constraints'] has 'actions' (the task names) and 'constraints': a list of objects, each "
        "with 'id', 'kind', 'text' (the query's words) and the fields of its kind: coverage {}; no_overlap {}; "
        "horizon {start, end}; duration {action, minutes}; precedence {first, then} (then starts no earlier "
        "than first ends); deadline {action, time} (ends by time); not_before {action, time} (starts at or "
        "after time); window {action, start, end} (lies within start..end). The plan is {'schedule': [{'task', "
        "'start': 'H:MM', 'end': 'H:MM'}, ...]}. " + _TIMES
    ),
    "trip": (
        "problem['constraints'] has 'cities' and 'constraints': a list of objects, each with 'id', 'kind', "
        "'text' (the query's words) and the fields of its kind: total_days {days}; cities {}; flights {pairs} "
        "(undirected direct connections); stay {city, days}; event {what, city, first, last}; start_city "
        "{city}; end_city {city}. The plan is {'stays': [{'city', 'start_day', 'end_day'}, ...]}: days are "
        "numbered from 1, a stay from start_day to end_day counts end_day - start_day + 1 days, and on a flight "
        "day the traveller is in both cities (one stay's end_day is the next one's start_day)."
    ),
}


def extraction_constraints(bench: SynthBenchmark) -> list[ConstraintInfo]:
    family = bench.family
    return [
        ConstraintInfo(
            name=name,
            description=f"{_DESCRIPTIONS[name]} (the requirements of kind {', '.join(kinds)})",
            notes=NOTES.get(family.name, ""),
            reference=name,
        )
        for name, kinds in family.critic_kinds.items()
    ]


def gate_cases(bench: SynthBenchmark, constraint: str, *, problems: int, seed: int) -> list[GateCase]:
    """Witnesses and their mutants, each labelled with Z3's verdict on ``constraint``'s requirements.

    ``problems`` problems that hold a requirement of the constraint's kinds (synthesized problems, medium
    and hard alternately, are skipped until enough do, up to 40 times as many), plus up to a quarter as
    many met on the way that hold none (a critic must accept every plan of those). While some kind of the
    constraint (``synth_preference``: avoid_before, avoid_after, avoid_day) is broken alone by no plan yet,
    more problems are added, only ones that break such a kind alone: otherwise a critic that ignored that
    kind would pass every case. A kind still not broken alone after 40 times as many problems is a
    ConfigError, never a gate that cannot see it."""
    from modulo.errors import ConfigError

    family = bench.family
    kinds = family.critic_kinds.get(constraint)
    if kinds is None:
        raise ConfigError(
            f"{bench.name} has no constraint {constraint!r}; its constraints: {', '.join(family.critic_kinds)}"
        )
    cases: list[GateCase] = []
    relevant = others = 0
    #: the kinds no plan breaks alone yet: a critic that ignored one of them would pass every such gate
    uncovered = set(kinds)
    for index in range(40 * problems):
        if relevant >= problems and not uncovered:
            break
        labelled = _labelled(type(bench), seed, index)
        if not labelled:
            continue
        spec = labelled[0][0].constraints
        kind_of = {c["id"]: c["kind"] for c in spec["constraints"]}
        alone = {kind_of[ids[0]] for *_, truths in labelled if len(ids := _broken(truths, kind_of, kinds)) == 1}
        if any(c["kind"] in kinds for c in spec["constraints"]):
            if relevant >= problems and not alone & uncovered:
                continue  # enough problems: only one that breaks a kind not yet broken alone is added
            relevant += 1
        elif others < problems // 4:
            others += 1
        else:
            continue
        uncovered -= alone
        for problem, origin, plan, truths in labelled:
            broken = [c for c in spec["constraints"] if c["kind"] in kinds and not truths[c["id"]]]
            oracle = (
                "Z3: satisfies every requirement of these kinds"
                if not broken
                else "Z3: breaks " + "; ".join(f'{c["id"]} "{c.get("text") or family.describe(c)}"' for c in broken)
            )
            cases.append(GateCase(problem=problem, plan=plan, valid=not broken, origin=origin, oracle=oracle))
    if uncovered:
        raise ConfigError(
            f"{bench.name}: no plan of the gate set of {constraint} (seed {seed}, {40 * problems} problems tried) "
            f"breaks a requirement of kind {', '.join(sorted(uncovered))} alone, so a critic that ignores it would "
            "be admitted: raise --problems or change --seed"
        )
    return cases


def _broken(truths: dict[str, bool], kind_of: dict[str, str], kinds: tuple[str, ...]) -> list[str]:
    """The ids of the requirements of ``kinds`` a plan breaks."""
    return [i for i, ok in truths.items() if not ok and kind_of.get(i) in kinds]


@functools.lru_cache(maxsize=2048)
def _labelled(
    factory: type[SynthBenchmark], seed: int, index: int
) -> tuple[tuple[Problem, str, PlanJSON, dict[str, bool]], ...]:
    """(problem, origin, plan, Z3's verdict on each constraint) for the witness of problem ``index`` (medium
    for even indices, hard for odd ones) and each of its mutants: computed once for every constraint."""
    source = factory(n=index + 1, seed=seed, difficulty=("medium", "hard")[index % 2])
    family = source.family
    problem = source.make(index)
    witness = problem.metadata.get("witness")
    if witness is None:
        return ()
    spec = problem.constraints
    rng = rng_for("gate", problem.id)
    out: list[tuple[Problem, str, PlanJSON, dict[str, bool]]] = []
    seen: set[str] = set()
    for origin, plan in [("witness", witness), *((m.kind, m.plan) for m in family.mutants(rng, spec, witness))]:
        key = repr(plan)
        if key in seen or family.check_format(spec, plan):
            continue
        truths = family.z3_truths(spec, plan)
        if truths is None:
            continue
        seen.add(key)
        out.append((problem, origin, plan, truths))
    return tuple(out)
