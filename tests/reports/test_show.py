"""``modulo show``: the story of one problem (flips, backprompt text, plan diffs, usage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modulo.reports import build_story, load_run, render_plain
from tests.cli_support import modulo


def _story(tmp_path: Path, make_run: Any, plans: Any, pid: str) -> str:
    run = load_run(make_run(tmp_path / "a", plans))
    run.name = "a"
    return render_plain(build_story(run, pid))


def test_story_of_a_certified_problem(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    text = _story(tmp_path, make_run, run_a_plans, "p0")
    assert "outcome: certified after 2 iteration(s) (stop reason: all_passed)" in text
    assert "=== Iteration 0 ===" in text and "=== Iteration 1 ===" in text
    # iteration 0: c_even fails; its feedback and the backprompt it produced, in full
    assert "failing: c_even" in text
    assert "- c_even: x=1 is odd" in text
    assert (
        "--- backprompt built from these verdicts (sent at iteration 1) ---\nYour plan has problems:\n- x=1 is odd\n"
        in (text)
    )
    # iteration 1: the flip and the diff against iteration 0
    assert "flips since iteration 0: c_even: FAIL -> pass" in text
    assert '--- iteration 0\n+++ iteration 1\n@@ -1,3 +1,3 @@\n {\n-  "x": 1\n+  "x": 2\n }' in text
    assert "critics accepting: 4/4 (certified)" in text
    assert "usage: 2 call(s) (1 cache hit(s), 0 failed), 100 tokens in, 20 out, $0.0100" in text
    assert "no price known" not in text


def test_story_of_a_run_whose_model_has_no_price_says_the_dollars_are_a_lower_bound(
    tmp_path: Path, make_run: Any, run_a_plans: Any
) -> None:
    import json

    run_dir = make_run(tmp_path / "a", run_a_plans)
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "unpriced_models": ["mystery-model-xyz"]}))
    text = render_plain(build_story(load_run(run_dir), "p0"))
    assert "cost: at least the dollars above: no price known for mystery-model-xyz" in text


def test_story_flips_in_both_directions_and_repeats(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    text = _story(tmp_path, make_run, run_a_plans, "p3")
    it1 = text.split("=== Iteration 1 ===")[1].split("=== Iteration 2 ===")[0]
    assert "flips since iteration 0: c_even: pass -> FAIL" in it1
    assert '-  "x": 12\n+  "x": 11' in it1
    it2 = text.split("=== Iteration 2 ===")[1].split("=== Iteration 3 ===")[0]
    assert "c_even: FAIL -> pass" in it2
    assert "(same plan as iteration 0)" in it2
    it3 = text.split("=== Iteration 3 ===")[1]
    assert "flips since iteration 2: no critic changed state" in it3
    assert "plan diff: identical to the plan of iteration 2" in it3
    it0 = text.split("=== Iteration 0 ===")[1].split("=== Iteration 1 ===")[0]
    assert "best plan so far" in it0 and "best plan so far" not in it3  # ties go to the earliest plan
    assert "not sent: the loop stopped here" in it3


def test_story_without_a_plan_shows_gated_critics(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    text = _story(tmp_path, make_run, run_a_plans, "p2")
    assert "outcome: failed" in text
    assert "no plan: no JSON found" in text
    assert "format=FAIL  c_nonneg=gated  c_even=gated  h_max=gated" in text
    assert "plan diff" not in text


def test_modulo_show_plain_and_errors(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    path = make_run(tmp_path / "a", run_a_plans)
    shown = modulo("show", path, "p4", "--plain", "--prompts", "--replies")
    assert shown.exit_code == 0
    out = shown.stdout
    assert "Problem p4" in out and "[user]\nsolve p4 (attempt 0)" in out and '{"x": 4}' in out
    wrong = modulo("show", path, "p44", "--plain")
    assert wrong.exit_code == 2
    assert "no problem 'p44'" in wrong.stderr and "Did you mean p4" in wrong.stderr
    missing = modulo("show", tmp_path / "missing", "p4")
    assert missing.exit_code == 2 and f"{tmp_path / 'missing'}: no such file or directory" in missing.stderr


def test_show_of_a_problem_whose_record_line_is_unreadable_says_so(
    tmp_path: Path, make_run: Any, run_a_plans: Any
) -> None:
    path = make_run(tmp_path / "a", run_a_plans)
    records = path / "records.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    assert lines[0].startswith('{"problem_id":"p0"')
    lines[0] = '{"problem_id": "p0", garbage\n'
    records.write_text("".join(lines))
    shown = modulo("show", path, "p0", "--plain")
    assert shown.exit_code == 2
    # not only "has not finished", and no did-you-mean naming the very id asked for
    assert "its record is on a line that could not be read" in shown.stderr and "unreadable line 1" in shown.stderr
    assert "Did you mean p0" not in shown.stderr


def test_show_rich_renders(tmp_path: Path, make_run: Any, run_a_plans: Any, capsys: Any) -> None:
    from modulo.reports import render_rich

    run = load_run(make_run(tmp_path / "a", run_a_plans))
    render_rich(build_story(run, "p0"), width=100)
    out = capsys.readouterr().out
    assert "Iteration 1" in out and "c_even: FAIL -> pass" in out and "Your plan has problems" in out
