"""Pieces of the extraction that run without a model or a sandbox: the split, the parsing of replies,
the verdicts of check(), the gate's decision, untrusted critics, option checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from modulo.benchmark import GateCase
from modulo.binding import bind_benchmark
from modulo.critic import critic
from modulo.errors import ConfigError, CriticError
from modulo.extract.gate import Confusion, GateSettings, PartResult, split_cases
from modulo.extract.loop import select_constraints
from modulo.extract.prompt import code_of
from modulo.extract.run import prepare_out
from modulo.extract.runtime import as_verdict, extracted_critic
from modulo.sandbox import sandboxed_names
from modulo.types import Problem, Verdict


def _cases(n_problems: int, per: int = 4) -> list[GateCase]:
    out = []
    for i in range(n_problems):
        p = Problem(id=f"p{i}", benchmark="synth/calendar", query="q")
        for j in range(per):
            out.append(GateCase(problem=p, plan={"j": j}, valid=(j % 2 == 0) or i % 3 == 0))
    return out


def test_the_split_keeps_whole_problems_on_one_side_and_gives_each_side_invalid_plans() -> None:
    cases = _cases(12)
    train, held = split_cases(cases, 0.3, seed=0)
    train_ids, held_ids = {c.problem.id for c in train}, {c.problem.id for c in held}
    assert train_ids and held_ids and not train_ids & held_ids and len(train) + len(held) == len(cases)
    assert any(not c.valid for c in train) and any(not c.valid for c in held)
    assert split_cases(list(reversed(cases)), 0.3, seed=0)[1] == [c for c in reversed(cases) if c in held]


def test_a_gate_set_of_one_problem_cannot_be_split() -> None:
    with pytest.raises(ConfigError, match="at least 2"):
        split_cases(_cases(1), 0.3, seed=0)


def test_the_gate_admits_only_zero_false_rejections_and_enough_recall() -> None:
    part = PartResult(part="training", cases=4, confusion=Confusion(valid=2, false_rejects=0, invalid=2, caught=2))
    assert part.passes(1.0) == (True, "")
    part.confusion.false_rejects = 1
    assert part.passes(0.0)[0] is False and "rejected 1 of 2 valid plans" in part.passes(0.0)[1]
    part.confusion = Confusion(valid=2, invalid=4, caught=3)
    assert part.passes(1.0)[0] is False and "recall 0.750 < 1" in part.passes(1.0)[1]
    assert part.passes(0.75) == (True, "")
    part.confusion = Confusion(valid=2)
    assert "no invalid plan" in part.passes(0.5)[1]
    # a part without a valid plan (travelplanner budget, --problems 2: the held-out family's plans all break
    # it) cannot show that a critic rejects no valid plan: a critic rejecting everything would pass it
    part.confusion = Confusion(valid=0, invalid=3, caught=3)
    assert part.passes(1.0) == (False, "training: no valid plan to measure false rejections on")
    part.confusion = Confusion(valid=2, invalid=2, caught=2)
    part.error = {"error": "MemoryError: ", "plan": {}}
    assert "failed on a plan: MemoryError" in part.passes(0.0)[1]


def test_a_reply_is_parsed_never_run() -> None:
    code, why = code_of("Sure.\n```python\ndef check(problem, plan):\n    return True, ''\n```\nDone.")
    assert why is None and code.startswith("def check")
    assert "does not parse" in str(code_of("```python\ndef check(problem, plan)\n```")[1])
    assert "defines no top-level function check" in str(code_of("```python\ndef other(a, b): pass\n```")[1])
    assert "two arguments" in str(code_of("```python\ndef check(plan): pass\n```")[1])
    # a module-level side effect is only parsed here: nothing is executed
    assert code_of("```python\nraise SystemExit(3)\ndef check(problem, plan):\n    return True\n```")[1] is None


def test_check_results_become_verdicts_or_errors() -> None:
    assert as_verdict((True, ""), "d").passed
    failed = as_verdict((False, ""), "the meeting ends in time")
    assert not failed.passed and "the meeting ends in time" in failed.feedback
    assert as_verdict(False, "d").feedback
    for bad in ("yes", None, (1, ""), (True, 3), [True, ""]):
        with pytest.raises(TypeError):
            as_verdict(bad, "d")


def test_an_extracted_critic_is_untrusted_llm_extracted_and_refuses_to_run_in_process(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = tmp_path / "check.py"
    code.write_text(f"open({str(marker)!r}, 'w').write('x')\ndef check(problem, plan):\n    return True, ''\n")
    factory = extracted_critic("t/x", constraint="synth_busy", benchmark="synth/calendar", description="d", code=code)
    assert factory.untrusted and factory.source == "llm-extracted"
    assert factory.provenance["constraint"] == "synth_busy"
    bound = factory(benchmark=bind_benchmark("synth/calendar"))
    with pytest.raises(CriticError, match="runs only in the modulo sandbox"):
        bound(Problem(id="p", benchmark="synth/calendar", query="q"), {})
    assert not marker.exists()  # the model's code was never loaded in this process


def test_untrusted_critics_are_sandboxed_whatever_the_setting() -> None:
    @critic("t/trusted")
    def trusted(problem: Problem, plan: object) -> Verdict:
        return Verdict.ok()

    @critic("t/untrusted", untrusted=True)
    def untrusted(problem: Problem, plan: object) -> Verdict:
        return Verdict.ok()

    critics = [trusted(), untrusted()]
    assert sandboxed_names(None, critics) == ["t/untrusted"]
    assert sandboxed_names("none", critics) == ["t/untrusted"]
    assert sandboxed_names(["t/trusted"], critics) == ["t/trusted", "t/untrusted"]


def test_constraints_are_named_by_the_benchmark() -> None:
    bench = bind_benchmark("synth/calendar")
    assert [c.name for c in select_constraints(bench, [])][:2] == ["synth_meeting_duration", "synth_work_hours"]
    with pytest.raises(ConfigError, match="Did you mean 'synth_busy'"):
        select_constraints(bench, ["synth_bsy"])
    with pytest.raises(ConfigError, match="offers no constraints"):
        select_constraints(bind_benchmark("travelbench/single_turn"), [])


def test_the_critic_view_of_a_synthesized_problem_holds_no_witness() -> None:
    bench = bind_benchmark("synth/calendar")
    problem = bench.generate(1)[0]
    view = bench.critic_view(problem)
    assert problem.metadata["witness"] and "witness" not in repr(view) and set(view) == {"query", "constraints"}


def test_gate_settings_and_the_output_folder_are_checked(tmp_path: Path) -> None:
    for bad in ({"min_recall": 1.5}, {"held_out": 0.0}, {"problems": 1}, {"attempts": 0}, {"timeout_s": 0}):
        with pytest.raises(ConfigError):
            GateSettings(**bad)  # type: ignore[arg-type]
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not empty"):
        prepare_out(tmp_path, force=False)
    with pytest.raises(ConfigError, match="holds no earlier extraction"):
        prepare_out(tmp_path, force=True)
    assert (tmp_path / "mine.txt").exists()


# Candidates that would pass the gate with no logic of their own: the built-in critic imported, the caller's
# full problem (its witness) read from the stack, the benchmark's files read, a module's own `sys` taken.
ESCAPES = {
    "import modulo": "from modulo.binding import bind_critics\ndef check(problem, plan):\n    return True, ''\n",
    "import sys": "import sys\ndef check(problem, plan):\n    return True, ''\n",
    "stack": "def check(problem, plan):\n    try:\n        raise ValueError\n    except ValueError as e:\n"
    "        f = getattr(e, '__trace' + 'back__')\n    return True, ''\n",
    "private": "import collections\ndef check(problem, plan):\n    return getattr(collections, '_sys') is None, ''\n",
    "module attribute": "import json\ndef check(problem, plan):\n    return json.decoder is None, ''\n",
    "attrgetter": "import operator\ndef check(problem, plan):\n    return operator.attrgetter('x') is None, ''\n",
    "open": "def check(problem, plan):\n    return bool(open('/etc/hostname').read()), ''\n",
    "eval": "def check(problem, plan):\n    return eval('1') == 1, ''\n",
}


@pytest.mark.parametrize("name", list(ESCAPES))
def test_a_candidates_code_reaches_nothing_but_its_arguments_and_pure_modules(name: str, tmp_path: Path) -> None:
    from modulo.extract.runtime import load_check

    path = tmp_path / "check.py"
    path.write_text(ESCAPES[name])
    with pytest.raises((PermissionError, NameError)):
        load_check(path)({"constraints": {}}, {})


@pytest.mark.parametrize(
    "code",
    [
        "def check(problem, plan):\n    import sys\n    return sys._getframe(1).f_back is None, ''\n",
        "def check(problem, plan):\n    return plan.__class__ is dict, ''\n",
        "def check(problem, plan):\n    return bool(__loader__), ''\n",
    ],
)
def test_frame_and_dunder_attributes_make_a_reply_unusable_before_it_runs(code: str) -> None:
    why = code_of(f"```python\n{code}```")[1]
    assert why is not None and "refused in the modulo sandbox" in why


def test_a_candidate_may_use_the_pure_modules(tmp_path: Path) -> None:
    from modulo.extract.runtime import load_check

    path = tmp_path / "check.py"
    path.write_text(
        "import re, math\nimport collections.abc\nfrom collections import Counter\nfrom datetime import time\n"
        "def check(problem, plan):\n    ok = isinstance(problem, collections.abc.Mapping) and math.floor(1.5) == 1\n"
        "    ok = ok and Counter('aab')['a'] == 2 and re.match(r'\\d', '1') and time(9).hour == 9\n"
        "    return bool(ok and getattr(plan, 'get')('x') == 1), ''\n"
    )
    assert load_check(path)({}, {"x": 1}) == (True, "")


def test_the_gate_report_counts_the_problems_of_the_gate_set_not_the_setting() -> None:
    from modulo.benchmark import ConstraintInfo
    from modulo.extract.loop import ConstraintResult
    from modulo.extract.report import render_gate

    result = ConstraintResult(
        benchmark="synth/calendar",
        info=ConstraintInfo(name="synth_deadline", description="d"),
        critic="extracted/synth_deadline",
        settings=GateSettings(problems=12),
        backend="scripted",
        model="scripted",
        gate_set={
            "cases": 800,
            "training": {"problems": 10, "plans": 521, "valid": 285, "invalid": 236},
            "held_out": {"problems": 5, "plans": 279, "valid": 204, "invalid": 75},
        },
    )
    text = render_gate(result)
    assert "800 plans of 15 problems" in text and "of 12 problems" not in text


def test_a_generated_critic_whose_code_was_edited_after_the_gate_refuses_to_load(tmp_path: Path) -> None:
    import importlib.util

    from modulo.benchmark import ConstraintInfo
    from modulo.extract.loop import Attempt, ConstraintResult
    from modulo.extract.package import write_package
    from modulo.extract.runtime import load_check

    code = "def check(problem, plan):\n    return plan.get('day') != 'Sunday', 'on Sunday'\n"
    part = PartResult(part="training", cases=2, confusion=Confusion(valid=1, invalid=1, caught=1))
    result = ConstraintResult(
        benchmark="synth/calendar",
        info=ConstraintInfo(name="synth_day", description="d"),
        critic="edited/synth_day",
        settings=GateSettings(),
        backend="scripted",
        model="scripted",
        attempts=[Attempt(number=1, call={}, code=code, training=part, held_out=part, admitted=True)],
        admitted=True,
        code=code,
    )
    out = write_package(tmp_path / "pkg", "synth/calendar", "edited", [result])
    module_dir = next(p for p in out.iterdir() if p.is_dir())
    spec = importlib.util.spec_from_file_location("edited_pkg_extracted", module_dir / "extracted.py")
    assert spec is not None and spec.loader is not None
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    sha256 = generated.synth_day.provenance["code_sha256"]
    code_file = module_dir / "code" / "synth_day.py"
    code_file.write_text(code.replace("!= 'Sunday'", "is not None"))  # "fixed" by hand: no longer what was gated
    with pytest.raises(PermissionError, match="not the code the extraction gate admitted"):
        load_check(code_file, sha256)


@pytest.mark.parametrize(
    ("task", "constraint", "problems", "seed", "parts"),
    [
        ("calendar", "calendar_preferences", 4, 3, {"against_before_preference", "against_after_preference",
                                                    "against_day_preference"}),
        ("meeting", "meeting_window", 3, 4, {"meeting_before_window", "meeting_past_window"}),
    ],
)  # fmt: skip
def test_a_natural_plan_gate_set_breaks_every_part_of_its_constraint(
    task: str, constraint: str, problems: int, seed: int, parts: set[str]
) -> None:
    # these first problems had no plan breaking an 'after' preference (the other: a window's start): a critic
    # that ignored that part would have been admitted
    from tests.data_support import data_root

    data_root("NATURAL PLAN", "natural_plan")
    cases = bind_benchmark(f"natural_plan/{task}").gate_cases(constraint, problems=problems, seed=seed)
    assert parts <= {c.origin for c in cases if not c.valid}
