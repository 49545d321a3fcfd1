"""Multi-turn synthesized problems: held-back requirements, updates re-derived by Z3, abstention reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from critics.synth.common import canonical_set
from critics.synth.critics import check
from critics.synth.families import get_family
from critics.synth.multiturn import check_reason, clock_times, names_constraint
from modulo.errors import ConfigError, ModuloError
from modulo.types import Problem, ProblemUpdate
from tests.cli_support import invoke, run_command

from .conftest import FAMILIES, bench


def _reveal_all(b: object, p: Problem) -> Problem:
    for key in list(p.hidden):
        p = b.apply_update(p, ProblemUpdate(add={"reveal": key}))  # type: ignore[attr-defined]
    for u in p.updates:
        p = b.apply_update(p, u)  # type: ignore[attr-defined]
    return p


def _critics_pass(family: str, p: Problem, plan: object) -> bool:
    fam = get_family(family)
    return all(check(p, plan, name).accepts for name in fam.critic_kinds)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("mode", ["ask", "update"])
def test_held_back_requirements_leave_the_query_and_the_intent_is_unchanged(family: str, mode: str) -> None:
    plain = bench(family, n=6, seed=2).load("generated")
    multi = bench(family, n=6, seed=2, hidden=2, hidden_mode=mode, update_after=1).load("generated")
    fam = get_family(family)
    for p0, p in zip(plain, multi, strict=True):
        b = bench(family, n=0)
        held = p.metadata["hidden_ids"]
        assert len(held) == 2
        # the intent (told + held back) is the problem synthesized without hiding, constraint for constraint
        assert canonical_set(b.intent(p)["constraints"]) == canonical_set(p0.constraints["constraints"])
        told = {c["id"] for c in p.constraints["constraints"]}
        assert not told & set(held)
        structural = set(fam.structural_kinds()) | set(fam.meta_kinds())
        assert all(c["kind"] not in structural for c in b.intent(p)["constraints"] if c["id"] in held)
        # the query no longer states a held-back requirement, and the planner's view has none of them
        view = p.planner_view()
        assert view.hidden == {} and view.updates == []
        for c in b.intent(p)["constraints"]:
            if c["id"] in held:
                assert c["text"].lower() not in p.query.lower()
        if mode == "ask":
            assert sorted(p.hidden) == ["h1", "h2"] and p.updates == []
        else:
            assert p.hidden == {} and [u.after for u in p.updates] == [1, 2]
        # the oracle is the intent's: the witness is valid for it, and the critics agree with Z3
        assert fam.z3_valid(b.intent(p), p.metadata["witness"])
        assert p.solvable is True and p.metadata["solvable"] is True
        # once everything is told, the problem's constraints are the intent and the witness is certified
        done = _reveal_all(b, p)
        assert done.hidden == {}
        assert canonical_set(done.constraints["constraints"]) == canonical_set(p0.constraints["constraints"])
        assert done.solvable is True
        assert _critics_pass(family, done, done.metadata["witness"])
        assert fam.z3_valid(done.constraints, done.metadata["witness"])
        for c in b.intent(p)["constraints"]:
            if c["id"] in held:
                assert c["text"].lower() in done.query.lower()  # the planner was told each one, in the query's words


def test_calendar_held_back_requirements_matter() -> None:
    """The synthesizer prefers requirements the plan for what is told breaks: without them, the earliest
    slot of the query is not the user's."""
    b = bench("calendar", n=10, seed=0, hidden=2)
    fam = get_family("calendar")
    for p in b.load("generated"):
        told_plan = p.metadata["visible_witness"]
        assert fam.z3_valid(p.constraints, told_plan)
        assert _critics_pass("calendar", p, told_plan)  # certified on what the planner was told ...
        assert not fam.z3_valid(b.intent(p), told_plan)  # ... and wrong for the user
        # the evaluator judges against the intent: this plan does not pass
        row = b.evaluate([p], [told_plan]).per_problem[0]
        assert row["passed"] is False and row["disagreement"] is False
        assert b.evaluate([p], [p.metadata["witness"]]).per_problem[0]["passed"] is True


