"""The 13 TravelPlanner critics: 8 commonsense and 5 hard constraints.

Every critic takes the option ``mode`` (``"strict"``, the default: the sound reading; or
``"official"``: bug for bug the published evaluator), offers hints (at ``critic_options.feedback=hint``
it adds a constructive suggestion from the database), and is given the bound
:class:`~critics.travelplanner.benchmark.TravelPlanner` as ``benchmark`` (it owns the database store).
The checks are the very functions the evaluator uses.

A hard critic whose constraint the query does not state answers ``Verdict.not_applicable()``.
Feedback names the day, the field, the offending value and the reason; ``details`` carries the same
as data (plus ``key``: the official constraint name, ``mode`` and ``source``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from modulo import components
from modulo.benchmark import Benchmark
from modulo.critic import CriticFactory, critic
from modulo.errors import ConfigError
from modulo.types import PlanJSON, Problem, Verdict

from .checks import PAPER_NAMES, CheckFn, CheckResult, crashed, describe_official
from .evaluate import MODES, check_module
from .hints import hint_for

if TYPE_CHECKING:
    from .benchmark import TravelPlanner

BENCHMARKS = ("travelplanner",)


def _make(name: str, key: str, group: str, description: str, priority: int) -> CriticFactory:
    #: what every verdict's details start with, per mode: the official key, the mode and the checks' source
    meta = {m: {"key": key, "mode": m, "source": "oracle" if m == "official" else "reimplemented"} for m in MODES}
    #: the check function of each mode (run as run_check runs it, as check_module(mode).check does)
    checks: dict[str, CheckFn] = {m: check_module(m).CHECKS[key] for m in MODES}
    not_stated = f"the query states no {PAPER_NAMES[key].lower()} constraint"
    # the verdicts that never vary, made once (verdicts are frozen): not applicable, and a pass whose check
    # found nothing to add to the details' head
    not_applicable = Verdict(critic=name, group=group, passed=True, applicable=False, feedback=not_stated)
    passed = {m: Verdict(critic=name, group=group, passed=True, details=dict(meta[m])) for m in MODES}

    def check(
        problem: Problem,
        plan: PlanJSON,
        *,
        benchmark: Benchmark,
        mode: Literal["strict", "official"] = "strict",
        hints: bool = False,
    ) -> Verdict:
        if mode not in MODES:
            raise ConfigError(f"critic {name!r}: mode must be one of {list(MODES)}, not {mode!r}")
        if type(benchmark) not in _READERS and not _reads_travelplanner(benchmark):
            raise ConfigError(f"critic {name!r} checks TravelPlanner plans, not {benchmark.name!r} ones")
        tp: TravelPlanner = benchmark  # type: ignore[assignment]
        # each verdict is labelled here (critic, group), so the core need not copy it to label it
        if plan is None:
            return Verdict(
                critic=name, group=group, passed=False, feedback="There is no plan to check.", details=dict(meta[mode])
            )
        query = tp.critic_query(problem)  # parsed once per problem, read-only
        try:
            value, message, found = checks[mode](query, plan, tp.store)
        except Exception as exc:  # a failed result naming the exception, as run_check makes it
            result = crashed(exc)
        else:
            if value is None:
                return not_applicable
            if value is not False:
                return (
                    Verdict(critic=name, group=group, passed=True, details={**meta[mode], **found})
                    if found
                    else passed[mode]
                )
            result = CheckResult(value, message, details=found)
        details: dict[str, Any] = {**meta[mode], **result.details}
        feedback = describe_official(key, result) if mode == "official" else (result.message or name)
        hint = hint_for(key, tp.store, query, plan, result) if hints else None
        if result.error is not None:
            details["error"] = result.error
        return Verdict(critic=name, group=group, passed=False, feedback=feedback, hint=hint, details=details)

    check.__name__ = name
    check.__qualname__ = name
    check.__doc__ = description
    return critic(
        name,
        group=group,
        description=description,
        benchmarks=BENCHMARKS,
        priority=priority,
        source="oracle",
        options=("mode", "hints"),
        inline=True,  # well under a millisecond a plan, on tables held in memory: no hand-off to a worker
    )(check)


#: the benchmark classes found to offer what the critics read (a store and the critics' query)
_READERS: set[type] = set()


def _reads_travelplanner(benchmark: Benchmark) -> bool:
    """Whether ``benchmark`` offers the store and the structured query the critics read (its class kept
    when the class itself offers both)."""
    if not (hasattr(benchmark, "store") and hasattr(benchmark, "critic_query")):
        return False
    if hasattr(type(benchmark), "store") and hasattr(type(benchmark), "critic_query"):
        _READERS.add(type(benchmark))
    return True


_SPECS: list[tuple[str, str, str, str]] = [
    # name, official key, group, description
    ("within_sandbox", "is_valid_information_in_sandbox", "commonsense",
     "every flight, road trip, restaurant, attraction and accommodation exists in the database"),
    ("complete_information", "is_not_absent", "commonsense",
     "every day of the trip is filled in: transport, meals, attractions and accommodation"),
    ("within_current_city", "is_valid_information_in_current_city", "commonsense",
     "each day's activities and accommodation are in the city where the traveller is"),
    ("reasonable_city_route", "is_reasonable_visiting_city", "commonsense",
     "the trip starts and ends at the origin and visits each city in one stay"),
    ("diverse_restaurants", "is_valid_restaurants", "commonsense", "no restaurant is visited twice"),
    ("diverse_attractions", "is_valid_attractions", "commonsense", "no attraction is visited twice"),
    ("non_conflicting_transportation", "is_valid_transportation", "commonsense",
     "transport modes do not conflict (self-driving with flights or taxis)"),
    ("minimum_nights_stay", "is_valid_accommodation", "commonsense",
     "each stay is at least the accommodation's minimum number of nights"),
    ("budget", "valid_cost", "hard", "the total cost is within the budget"),
    ("room_rule", "valid_room_rule", "hard", "accommodations allow what the query needs (pets, parties, ...)"),
    ("room_type", "valid_room_type", "hard", "accommodations are of the requested room type"),
    ("cuisine", "valid_cuisine", "hard", "meals cover every requested cuisine"),
    ("transportation", "valid_transportation", "hard", "the trip avoids the transport mode the query rules out"),
]  # fmt: skip

_FACTORIES: dict[str, CriticFactory] = {
    name: _make(name, key, group, description, priority=10 + n)
    for n, (name, key, group, description) in enumerate(_SPECS)
}

within_sandbox = _FACTORIES["within_sandbox"]
complete_information = _FACTORIES["complete_information"]
within_current_city = _FACTORIES["within_current_city"]
reasonable_city_route = _FACTORIES["reasonable_city_route"]
diverse_restaurants = _FACTORIES["diverse_restaurants"]
diverse_attractions = _FACTORIES["diverse_attractions"]
non_conflicting_transportation = _FACTORIES["non_conflicting_transportation"]
minimum_nights_stay = _FACTORIES["minimum_nights_stay"]
budget = _FACTORIES["budget"]
room_rule = _FACTORIES["room_rule"]
room_type = _FACTORIES["room_type"]
cuisine = _FACTORIES["cuisine"]
transportation = _FACTORIES["transportation"]

COMMONSENSE_CRITICS: tuple[str, ...] = tuple(n for n, _, g, _ in _SPECS if g == "commonsense")
HARD_CRITICS: tuple[str, ...] = tuple(n for n, _, g, _ in _SPECS if g == "hard")
ALL_CRITICS: tuple[str, ...] = COMMONSENSE_CRITICS + HARD_CRITICS
#: registered name -> the official evaluator's key for the same constraint (also the golden verdicts' key)
OFFICIAL_KEYS: dict[str, str] = {name: key for name, key, _, _ in _SPECS}


def official_key_of(name: str) -> str | None:
    """The official key whose check passes on a plan that the critic registered as ``name`` passed (see
    :meth:`~critics.travelplanner.benchmark.TravelPlanner.evaluate_final`): the key of one of these 13
    critics when the name is registered to it; else None (another critic, or the name taken over)."""
    factory = _FACTORIES.get(name)
    if factory is None:
        return None
    try:
        registered = components.critics.get(name)
    except Exception:  # not registered, or a plugin of that name that fails to load: not ours
        return None
    return OFFICIAL_KEYS[name] if registered is factory else None
