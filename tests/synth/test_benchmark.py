"""The benchmark surface: evaluation, feedback, variants for dissection, files, CLI, registration."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import z3

from critics.synth.cli import write_set
from critics.synth.common import as_z3, canonical_set, new_solver, rng_for
from critics.synth.critics import CRITICS, entry_point_lines
from critics.synth.families import get_family
from critics.synth.family import Mutant
from modulo import components
from modulo.benchmark import FinalPlan
from modulo.critic import Critic
from modulo.errors import ConfigError, DataError, ModuloError, PlanFormatError
from modulo.types import Abstention, Problem
from tests.cli_support import invoke

from .conftest import FAMILIES, bench

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("family", FAMILIES)
def test_evaluate_scores_solved_abstention_and_wrongful_abstention(family: str) -> None:
    b = bench(family, n=12, seed=4, unsolvable_fraction=0.4)
    problems = b.load("generated")
    solvable = [p for p in problems if p.metadata["solvable"]]
    assert solvable and len(solvable) < len(problems)
    # the witness where there is one, a decline (confirmed by the benchmark's check) where there is none
    confirmed = Abstention(reason="the constraints clash", iteration=0, verified=True)
    perfect = [
        FinalPlan(p, p.metadata["witness"], abstention=None if p.metadata["solvable"] else confirmed) for p in problems
    ]
    res = b.evaluate_final(perfect)
    assert res.metrics["success"] == 1.0 and res.metrics["solved"] == 1.0
    assert res.metrics["abstention_recall"] == 1.0 and res.metrics["wrongful_abstention"] == 0.0
    assert res.metrics["critic_z3_disagreements"] == 0.0
    assert [r["problem_id"] for r in res.per_problem] == [p.id for p in problems]
    assert {r["critic"] for r in res.tables["per_critic"]} <= set(get_family(family).critic_kinds)

    lazy = b.evaluate_final([FinalPlan(p, None, abstention=confirmed) for p in problems])
    assert lazy.metrics["wrongful_abstention"] == 1.0 and lazy.metrics["solved"] == 0.0
    assert lazy.metrics["abstention_recall"] == 1.0 and lazy.metrics["delivery"] == 0.0
    # a decline whose reason the benchmark refuted is still a decline, never a success
    refuted = Abstention(reason="it is too hard", iteration=0, verified=False)
    wrong = b.evaluate_final([FinalPlan(p, None, abstention=refuted) for p in problems])
    assert wrong.metrics["abstention_recall"] == 1.0 and wrong.metrics["success"] == 0.0
    # no plan and no decline (nothing could be read): a failure, not an abstention, whichever path scores it
    for unread in (
        b.evaluate(problems, [None] * len(problems)),
        b.evaluate_final([FinalPlan(p, None) for p in problems]),
    ):
        assert unread.metrics["success"] == 0.0 and unread.metrics["delivery"] == 0.0
        assert unread.metrics["abstention_recall"] == 0.0 and unread.metrics["wrongful_abstention"] == 0.0

    fam = get_family(family)
    broken = []
    for p in problems:
        w = p.metadata["witness"]
        if w is None:
            # a plan for an unsolvable problem: answered, so not an abstention, and never "passed"
            w = next(q.metadata["witness"] for q in solvable)
        else:
            w = next(m.plan for m in fam.mutants(rng_for("t", p.id), p.constraints, w) if m.kind == "boundary_out")
        broken.append(w)
    bad = b.evaluate(problems, broken)
    assert bad.metrics["success"] == 0.0 and bad.metrics["abstention_recall"] == 0.0
    assert bad.metrics["critic_z3_disagreements"] == 0.0

    # each rate has its own part per problem (None where it does not count), so reports give k/n and a CI
    for r, p in zip(res.per_problem, problems, strict=True):
        solv = p.metadata["solvable"]
        assert (r["solved"] is None) == (not solv) and (r["abstention_recall"] is None) == solv
    kept = [r["solved"] for r in res.per_problem if r["solved"] is not None]
    assert sum(kept) / len(kept) == res.metrics["solved"]
    # the declared constraints are the format check and the family's critics, not solvable/abstained
    declared = [row["constraint"] for row in bad.tables["per_constraint"]]
    assert declared == ["format", *get_family(family).critic_kinds]


def test_evaluate_rejects_misaligned_input_and_unreadable_plans() -> None:
    b = bench("tasks", n=2)
    problems = b.load("generated")
    with pytest.raises(ConfigError):
        b.evaluate(problems, [None])
    res = b.evaluate(problems, [{"schedule": [{"task": "x", "start": "nine", "end": "10:00"}]}, "not a plan"])
    assert res.metrics["success"] == 0.0
    assert all(r["format"] is False and not r["passed"] for r in res.per_problem)
    # raw answers are read with the parser
    texts = [b.render_plan(p.metadata["witness"]) for p in problems]
    assert b.evaluate(problems, texts).metrics["success"] == 1.0


@pytest.mark.parametrize("family", FAMILIES)
def test_feedback_quotes_the_query_and_the_offending_part_of_the_plan(
    family: str, critics_by_family: dict[str, dict[str, Critic]]
) -> None:
    checked = 0
    for p, m, truths in well_formed_mutants(family, "fb", n=6, seed=8):
        if m.kind != "boundary_out":
            continue
        target = next(c for c in p.constraints["constraints"] if c["id"] == m.target)
        crit = critics_by_family[family][get_family(family).critic_for_kind(target["kind"])]
        verdict = crit(p, m.plan)
        assert verdict == crit(p, m.plan)  # deterministic
        if truths[target["id"]]:
            continue
        assert not verdict.passed
        assert target["id"] in verdict.details["violated"]
        assert target["text"].lower() in verdict.feedback.lower()
        assert target["text"][:12].lower() in p.query.lower()
        # no satisfied constraint is named
        assert all(not truths[cid] for cid in verdict.details["violated"])
        checked += 1
    assert checked >= 6


@pytest.mark.parametrize("family", FAMILIES)
def test_variants_keep_the_constraint_set_and_the_witness(
    family: str, critics_by_family: dict[str, dict[str, Critic]]
) -> None:
    b = bench(family, n=5, seed=13, difficulty="medium")
    fam = get_family(family)
    critics = critics_by_family[family]
    for p in b.load("generated"):
        reworded = b.variant(p, wording_seed=99)
        assert canonical_set(reworded.constraints["constraints"]) == canonical_set(p.constraints["constraints"])
        assert canonical_set(fam.parse_query(reworded.query)["constraints"]) == canonical_set(
            reworded.constraints["constraints"]
        )
        other_topic = next(t for t in fam.topics if t != p.constraints["topic"])
        skinned = b.variant(p, topic=other_topic)
        assert skinned.constraints["topic"] == other_topic and skinned.query != p.query
        restructured = b.variant(p, restructure_seed=1)
        assert _equivalent(fam, p.constraints, restructured.constraints)
        for v in (reworded, skinned, restructured):
            w = v.metadata["witness"]
            assert fam.z3_valid(v.constraints, w), v.id
            assert all(c(v, w).accepts for c in critics.values()), v.id
            assert v.metadata["variant_of"] == p.id and v.id != p.id
    assert any(b.variant(p, wording_seed=1).query != b.variant(p, wording_seed=2).query for p in b.load("generated"))


def well_formed_mutants(
    family: str, label: str, *, n: int, seed: int
) -> Iterator[tuple[Problem, Mutant, dict[str, bool]]]:
    """Each mutant of each generated (medium) problem that passes the format check, with Z3's truth value of
    every constraint on it; ``label`` seeds the mutations."""
    b = bench(family, n=n, seed=seed, difficulty="medium")
    fam = get_family(family)
    for p in b.load("generated"):
        for m in fam.mutants(rng_for(label, p.id), p.constraints, p.metadata["witness"]):
            if fam.check_format(p.constraints, m.plan):
                continue
            truths = fam.z3_truths(p.constraints, m.plan)
            assert truths is not None
            yield p, m, truths


def _equivalent(fam: object, a: dict, b: dict) -> bool:
    """Same plans satisfy both constraint sets: A and not B, and B and not A, are both UNSAT."""
    from critics.synth.family import Family

    assert isinstance(fam, Family)
    rows, domain = fam.symbolic_rows(a)
    fa = [as_z3(fam.encode(c, a, rows)) for c in a["constraints"]]
    fb = [as_z3(fam.encode(c, b, rows)) for c in b["constraints"]]
    for left, right in ((fa, fb), (fb, fa)):
        s = new_solver()
        for f in domain:
            s.add(as_z3(f))
        s.add(*left)
        s.add(z3.Not(z3.And(*right)))
        if s.check() != z3.unsat:
            return False
    return True


def test_restructure_really_rewrites_tasks_windows() -> None:
    b = bench("tasks", n=20, seed=5, difficulty="medium")
    changed = 0
    for p in b.load("generated"):
        r = b.variant(p, restructure_seed=3)
        changed += canonical_set(r.constraints["constraints"]) != canonical_set(p.constraints["constraints"])
    assert changed >= 5


def test_write_and_read_a_fixed_set(tmp_path: Path) -> None:
    path = tmp_path / "cal.jsonl"
    code, out = invoke("synth", "calendar", "--n", "4", "--seed", "3", "--out", path, "--unsolvable-fraction", "0.5")
    assert code == 0 and "wrote 4 synth/calendar problems" in out
    from_file = bench("calendar", path=str(path)).load("generated")
    fresh = bench("calendar", n=4, seed=3, unsolvable_fraction=0.5).load("generated")
    assert [p.model_dump() for p in from_file] == [p.model_dump() for p in fresh]
    with pytest.raises(DataError, match="belongs to"):
        bench("trip", path=str(path)).load("generated")
    with pytest.raises(DataError, match="does not exist"):
        bench("trip", path=str(tmp_path / "none.jsonl")).load("generated")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(DataError, match=r"bad\.jsonl:1"):
        bench("trip", path=str(tmp_path / "bad.jsonl")).load("generated")


def test_cli_knobs_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    code, out = invoke("synth", "synth/tasks", "--n", "2", "--out", path, "--arg", "n_actions=5")
    assert code == 0, out
    assert all(len(p.constraints["actions"]) == 5 for p in bench("tasks", path=str(path)).load("generated"))
    # bad input is printed by the modulo CLI the one way (exit 2)
    for args, says in (
        (["tasks", "--n", "2", "--out", path, "--knob", "n_acts=5"], "did you mean 'n_actions'"),
        (["boats", "--out", path], "unknown benchmark 'boats'"),
        (["trip", "--n", "1", "--out", path, "--knob", "n_cities=40"], "n_cities"),
        (["trip"], "Missing option '--out'"),
    ):
        code, out = invoke("synth", *args)
        assert code == 2 and out.startswith("error: ") and says in out, out
    with pytest.raises(ModuloError, match="unknown family 'boats'"):
        write_set("boats", path, {})


def test_bad_settings_fail_with_clear_errors() -> None:
    with pytest.raises(ConfigError, match="difficulty"):
        bench("tasks", difficulty="insane")
    with pytest.raises(ConfigError, match="topic"):
        bench("trip", topic="moon")
    with pytest.raises(ConfigError, match="unsolvable_fraction"):
        bench("calendar", unsolvable_fraction=2)
    with pytest.raises(ConfigError, match="kinds"):
        bench("tasks", kinds=["teleport"])
    with pytest.raises(ConfigError, match="split"):
        bench("tasks", n=1).load("test")


def test_parsers_read_free_text_and_reject_empty_answers() -> None:
    b = bench("calendar", n=1)
    p = b.load("generated")[0]
    assert b.parse("Thinking...\nHere is the proposed time: monday, 9:30 AM - 10:30 AM", p) == {
        "day": "Monday",
        "start": "9:30",
        "end": "10:30",
    }
    for text in ("", "I don't know"):
        with pytest.raises(PlanFormatError):
            b.parse(text, p)
    t = bench("tasks", n=1)
    tp = t.load("generated")[0]
    names = tp.constraints["actions"]
    reply = "Let me think: 9:00-10:00 is early.\nSCHEDULE:\n" + "\n".join(
        f"- {8 + i}:00 to {9 + i}:00 {n.upper()}" for i, n in enumerate(names)
    )
    plan = t.parse(reply, tp)
    assert [x["task"] for x in plan["schedule"]] == names
    tr = bench("trip", n=1)
    trp = tr.load("generated")[0]
    w = trp.metadata["witness"]
    assert tr.parse("PLAN:\n" + tr.render_plan(w), trp) == w


def test_registration_and_entry_points_match() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = data["project"]["entry-points"]["modulo.critics"]
    for line in entry_point_lines():
        name, value = (x.strip().strip('"') for x in line.split("="))
        assert declared.get(name) == value
    benches = data["project"]["entry-points"]["modulo.benchmarks"]
    assert {k for k in benches if k.startswith("synth/")} == {"synth/tasks", "synth/calendar", "synth/trip"}
    for family in FAMILIES:
        b = components.benchmarks.get(f"synth/{family}")(n=0)
        assert b.critic_names()[0] == "format"
        for name in b.critic_names()[1:]:
            meta = components.critics.get(name)
            assert meta.benchmarks == (f"synth/{family}",) and meta.source == "derived" and meta.group == "hard"
    assert len(CRITICS) == 18


def test_critics_are_not_applicable_without_their_kind() -> None:
    b = bench("calendar", n=1)  # easy: no preferences, no deadline
    p = b.load("generated")[0]
    w = p.metadata["witness"]
    assert CRITICS["synth_deadline"]()(p, w).applicable is False
    assert CRITICS["synth_preference"]()(p, w).applicable is False
    foreign = Problem(id="x", benchmark="synth/calendar", query="", constraints=copy.deepcopy(p.constraints))
    assert CRITICS["synth_precedence"]()(foreign, w).applicable is False


@pytest.mark.parametrize("family", FAMILIES)
def test_failing_verdicts_name_exactly_the_violated_constraints(
    family: str, critics_by_family: dict[str, dict[str, Critic]]
) -> None:
    """On every mutant, each critic names every constraint of its kinds that Z3 finds violated, and no other."""
    fam = get_family(family)
    named = 0
    for p, m, truths in well_formed_mutants(family, "names", n=5, seed=17):
        for name, crit in critics_by_family[family].items():
            kinds = fam.critic_kinds[name]
            broken = {c["id"] for c in p.constraints["constraints"] if c["kind"] in kinds and not truths[c["id"]]}
            v = crit(p, m.plan)
            assert set(v.details.get("violated", [])) == broken, (p.id, m.kind, name, v.feedback)
            named += len(broken)
    assert named > 20


@pytest.mark.parametrize("family", FAMILIES)
def test_format_checks_build_no_z3_values(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Format checks run on several threads at once (the critics, the unsolvability proofs of a run), and
    Z3 values built in Z3's shared default context from two threads at once crash the process: reading a
    plan's format, and proving a witnessed problem solvable, build none."""
    b = bench(family, n=4, seed=3)
    problems = b.load("generated")

    def no_z3(*args: object, **kwargs: object) -> None:
        raise AssertionError("a format check built a Z3 value")

    monkeypatch.setattr(z3, "IntVal", no_z3)
    for p in problems:
        assert b.check_format(p, p.metadata["witness"]) == []
        assert b.check_format(p, {"nothing": []}), "a plan that cannot be read is a format problem"
        assert b.prove_unsolvable(p) is None  # witnessed: no Z3 asked


def test_a_plan_z3_confirms_proves_solvability_without_asking_z3_about_the_witness(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    b = bench("calendar", n=6, seed=3, unsolvable_fraction=0.0)
    problems = b.load("generated")
    witnesses = [p.metadata["witness"] for p in problems]
    wrong = [{"day": "Sunday", "start": "3:00", "end": "3:07"}] * len(problems)
    asked: list[object] = []
    original = b.family.z3_valid

    def counting(spec: object, plan: object) -> bool:
        asked.append(plan)
        return original(spec, plan)  # type: ignore[arg-type]

    monkeypatch.setattr(b.family, "z3_valid", counting)
    good = b.evaluate(problems, witnesses)
    assert len(asked) == len(problems)  # one Z3 call per plan: the plan proved the problem solvable
    assert all(r["solvable"] and r["passed"] and r["z3_valid"] for r in good.per_problem)
    asked.clear()
    bad = b.evaluate(problems, wrong)
    assert len(asked) == 2 * len(problems)  # a rejected plan proves nothing: the witness is confirmed
    assert all(r["solvable"] and not r["passed"] for r in bad.per_problem)
    # the rows keep their fields in the same order either way
    assert [list(r) for r in good.per_problem] == [list(r) for r in bad.per_problem]