def test_an_update_can_make_the_problem_unsolvable_and_z3_stays_exact() -> None:
    b = bench("calendar", n=4, seed=5)
    fam = get_family("calendar")
    for p in b.load("generated"):
        assert p.solvable
        duration = next(c["minutes"] for c in p.constraints["constraints"] if c["kind"] == "meeting_duration")
        tight = {"kind": "deadline", "day": "Monday", "time": 540 + duration - 30}
        q = b.apply_update(p, ProblemUpdate(add={"constraints": [tight]}, text="We must be done early."))
        assert q.solvable is False and q.metadata["solvable"] is False and q.metadata["witness"] is None
        assert not fam.satisfiable(q.constraints)
        assert q.query.endswith("Update: We must be done early.")
        explanation = b.prove_unsolvable(q)
        assert explanation is not None
        new = next(c for c in q.constraints["constraints"] if c["kind"] == "deadline")
        assert f'"{new["text"]}"' in explanation
        # the original problem is left as it was
        assert p.solvable and all(c["kind"] != "deadline" for c in p.constraints["constraints"])
        # removing the deadline again brings a plan back, and Z3 finds it
        r = b.apply_update(q, ProblemUpdate(add={"remove": [new["id"]]}))
        assert r.solvable is True and fam.z3_valid(r.constraints, r.metadata["witness"])
        assert "No longer:" in r.query


def test_an_added_requirement_in_the_querys_words_is_read_by_the_familys_parser() -> None:
    b = bench("calendar", n=1, seed=3)
    p = b.load("generated")[0]
    person = p.constraints["people"][0]
    q = b.apply_update(p, ProblemUpdate(add={"constraints": [f"{person} can not meet on Monday after 11:00."]}))
    new = q.constraints["constraints"][-1]
    assert new["kind"] == "avoid_after" and new["person"] == person and new["time"] == 660
    assert new["text"] == f"{person} can not meet on Monday after 11:00"
    witness = q.metadata["witness"]
    if q.solvable:
        assert get_family("calendar").z3_valid(q.constraints, witness)


def test_bad_updates_are_clear_errors() -> None:
    b = bench("calendar", n=1, seed=3, hidden=1)
    p = b.load("generated")[0]
    with pytest.raises(ConfigError, match="takes constraints, remove, reveal"):
        b.apply_update(p, ProblemUpdate(add={"budget": 3}))
    with pytest.raises(ConfigError, match="no hidden item 'h9'"):
        b.apply_update(p, ProblemUpdate(add={"reveal": "h9"}))
    with pytest.raises(ConfigError, match="not one of"):
        nobody = {"kind": "avoid_day", "person": "Nobody", "day": "Monday"}
        b.apply_update(p, ProblemUpdate(add={"constraints": [nobody]}))
    with pytest.raises(ConfigError, match="unknown constraint kind"):
        b.apply_update(p, ProblemUpdate(add={"constraints": [{"kind": "teleport"}]}))
    with pytest.raises(ConfigError, match="no constraint"):
        b.apply_update(p, ProblemUpdate(add={"remove": ["c99"]}))
    with pytest.raises(ConfigError, match="not understood"):
        b.apply_update(p, ProblemUpdate(add={"constraints": ["the moon is made of cheese"]}))
    with pytest.raises(ConfigError, match="hidden_mode"):
        bench("calendar", n=1, hidden=1, hidden_mode="later")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_held_back_contradiction_makes_the_problem_unsolvable_when_told(family: str) -> None:
    b = bench(family, n=6, seed=1, unsolvable_fraction=1.0, hidden=1, hide_contradiction=True)
    fam = get_family(family)
    for p in b.load("generated"):
        injected = p.metadata["injected"]
        assert p.metadata["hidden_ids"] == [injected]
        assert p.solvable is False and p.metadata["known_solvable"] is True
        assert b.prove_unsolvable(p) is None  # what the planner was told has a plan: no early verdict
        # an abstention before the contradiction was told is still right about the user's intent, but its
        # reason must name the contradiction
        told = _reveal_all(b, p)
        assert told.solvable is False and b.prove_unsolvable(told) is not None
        core = fam.unsat_core_ids(told.constraints)
        assert core is not None and injected in core
        text = next(c["text"] for c in told.constraints["constraints"] if c["id"] == injected)
        assert b.check_abstention(told, f"Impossible, because {text}.").verified is True
        assert b.check_abstention(told, "I would rather not.").verified is False


