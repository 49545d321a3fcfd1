"""Every synthesized problem is satisfiable, its witness passes every derived critic and Z3, and the
query text parses back to the constraints it was rendered from."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from critics.synth.common import canonical_set
from critics.synth.families import get_family
from critics.synth.family import clear_synthesis_cache
from modulo.critic import Critic

from .conftest import BULK_SEEDS, FAMILIES, bench


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_bulk_seeds_sat_witness_passes_critics_and_z3(
    family: str, critics_by_family: dict[str, dict[str, Critic]]
) -> None:
    """BULK_SEEDS seeds per family (default difficulty): SAT, witness accepted by every critic and by Z3,
    query text parses back to the gold constraints, witness text parses back to the witness."""
    b = bench(family, n=BULK_SEEDS, seed=11)
    fam = get_family(family)
    critics = critics_by_family[family]
    assert set(critics) == set(fam.critic_kinds)
    for p in b.load("generated"):
        assert p.metadata["solvable"] and p.metadata["witness"] is not None, p.id
        assert b.prove_unsolvable(p) is None, p.id
        witness = p.metadata["witness"]
        assert b.check_format(p, witness) == [], p.id
        b.validate_plan(witness)
        for name, crit in critics.items():
            v = crit(p, witness)
            assert v.accepts, (p.id, name, v.feedback)
        truths = fam.z3_truths(p.constraints, witness)
        assert truths is not None and all(truths.values()), (p.id, truths)
        assert fam.z3_valid(p.constraints, witness), p.id
        parsed = fam.parse_query(p.query)
        assert canonical_set(parsed["constraints"]) == canonical_set(p.constraints["constraints"]), p.id
        assert b.parse(b.render_plan(witness), p) == witness, p.id


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_harder_levels_are_sound_too(
    family: str, difficulty: str, critics_by_family: dict[str, dict[str, Critic]]
) -> None:
    b = bench(family, n=6 if difficulty == "hard" else 15, seed=3, difficulty=difficulty)
    fam = get_family(family)
    for p in b.load("generated"):
        w = p.metadata["witness"]
        assert all(c(p, w).accepts for c in critics_by_family[family].values()), p.id
        assert fam.z3_valid(p.constraints, w)
        assert canonical_set(fam.parse_query(p.query)["constraints"]) == canonical_set(p.constraints["constraints"])


@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_problems_and_stable_prefix(family: str) -> None:
    a = bench(family, n=6, seed=5).load("generated")
    clear_synthesis_cache()  # b searches again with Z3: the same problems, not a kept copy of a's
    b = bench(family, n=6, seed=5).load("generated")
    c = bench(family, n=3, seed=5).load("generated")
    d = bench(family, n=6, seed=6).load("generated")
    dump = [json.dumps(p.model_dump(), sort_keys=True) for p in a]
    assert dump == [json.dumps(p.model_dump(), sort_keys=True) for p in b]
    assert dump[:3] == [json.dumps(p.model_dump(), sort_keys=True) for p in c]
    assert [p.query for p in a] != [p.query for p in d]
    assert len({p.id for p in a}) == 6


def test_a_kept_synthesis_is_what_a_new_search_finds_and_each_caller_gets_its_own_copy() -> None:
    fam = get_family("trip")
    knobs = fam.knobs("easy", {})
    clear_synthesis_cache()
    first = fam.synthesize(7, knobs, unique=True)
    kept = fam.synthesize(7, knobs, unique=True)
    assert kept == first and kept is not first and kept.spec is not first.spec
    first.spec["constraints"].clear()  # a caller changing its copy changes nobody else's
    assert fam.synthesize(7, knobs, unique=True) == kept
    clear_synthesis_cache()
    assert fam.synthesize(7, knobs, unique=True) == kept
    assert fam.synthesize(7, knobs, unique=True, unsolvable=True) != kept  # every argument is in the key
    assert fam.synthesize(8, knobs, unique=True) != kept


def test_a_family_searching_with_other_settings_gets_its_own_synthesis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search settings an instance may override are part of what a kept synthesis is kept under."""
    fam = get_family("calendar")
    knobs = fam.knobs("easy", {})
    clear_synthesis_cache()
    fam.synthesize(3, knobs)
    searches: list[int] = []
    search = type(fam)._synthesize

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        searches.append(1)
        return search(self, *args, **kwargs)

    monkeypatch.setattr(type(fam), "_synthesize", counted)
    fam.synthesize(3, knobs)
    assert searches == []  # the same settings: the kept one
    other = copy.copy(fam)
    other.tries_per_constraint = fam.tries_per_constraint + 1
    other.synthesize(3, knobs)
    assert searches == [1]


def test_unique_families_have_a_single_solution() -> None:
    for family in ("calendar", "trip"):
        for p in bench(family, n=20, seed=2).load("generated"):
            assert p.metadata["unique"] is True, p.id
    tasks = bench("tasks", n=10, seed=2, unique=True).load("generated")
    assert sum(p.metadata["unique"] is True for p in tasks) >= 8


def test_knobs_change_the_size() -> None:
    small = bench("tasks", n=3, n_actions=3).load("generated")
    big = bench("tasks", n=3, n_actions=6, n_constraints=8).load("generated")
    assert all(len(p.constraints["actions"]) == 3 for p in small)
    assert all(len(p.constraints["actions"]) == 6 for p in big)
    trip = bench("trip", n=3, n_cities=4).load("generated")
    assert all(len(p.constraints["cities"]) == 4 for p in trip)
    cal = bench("calendar", n=3, n_people=4, n_days=2).load("generated")
    assert all(len(p.constraints["people"]) == 4 and len(p.constraints["days"]) == 2 for p in cal)


def test_easy_calendar_prompts_are_short_for_a_small_model() -> None:
    """The offline quickstart runs a 135M model on synth/calendar (easy): keep prompts a few hundred tokens."""
    b = bench("calendar", n=50, seed=0)
    lengths = [len(p.query) for p in b.load("generated")]
    assert max(lengths) < 900 and sum(lengths) / len(lengths) < 700, (max(lengths), sum(lengths) / len(lengths))
    first = b.load("generated")[0]
    assert len(first.constraints["people"]) == 2 and len(first.constraints["days"]) == 1
