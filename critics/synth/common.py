"""Helpers shared by the synthesized families: clock times, formula folding, templates, cores.

Constraint sets are plain JSON dicts (``{"id", "kind", ...arguments, "text"}``) so a problem can be
written to a file and read back. Formulas are built with Z3 terms where something is unknown and
folded to Python booleans where everything is known, so one encoder serves both the synthesizer
(symbolic rows) and the plan checker (concrete rows).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

import z3

from modulo.errors import ConfigError, PlanFormatError

#: a constraint: id, kind, its arguments, and (once rendered) its text
Constraint = dict[str, Any]
#: a Z3 boolean or an already-decided Python boolean
Formula = Any

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


# -- random streams ----------------------------------------------------------------------------
def derive_seed(*parts: int | str) -> int:
    """A stable 63-bit seed from integers and strings (independent of PYTHONHASHSEED)."""
    acc = 1469598103934665603
    for part in parts:
        for byte in f"{part}|".encode():
            acc = ((acc ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return acc >> 1


def rng_for(*parts: int | str) -> random.Random:
    return random.Random(derive_seed(*parts))


# -- clock times ------------------------------------------------------------------------------
#: a clock time and a duration as the queries write them (patterns for reading a query back)
TIME_RE = r"\d{1,2}:\d{2}"
DUR_RE = r"half an hour|one hour|an hour|[\d.]+ hours?"
_TIME = re.compile(r"^\s*(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?\s*$", re.IGNORECASE)


def fmt_time(minutes: int) -> str:
    """540 -> '9:00'."""
    return f"{minutes // 60}:{minutes % 60:02d}"


def parse_time(text: str) -> int:
    """'9:00', '09:30', '2:15 PM', '14' -> minutes after midnight. Raises PlanFormatError."""
    m = _TIME.match(str(text))
    if not m:
        raise PlanFormatError(f"{text!r} is not a clock time like 9:30")
    hours, mins = int(m.group(1)), int(m.group(2) or 0)
    suffix = (m.group(3) or "").lower().replace(".", "")
    if suffix == "pm" and hours < 12:
        hours += 12
    elif suffix == "am" and hours == 12:
        hours = 0
    if hours > 24 or mins > 59 or (hours == 24 and mins):
        raise PlanFormatError(f"{text!r} is not a clock time like 9:30")
    return hours * 60 + mins


def fmt_hours(minutes: int) -> str:
    """Durations in words: 30 -> 'half an hour', 60 -> 'one hour', 120 -> '2 hours', 90 -> '1.5 hours'."""
    if minutes == 30:
        return "half an hour"
    if minutes == 60:
        return "one hour"
    if minutes % 60 == 0:
        return f"{minutes // 60} hours"
    return f"{minutes / 60:g} hours"


def parse_hours(text: str) -> int:
    t = text.strip().lower()
    if t in ("half an hour", "30 minutes"):
        return 30
    if t in ("one hour", "an hour", "1 hour"):
        return 60
    m = re.fullmatch(r"([\d.]+) hours?", t)
    if not m:
        raise PlanFormatError(f"{text!r} is not a duration")
    return round(float(m.group(1)) * 60)


# -- folding formula builders -----------------------------------------------------------------
def _fold(parts: Iterable[Formula], unit: bool, join: Any) -> Formula:
    """``join`` (z3.And or z3.Or) over ``parts``, folding decided parts: ``unit`` (True for And) drops out,
    its opposite decides the whole; no term left is ``unit``, one term is itself."""
    terms: list[Any] = []
    for p in parts:
        if p is (not unit):
            return not unit
        if p is unit:
            continue
        terms.append(p)
    if not terms:
        return unit
    return terms[0] if len(terms) == 1 else join(*terms)


def conj(parts: Iterable[Formula]) -> Formula:
    return _fold(parts, True, z3.And)


def disj(parts: Iterable[Formula]) -> Formula:
    return _fold(parts, False, z3.Or)


def impl(cond: Formula, then: Formula) -> Formula:
    if cond is False or then is True:
        return True
    if cond is True:
        return then
    if then is False:
        return z3.Not(cond)
    return z3.Implies(cond, then)


def neg(f: Formula) -> Formula:
    if isinstance(f, bool):
        return not f
    return z3.Not(f)


def as_z3(f: Formula, ctx: Any = None) -> Any:
    return z3.BoolVal(f, ctx) if isinstance(f, bool) else f


def truth(f: Formula) -> bool:
    """The value of a ground formula, decided by Z3."""
    if isinstance(f, bool):
        return f
    value = z3.simplify(f)
    if z3.is_true(value):
        return True
    if z3.is_false(value):
        return False
    solver = z3.Solver()
    solver.add(z3.Not(f))
    return bool(solver.check() == z3.unsat)


def new_solver(ctx: Any = None) -> Any:
    """A Z3 solver. Pass a fresh ``z3.Context()`` where the result must not depend on what was built before
    (Z3's choices follow the ids of terms, so a shared context makes models depend on history)."""
    solver = z3.SimpleSolver(ctx=ctx)
    solver.set("random_seed", 0)
    return solver


def model_int(model: Any, term: Any) -> int:
    if isinstance(term, int):
        return term
    return int(model.eval(term, model_completion=True).as_long())


# -- plans ----------------------------------------------------------------------------------------
def plan_entries(plan: Any, key: str, fields: Sequence[str], entry: str) -> Iterator[dict[str, Any]]:
    """The objects of the plan's ``key`` list, each checked to hold ``fields`` as it is reached
    (``entry`` names one in the error: "stay 2 needs 'city', ...")."""
    if not isinstance(plan, dict) or not isinstance(plan.get(key), list):
        raise PlanFormatError(f"a plan must be an object with a {key!r} list")
    named = ", ".join(repr(f) for f in fields[:-1]) + f" and {fields[-1]!r}"
    for i, item in enumerate(plan[key]):
        if not isinstance(item, dict) or not set(fields) <= set(item):
            raise PlanFormatError(f"{entry} {i + 1} needs {named}")
        yield item


# -- unsat cores ------------------------------------------------------------------------------
def unsat_core(
    background: Sequence[Formula],
    tracked: Sequence[tuple[str, Formula]],
    *,
    prefer_drop: Sequence[str] = (),
    ctx: Any = None,
) -> list[str] | None:
    """Ids of a minimal set of tracked formulas that is unsatisfiable with ``background``; None if SAT.

    Z3's ``assert_and_track`` gives a first core, which is then shrunk by deletion (trying the ids in
    ``prefer_drop`` first) so the explanation names no constraint that is not needed.
    """
    solver = new_solver(ctx)
    for f in background:
        solver.add(as_z3(f, ctx))
    by_name: dict[str, Formula] = {}
    for cid, f in tracked:
        by_name[cid] = f
        solver.assert_and_track(as_z3(f, ctx), z3.Bool(f"track::{cid}", ctx))
    if solver.check() != z3.unsat:
        return None
    core = [str(b).removeprefix("track::") for b in solver.unsat_core()]
    first = [c for c in prefer_drop if c in core]
    rest = [c for c in core if c not in prefer_drop]

    guarded = new_solver(ctx)
    for f in background:
        guarded.add(as_z3(f, ctx))
    lits = {cid: z3.Bool(f"use::{cid}", ctx) for cid, _f in tracked}
    for cid, f in tracked:
        guarded.add(z3.Implies(lits[cid], as_z3(f, ctx)))

    def shrink(order: list[str]) -> list[str]:
        """Deletion: drop each id in turn while the rest stays unsatisfiable (one solver, assumptions)."""
        keep = list(order)
        for cid in order:
            trial = [c for c in keep if c != cid]
            if guarded.check(*[lits[c] for c in trial]) == z3.unsat:
                keep = trial
        return keep

    # a clash between one or two stated requirements (with the structural ones) reads best: look for one
    # first (satisfiable probes are cheap), and shrink Z3's own core only when there is none
    structural = [c for c, _f in tracked if c in prefer_drop]
    stated = [c for c, _f in tracked if c not in prefer_drop]
    keep: list[str] | None = None
    if len(stated) <= 60:
        probe = new_solver(ctx)
        for f in background:
            probe.add(as_z3(f, ctx))
        for c in structural:
            probe.add(as_z3(by_name[c], ctx))
        pairs = [[a, b] for i, a in enumerate(stated) for b in stated[i + 1 :]] if len(stated) <= 12 else []
        for group in [[a] for a in stated] + pairs:
            probe.push()
            for c in group:
                probe.add(as_z3(by_name[c], ctx))
            clash = probe.check() == z3.unsat
            probe.pop()
            if clash:
                keep = shrink([*structural, *group])
                break
    if keep is None:
        keep = shrink(first + rest)
    rank = {cid: i for i, (cid, _f) in enumerate(tracked)}
    return sorted(keep, key=lambda c: rank[c])


# -- templates --------------------------------------------------------------------------------
_SLOT = re.compile(r"\{(\w+)\}")


def fill(template: str, **values: Any) -> str:
    return _SLOT.sub(lambda m: str(values[m.group(1)]), template)


def template_regex(template: str, slots: dict[str, str]) -> re.Pattern[str]:
    """Compile ``'{a} happens before {b}'`` into a full-match regex with one named group per slot."""
    return _template_regex(template, tuple(sorted(slots.items())))


@lru_cache(maxsize=4096)
def _template_regex(template: str, slot_items: tuple[tuple[str, str], ...]) -> re.Pattern[str]:
    slots = dict(slot_items)
    out: list[str] = []
    pos = 0
    seen: dict[str, int] = {}
    for m in _SLOT.finditer(template):
        out.append(re.escape(template[pos : m.start()]))
        name = m.group(1)
        seen[name] = seen.get(name, 0) + 1
        group = name if seen[name] == 1 else f"{name}__{seen[name]}"
        out.append(f"(?P<{group}>{slots[name]})")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out), re.IGNORECASE)


def alternation(names: Iterable[str]) -> str:
    """A regex matching any of ``names`` literally, longest first."""
    return "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))


def capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def match_name(text: str, names: Sequence[str]) -> str | None:
    """``text`` as one of ``names``: exact, then case- and punctuation-insensitive. None if no match."""
    if text in names:
        return text
    key = _name_key(text)
    for n in names:
        if _name_key(n) == key:
            return n
    return None


def _name_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def pick(rng: random.Random, options: Sequence[str]) -> str:
    return options[rng.randrange(len(options))]


def check_choice(name: str, value: Any, options: Sequence[Any]) -> None:
    if value not in options:
        raise ConfigError(f"{name}={value!r} is not one of {list(options)}")


def strip_texts(constraints: Sequence[Constraint]) -> list[Constraint]:
    """Constraints without their id and text: what a query parser must recover."""
    return [{k: v for k, v in c.items() if k not in ("id", "text")} for c in constraints]


def canonical_set(constraints: Sequence[Constraint]) -> list[str]:
    import json

    return sorted(json.dumps(c, sort_keys=True) for c in strip_texts(constraints))
