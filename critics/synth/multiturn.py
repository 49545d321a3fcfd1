"""Multi-turn synthesized problems: hidden constraints, updates, and abstention reasons checked by Z3.

A synthesized problem's *intent* is its whole constraint set. With ``hidden=K`` (a benchmark option,
``modulo synth FAMILY --hidden K``) K stated requirements of the intent are taken out of the query and
held back: the query and the critics see only the rest (``problem.constraints``); the held-back ones
(each with its sentence in the query's words) wait in the problem's hidden information until a user
reveals them, on a question (``hidden_mode=ask``) or as an update at a turn (``hidden_mode=update``,
``update_after=k``). Structural requirements (durations, work hours, "earliest") are never hidden, and
the synthesizer prefers requirements that matter: the plan Z3 finds for what is left breaks the one
held back.

Every update re-derives the problem from its constraint set (:func:`apply_changes`): the critics read
the new set, Z3 decides again whether a plan exists (``metadata['solvable']``) and finds the new witness,
so the oracle stays exact after every update, including an update that makes the problem unsolvable.

Abstention reasons (:func:`check_reason`): an abstention is accepted only on a problem whose intent
Z3 proves unsatisfiable, and only when its reason is *consistent* with the proof. Consistent means:
the reason names at least one requirement of the minimal unsat core Z3 gives (a stated requirement
when the core holds any; the structural ones every core shares count only when the core is made of
nothing else), or the requirements it names are, with the structural ones, unsatisfiable by
themselves (a different, equally valid core named in full). A reason *names* a requirement when it
quotes its sentence (case and punctuation aside) or mentions every value that identifies it: the
names in it (people, tasks, cities, days of the week, events) and its numbers (clock times such as
13:30 or 1:30 pm for times of day, the minutes or hours of a duration, day numbers).
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

from .common import Constraint, fmt_hours, fmt_time
from .family import Family, Spec

#: argument keys holding a time of day in minutes after midnight
TIME_KEYS = ("time", "start", "end")
#: argument keys holding a duration in minutes
DURATION_KEYS = ("minutes",)
#: argument keys holding a count of days or a day number
NUMBER_KEYS = ("days", "first", "last")
HIDDEN_MODES = ("ask", "update")
#: candidates tried (one Z3 solve each) per held-back requirement when looking for one that matters
PROBES = 8


def intent(spec: Spec, hidden: Sequence[Constraint]) -> Spec:
    """The whole constraint set: what the planner was told plus what is still held back."""
    return {**spec, "constraints": [*spec["constraints"], *hidden]}


def visible_spec(spec: Spec, hidden_ids: Sequence[str]) -> Spec:
    held = set(hidden_ids)
    return {**spec, "constraints": [c for c in spec["constraints"] if c["id"] not in held]}


def hideable(family: Family, spec: Spec) -> list[Constraint]:
    """The stated requirements that may be held back (never a structural or selection one)."""
    fixed = set(family.structural_kinds()) | set(family.meta_kinds())
    return [c for c in spec["constraints"] if c["kind"] not in fixed]


def choose_hidden(family: Family, spec: Spec, k: int, rng: random.Random, *, keep: Sequence[str] = ()) -> list[str]:
    """Ids of ``k`` requirements to hold back from ``spec`` (fewer when fewer may be hidden).

    Requirements that matter come first: one is preferred when the plan Z3 finds without it breaks
    it (so a planner that never learns it is likely to fail); at most :data:`PROBES` candidates are
    tried per pick (one Z3 solve each), then the first that may be hidden is taken. ``keep``: ids never
    hidden.
    """
    chosen: list[str] = []
    ctx = z3.Context()  # one context for all probes (a context costs more than a small solve)
    pool = [c for c in hideable(family, spec) if c["id"] not in keep]
    rng.shuffle(pool)
    while len(chosen) < k and pool:
        pick = None
        probes = 0
        for c in pool:
            trial = visible_spec(spec, [*chosen, c["id"]])
            if not family.may_hide(c, trial):
                continue
            if pick is None:
                pick = c
            if probes >= PROBES:
                break
            probes += 1
            witness = family.solve(trial, ctx)
            if witness is not None and family.violation(c, trial, witness) is not None:
                pick = c
                break
        if pick is None:
            break
        chosen.append(pick["id"])
        pool.remove(pick)
    return chosen


def apply_changes(
    family: Family, spec: Spec, hidden: Sequence[Constraint], *, add: Sequence[Constraint], remove: Sequence[str]
) -> tuple[Spec, list[Constraint], dict[str, Any]]:
    """The constraint set after an update: ``remove`` (ids) dropped, ``add`` appended (new ids unless an
    added one reveals a held-back requirement, which keeps its id and leaves the hidden list).

    Returns the new visible spec, the requirements still held back, and the re-derived oracle facts:
    ``solvable`` (Z3, on the whole intent), ``witness`` (a plan Z3 finds for it, or None),
    ``known_solvable`` (Z3, on what the planner now knows) and ``added`` (the ids added).
    """
    out = copy.deepcopy(spec)
    held = [copy.deepcopy(c) for c in hidden]
    ids = {c["id"] for c in out["constraints"]}
    unknown = [cid for cid in remove if cid not in ids]
    if unknown:
        raise ValueError(f"no constraint {unknown} to remove (ids: {sorted(ids)})")
    out["constraints"] = [c for c in out["constraints"] if c["id"] not in set(remove)]
    added: list[str] = []
    for c in add:
        c = copy.deepcopy(c)
        revealed = next((h for h in held if h["id"] == c.get("id")), None)
        if revealed is not None:
            held.remove(revealed)
            out["constraints"].append(revealed)
            added.append(revealed["id"])
            continue
        family.validate_constraint(c, out)
        used = {x["id"] for x in [*out["constraints"], *held]} | set(remove)
        n = len(used) + 1
        while f"c{n}" in used:
            n += 1
        c["id"] = f"c{n}"
        c.setdefault("text", family.sentence(c, out))
        out["constraints"].append(c)
        added.append(c["id"])
    whole = intent(out, held)
    witness = family.solve(whole)
    facts = {
        "solvable": witness is not None,
        "witness": witness,
        "known_solvable": family.solve(out) is not None if held else witness is not None,
        "added": added,
    }
    return out, held, facts


# -- abstention reasons ------------------------------------------------------------------------------
@dataclass
class ReasonCheck:
    """Whether an abstention's reason is accepted, and why (the core and what the reason named)."""

    accepted: bool
    message: str
    core: list[str] | None = None
    named: list[str] = field(default_factory=list)