# -- abstention reasons ---------------------------------------------------------------------------
def test_abstention_is_rejected_on_solvable_problems_whatever_the_reason() -> None:
    b = bench("calendar", n=3, seed=9)
    for p in b.load("generated"):
        everything = " ".join(c["text"] for c in p.constraints["constraints"])
        check_ = b.check_abstention(p, f"No slot works: {everything}")
        assert check_.verified is False and "solvable" in check_.detail
        assert b.check_abstention(p, "").verified is False


@pytest.mark.parametrize("family", FAMILIES)
def test_abstention_reason_must_name_a_requirement_of_the_unsat_core(family: str) -> None:
    b = bench(family, n=8, seed=4, unsolvable_fraction=1.0)
    fam = get_family(family)
    structural = set(fam.structural_kinds()) | set(fam.meta_kinds())
    checked = 0
    for p in b.load("generated"):
        core = fam.unsat_core_ids(p.constraints)
        assert core is not None
        by_id = {c["id"]: c for c in p.constraints["constraints"]}
        stated = [cid for cid in core if by_id[cid]["kind"] not in structural]
        for cid in stated:  # quoting any stated member of the core is accepted
            res = b.check_abstention(p, f'This cannot work because "{by_id[cid]["text"]}".')
            assert res.verified is True, (p.id, cid, res.detail)
            checked += 1
        # naming only requirements outside the core (which hold together) is rejected
        outside = [c for c in p.constraints["constraints"] if c["id"] not in core and c["kind"] not in structural]
        rest = [c for c in p.constraints["constraints"] if c["id"] not in core or c["kind"] in structural]
        if outside and fam.satisfiable({**p.constraints, "constraints": rest}):
            res = check_reason(fam, b.intent(p), "Impossible: " + outside[0]["text"])
            named_core = [x for x in res.named if x in stated]  # its values may happen to name a core member
            assert res.accepted is bool(named_core), (p.id, res.message)
        assert b.check_abstention(p, "There is no solution.").verified is False
    assert checked >= 8


def test_calendar_reason_names_a_requirement_by_its_values_not_only_its_words() -> None:
    c = {"id": "c4", "kind": "busy", "person": "Opal", "day": "Monday", "start": 690, "end": 780, "text": "x"}
    assert names_constraint(c, "Opal is tied up on Monday from 11:30 until 1 pm")
    assert names_constraint(c, "opal: monday 11:30 AM - 1:00 PM")
    assert not names_constraint(c, "Opal is busy on Monday from 11:30")  # one end of the block is missing
    assert not names_constraint(c, "Boris is busy on Monday from 11:30 to 13:00")
    d = {"id": "c2", "kind": "meeting_duration", "minutes": 90, "text": "for 1.5 hours"}
    assert names_constraint(d, "a 90 minutes meeting does not fit")
    assert names_constraint(d, "It has to last for 1.5 hours.")
    assert not names_constraint(d, "a 60 minutes meeting does not fit")
    e = {"id": "c3", "kind": "earliest", "text": "The group would like to meet at their earliest availability"}
    assert not names_constraint(e, "there is no slot")  # no values: only its sentence names it
    assert clock_times("9:00, 12 pm, 12:30 am and 1:15 p.m.") == {540, 720, 30, 795}