_CLOCK = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s?m\b|\b(\d{1,2}):(\d{2})\b", re.IGNORECASE)


def clock_times(text: str) -> set[int]:
    """Times of day written in ``text`` (13:30, 9:00, 1:30 pm, 1 pm), as minutes after midnight."""
    out: set[int] = set()
    for m in _CLOCK.finditer(text):
        if m.group(3):
            hours, mins = int(m.group(1)) % 12, int(m.group(2) or 0)
            if m.group(3).lower() == "p":
                hours += 12
        else:
            hours, mins = int(m.group(4)), int(m.group(5))
        out.add(hours * 60 + mins)
    return out


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9:]+", " ", text.lower()).split())


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![a-z0-9]){re.escape(word.lower())}(?![a-z0-9])", text.lower()) is not None


def _has_number(text: str, n: int) -> bool:
    return re.search(rf"(?<![\d:.]){n}(?![\d:])", text) is not None


def _has_duration(text: str, minutes: int) -> bool:
    words = {f"{minutes} minutes", f"{minutes} min", fmt_hours(minutes)}
    if minutes % 60 == 0:
        words |= {f"{minutes // 60} hour", f"{minutes // 60} hours"}
    return any(_has_word(text, w) for w in words)


def identifying_values(c: Constraint) -> list[tuple[str, Any]]:
    """(key, value) pairs that identify ``c``: its names and numbers (lists, ids and texts left out)."""
    return [
        (k, v)
        for k, v in c.items()
        if k not in ("id", "kind", "text") and isinstance(v, (str, int)) and not isinstance(v, bool)
    ]


def names_constraint(c: Constraint, reason: str) -> bool:
    """Whether ``reason`` names ``c``: quotes its sentence, or mentions every value that identifies it."""
    text = c.get("text")
    if text and _norm(text) in _norm(reason):
        return True
    values = identifying_values(c)
    if not values:
        return False
    times = clock_times(reason)
    for key, value in values:
        if isinstance(value, str):
            ok = _has_word(reason, value)
        elif key in TIME_KEYS:
            ok = value in times
        elif key in DURATION_KEYS:
            ok = _has_duration(reason, value)
        elif key in NUMBER_KEYS:
            ok = _has_number(reason, value)
        else:
            ok = _has_number(reason, value) or value in times
        if not ok:
            return False
    return True


def check_reason(family: Family, whole: Spec, reason: str) -> ReasonCheck:
    """Accept an abstention with ``reason`` on the problem whose whole intent is ``whole`` (see module doc)."""
    if not reason or not reason.strip():
        return ReasonCheck(False, "an abstention must give a reason")
    core = family.unsat_core_ids(whole)
    if core is None:
        witness = family.solve(whole)
        shown = family.render_plan(witness) if witness is not None else "a plan"
        return ReasonCheck(False, f"the problem is solvable: Z3 finds a plan that meets every requirement ({shown})")
    structural = set(family.structural_kinds()) | set(family.meta_kinds())
    by_id = {c["id"]: c for c in whole["constraints"]}
    named = [c["id"] for c in whole["constraints"] if names_constraint(c, reason)]
    stated_core = [cid for cid in core if by_id[cid]["kind"] not in structural]
    counted = stated_core or core
    hit = [cid for cid in named if cid in counted]
    quoted = "; ".join(f'"{by_id[cid].get("text") or family.describe(by_id[cid])}"' for cid in core)
    if hit:
        return ReasonCheck(True, f"the reason names {', '.join(hit)} of the unsat core ({quoted})", core, named)
    named_stated = [cid for cid in named if by_id[cid]["kind"] not in structural]
    if named_stated:
        kept = [c for c in whole["constraints"] if c["id"] in named_stated or c["kind"] in structural]
        if not family.satisfiable({**whole, "constraints": kept}):
            return ReasonCheck(
                True, f"the requirements the reason names ({', '.join(named_stated)}) clash by themselves", core, named
            )
    return ReasonCheck(
        False,
        f"the reason names no requirement of the unsat core ({quoted})"
        + (f"; it names {', '.join(named)}" if named else ""),
        core,
        named,
    )


def constraint_from(family: Family, value: Any, spec: Spec) -> Constraint:
    """An update's constraint: a dict (``{"kind": ..., ...}``) or a sentence in the query's words."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        sentence = value.strip().rstrip(".")
        return {**family.parse_requirement(sentence, spec), "text": sentence}
    raise ValueError(f"a constraint must be an object or a sentence, not {json.dumps(value)[:80]}")


def sentence_of(c: Constraint, family: Family, spec: Spec) -> str:
    return str(c.get("text") or family.sentence(c, spec))


__all__ = [
    "HIDDEN_MODES",
    "ReasonCheck",
    "apply_changes",
    "check_reason",
    "choose_hidden",
    "clock_times",
    "constraint_from",
    "fmt_time",
    "hideable",
    "intent",
    "names_constraint",
    "visible_spec",
]