def test_a_reason_naming_another_valid_core_in_full_is_accepted() -> None:
    """Two independent clashes: naming the one Z3's minimal core did not pick is still consistent."""
    b = bench("calendar", n=1, seed=11)
    fam = get_family("calendar")
    p = b.load("generated")[0]
    dur = next(c["minutes"] for c in p.constraints["constraints"] if c["kind"] == "meeting_duration")
    people = p.constraints["people"]
    first = {"kind": "deadline", "day": "Monday", "time": 540 + dur - 30}
    second = {"kind": "avoid_before", "person": people[0], "day": "Monday", "time": 1020 - dur + 30}
    q = b.apply_update(p, ProblemUpdate(add={"constraints": [first, second]}))
    assert q.solvable is False
    core = fam.unsat_core_ids(q.constraints)
    assert core is not None
    added = q.constraints["constraints"][-2:]
    in_core = [c for c in added if c["id"] in core]
    other = [c for c in added if c["id"] not in core]
    assert in_core
    assert b.check_abstention(q, in_core[0]["text"]).verified is True
    if other:  # each added requirement clashes with the work hours alone: a core of its own
        res = b.check_abstention(q, other[0]["text"])
        assert res.verified is True and "by themselves" in res.detail


# -- files and the command line -----------------------------------------------------------------
def test_synth_command_writes_held_back_requirements(tmp_path: Path) -> None:
    path = tmp_path / "cal.jsonl"
    code, out = invoke("synth", "calendar", "--n", "3", "--seed", "1", "--hidden", "2", "--out", path)
    assert code == 0 and "6 requirements held back (told when asked)" in out
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(sorted(r["hidden"]) == ["h1", "h2"] for r in rows)
    again = bench("calendar", path=str(path)).load("generated")
    made = bench("calendar", n=3, seed=1, hidden=2).load("generated")
    assert [p.model_dump() for p in again] == [p.model_dump() for p in made]

    path2 = tmp_path / "upd.jsonl"
    args = ["calendar", "--n", "2", "--hidden", "1", "--hidden-mode", "update", "--update-after", "3"]
    assert invoke("synth", *args, "--out", path2)[0] == 0
    loaded = bench("calendar", path=str(path2)).load("generated")
    assert all([u.after for u in p.updates] == [3] for p in loaded)


def test_oracle_script_plans_each_version_and_abstains_with_the_core(tmp_path: Path) -> None:
    problems = tmp_path / "p.jsonl"
    assert (
        invoke("synth", "calendar", "--n", "4", "--hidden", "2", "--hidden-mode", "update", "--out", problems)[0] == 0
    )
    b = bench("calendar", path=str(problems))
    fam = get_family("calendar")
    script = tmp_path / "s.json"
    late = [{"after": 5, "add": {"constraints": [{"kind": "deadline", "day": "Monday", "time": 540}]}}]
    (command,) = b.commands()
    assert run_command(command, "--problems", problems, "--out", script, "--updates", json.dumps(late))[0] == 0
    replies = json.loads(script.read_text())
    for p in b.load("generated"):
        mine = replies[p.id]
        first = b.parse(mine[0], p)
        assert fam.z3_valid(p.constraints, first)  # the plan for what was told at first
        whole = b.parse(mine[-2], p)
        assert fam.z3_valid(b.intent(p), whole)  # the plan once every held-back requirement is in force
        assert mine[-1].startswith("ABSTAIN: No plan can meet all of these requirements at once")
        assert "must end by 9:00 on Monday" in mine[-1] or "has to be over by Monday 9:00" in mine[-1]
        assert len(mine) >= 3
    with pytest.raises(ModuloError):  # raised for the modulo CLI to print (exit 2)
        run_command(command, "--problems", tmp_path / "none.jsonl", "--out", script)


def test_an_update_may_replace_the_query_and_the_context() -> None:
    b = bench("calendar", n=1, seed=3)
    p = b.load("generated")[0]
    q = b.apply_update(p, ProblemUpdate(query="Plan the meeting.", context="All times are local.", text="Note."))
    assert q.query == "Plan the meeting.\n\nUpdate: Note." and q.context == "All times are local."
    assert q.constraints == p.constraints and q.solvable is True
