"""``modulo dissect``: PDoctor's cascade labels each failure by the first change that makes it go away."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from modulo import components
from modulo.build import build_session
from modulo.cli.hydra_app import config_yaml
from modulo.cli.main import cli
from modulo.dissect import (
    DISSECT_JSONL,
    DISSECT_MD,
    DISSECT_RECORDS,
    DissectOptions,
    dissect_run,
    plan_variants,
    read_dissections,
)
from modulo.errors import ConfigError, PermanentLLMError, RunError
from modulo.llm.base import LLMRequest
from modulo.runner import run_session
from modulo.runs import RunDir, read_records
from modulo.types import Outcome

from .conftest import GARBAGE, NoVariantCalendar, Planner, calendar, config, make_run

ALL = ["probability", "wording", "topic", "structure", "never", "always"]


def _run(tmp_path: Path, policies: list[str], garbage: tuple[int, ...] = ()) -> tuple[Path, Planner, object]:
    planner = Planner(calendar(), policies, garbage=garbage)
    cfg = config()
    cfg.llm.args = {"fn": planner.fn}
    make_run(tmp_path / "run", cfg)
    return tmp_path / "run", planner, cfg


def test_each_label_comes_from_the_first_step_that_certifies(tmp_path: Path) -> None:
    run_dir, planner, cfg = _run(tmp_path, ALL, garbage=(4,))
    ids = [p.id for p in planner.problems]
    outcomes = {r.problem_id: r.outcome for r in read_records(run_dir)}
    assert outcomes[ids[5]] is Outcome.CERTIFIED and all(outcomes[i] is not Outcome.CERTIFIED for i in ids[:5])
    before = len(planner.requests)

    result = asyncio.run(dissect_run(run_dir, DissectOptions(temperature=0.7), config=cfg))  # type: ignore[arg-type]
    by_id = {d.problem_id: d for d in result.dissections}
    assert set(by_id) == set(ids[:5])  # the certified problem is not dissected
    labels = {pid: by_id[pid].label for pid in ids[:5]}
    assert labels == dict(zip(ids, ["probability", "wording", "topic", "structure", "constraint"], strict=False))

    # probability: fresh sample indices 1, 2 (certified at 2, so no third re-run and no variant)
    p0 = by_id[ids[0]]
    assert [(s.step, s.sample_index, s.outcome.value) for s in p0.steps] == [
        ("probability", 1, "exhausted"),
        ("probability", 2, "certified"),
    ]
    # the cascade stops at the first certified step; variants keep the run's sample index
    p3 = by_id[ids[3]]
    assert [s.step for s in p3.steps] == ["probability"] * 3 + ["wording", "topic", "structure"]
    assert [s.sample_index for s in p3.steps] == [1, 2, 3, 0, 0, 0]
    assert p3.steps[3].variant == {"wording_seed": 1} and "topic" in p3.steps[4].variant
    assert p3.steps[5].variant == {"restructure_seed": 1} and p3.steps[5].problem_id == ids[3] + "~r1"
    assert [s.certified for s in p3.steps] == [False] * 5 + [True]

    # components: a plan that breaks a constraint is `plan`; garbage text is `format`
    assert by_id[ids[4]].component == "format" and by_id[ids[4]].failing == ["format"]
    assert by_id[ids[4]].outcome is Outcome.FAILED
    assert all(by_id[i].component == "plan" for i in ids[:4])
    assert by_id[ids[0]].failing and "format" not in by_id[ids[0]].failing

    # every dissection request went out at the requested temperature, re-runs with fresh sample indices
    new = planner.requests[before:]
    assert new and {r.temperature for r in new} == {0.7}
    assert {r.sample_index for r in new if "~" not in r.tags["problem_id"]} == {1, 2, 3}
    assert all(r.sample_index == 0 for r in new if "~" in r.tags["problem_id"])

    # the outputs: one line per problem, one full record per step, the table
    lines = (run_dir / DISSECT_JSONL).read_text().splitlines()
    assert len(lines) == 5
    steps = [json.loads(line) for line in (run_dir / DISSECT_RECORDS).read_text().splitlines()]
    assert len(steps) == sum(len(d.steps) for d in result.dissections) == 2 + 4 + 5 + 6 + 6
    assert Counter(s["metadata"]["dissect_step"] for s in steps)["probability"] == 2 + 3 * 4
    assert all(s["iterations"] for s in steps)  # full traces, auditable with the usual tools
    md = (run_dir / DISSECT_MD).read_text()
    assert "| probability | 1 | 20% |" in md and "| constraint | 1 | 20% |" in md
    assert f"| {ids[1]} | exhausted/2 | plan |" in md and "**wording**" in md
    assert "temperature: run 0.0, dissection 0.7" in md
    # usage is accounted per step and summed
    total = sum(d.usage.cost_usd for d in result.dissections)
    assert total > 0 and result.summary["usage"]["cost_usd"] == pytest.approx(total)
    assert by_id[ids[0]].usage.calls == sum(s.usage.calls for s in p0.steps) == 3


def test_a_benchmark_without_variants_gets_probability_or_persistent(tmp_path: Path) -> None:
    components.benchmarks.register("test/novariant", NoVariantCalendar, replace=True)
    try:
        planner = Planner(NoVariantCalendar(n=6, seed=1), ["probability", "never", "always"])
        cfg = config("test/novariant", n=3)
        cfg.llm.args = {"fn": planner.fn}
        make_run(tmp_path / "run", cfg)
        result = asyncio.run(dissect_run(tmp_path / "run", config=cfg))
    finally:
        components.benchmarks.unregister("test/novariant")
    ids = [p.id for p in planner.problems]
    by_id = {d.problem_id: d for d in result.dissections}
    assert by_id[ids[0]].label == "probability"
    persistent = by_id[ids[1]]
    assert persistent.label == "persistent" and [s.step for s in persistent.steps] == ["probability"] * 3
    assert set(persistent.skipped) == {"wording", "topic", "structure"}
    assert "has no variants" in persistent.skipped["wording"]
    assert "has no variants**" in result.markdown and "`persistent`" in result.markdown
    assert "| persistent | 1 | 50% |" in result.markdown


def test_temperature_zero_is_reported_and_identical_redraws_counted(tmp_path: Path) -> None:
    run_dir, planner, cfg = _run(tmp_path, ["never", "always"])
    result = asyncio.run(dissect_run(run_dir, DissectOptions(repeats=2, ids=[planner.problems[0].id]), config=cfg))  # type: ignore[arg-type]
    (d,) = result.dissections
    assert d.label == "constraint"
    assert [s.same_first_reply for s in d.steps if s.step == "probability"] == [True, True]
    assert "**temperature 0**" in result.markdown and "2 of 2 re-runs repeated" in result.markdown
    assert result.failed_ids == [planner.problems[0].id]
    with pytest.raises(ConfigError, match="did not fail"):
        asyncio.run(dissect_run(run_dir, DissectOptions(ids=[planner.problems[1].id]), config=cfg))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not problems of"):
        asyncio.run(dissect_run(run_dir, DissectOptions(ids=["nope"]), config=cfg))  # type: ignore[arg-type]


def test_a_dollar_budget_that_could_never_stop_the_dissection_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-dollars with a model whose calls count as $0 (no price in the run's configuration) is refused
    before any call; a free model (this scripted one) takes it."""
    from modulo.build import Session

    run_dir, planner, cfg = _run(tmp_path, ["never"])
    n = len(planner.requests)
    monkeypatch.setattr(Session, "unknown_cost_models", lambda self: ["mystery-model-xyz"])
    with pytest.raises(ConfigError, match=r"--max-dollars is set.*'mystery-model-xyz'"):
        asyncio.run(dissect_run(run_dir, DissectOptions(max_dollars=1.0, repeats=1), config=cfg))  # type: ignore[arg-type]
    assert len(planner.requests) == n
    monkeypatch.undo()
    done = asyncio.run(dissect_run(run_dir, DissectOptions(max_dollars=1.0, repeats=1), config=cfg))  # type: ignore[arg-type]
    assert len(done.dissections) == 1 and len(planner.requests) > n


@pytest.mark.slow
def test_resume_skips_finished_problems_and_retries_incomplete_ones(tmp_path: Path) -> None:
    run_dir, planner, cfg = _run(tmp_path, ["wording", "never", "never"])
    ids = [p.id for p in planner.problems[:3]]

    broken = {"on": True}

    def flaky(request: LLMRequest) -> str:
        if broken["on"] and request.tags["problem_id"].startswith(ids[1]):
            raise PermanentLLMError("the provider refused")
        return planner(request)

    cfg.llm.args = {"fn": flaky}  # type: ignore[attr-defined]
    first = asyncio.run(dissect_run(run_dir, DissectOptions(limit=2), config=cfg))  # type: ignore[arg-type]
    assert [d.label for d in first.dissections] == ["wording", "incomplete"]
    assert "the provider refused" in (first.dissections[1].error or "")
    assert "incomplete: " in first.markdown

    broken["on"] = False
    n = len(planner.requests)
    again = asyncio.run(dissect_run(run_dir, DissectOptions(), config=cfg))  # type: ignore[arg-type]
    assert again.resumed == 1 and [d.label for d in again.dissections] == ["wording", "constraint", "constraint"]
    assert not any(r.tags["problem_id"].startswith(ids[0]) for r in planner.requests[n:])  # finished: not redone
    assert set(read_dissections(run_dir)) == set(ids)

    m = len(planner.requests)
    asyncio.run(dissect_run(run_dir, DissectOptions(), config=cfg))  # type: ignore[arg-type]
    assert len(planner.requests) == m  # all done: nothing is sent
    with pytest.raises(RunError, match="other settings"):
        asyncio.run(dissect_run(run_dir, DissectOptions(repeats=1), config=cfg))  # type: ignore[arg-type]
    other = asyncio.run(dissect_run(run_dir, DissectOptions(repeats=0, out=tmp_path / "elsewhere"), config=cfg))  # type: ignore[arg-type]
    assert [d.label for d in other.dissections] == ["wording", "constraint", "constraint"]
    assert all(d.skipped.get("probability") == "--repeats 0" for d in other.dissections)


def test_plan_variants_differ_from_the_original_and_keep_the_witness() -> None:
    bench = calendar()
    for p in bench.load("generated"):
        planned = plan_variants(bench, p, seed=1)
        for step, v in planned.items():
            assert not isinstance(v, str), (p.id, step, v)
            problem, args = v
            assert problem.query != p.query and problem.metadata["variant_of"] == p.id
            assert problem.metadata["witness"] is not None and args
        assert planned["topic"][1]["topic"] != p.constraints["topic"]  # type: ignore[index]
    assert all(isinstance(v, str) for v in plan_variants(NoVariantCalendar(n=1), p).values())


def test_options_and_run_dirs_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="repeats"):
        DissectOptions(repeats=-1)
    with pytest.raises(ConfigError, match="temperature"):
        DissectOptions(temperature=-0.5)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunError, match="no records"):
        asyncio.run(dissect_run(tmp_path / "empty"))
    with pytest.raises(RunError, match="not a directory"):
        asyncio.run(dissect_run(tmp_path / "nowhere"))


def test_the_command_end_to_end(tmp_path: Path) -> None:
    """A run written the way `modulo run` writes it (config.yaml, llm.script), dissected through the CLI."""
    bench = calendar()
    problems = bench.load("generated")[:3]
    planner = Planner(bench, ["never", "always", "never"])
    good = lambda pid: json.dumps(planner.good[pid])  # noqa: E731
    bad = lambda pid: json.dumps(planner.bad[pid])  # noqa: E731
    p0, p1, p2 = problems
    script: dict[str, list[str]] = {p0.id: [bad(p0.id)] * 20, p1.id: [good(p1.id)], p2.id: [GARBAGE] * 20}
    for step, planned in plan_variants(bench, p0).items():
        vid = planned[0].id  # type: ignore[index]
        script[vid] = [good(vid)] if step == "wording" else [bad(vid)] * 5
    for planned in plan_variants(bench, p2).values():
        script[planned[0].id] = [GARBAGE] * 5  # type: ignore[index]
    (tmp_path / "script.json").write_text(json.dumps(script))

    cfg = config(n=3)
    cfg.llm.script = str(tmp_path / "script.json")
    cfg.cache.mode = "read-write"
    cfg.cache.dir = str(tmp_path / "cache")
    session = build_session(cfg)
    run_dir = tmp_path / "run"
    asyncio.run(run_session(session, RunDir(run_dir), config_yaml=config_yaml(cfg)))

    result = CliRunner().invoke(cli, ["dissect", str(run_dir), "--repeats", "2", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["labels"] == {"wording": 1, "constraint": 1}
    assert payload["components"] == {"plan": 1, "format": 1}
    rows = {d["problem_id"]: d for d in payload["dissections"]}
    assert rows[p0.id]["label"] == "wording" and rows[p2.id]["label"] == "constraint"
    assert payload["settings"]["temperature"] == 0.0 and payload["settings"]["n_failed"] == 2
    assert (run_dir / DISSECT_MD).is_file()

    table = CliRunner().invoke(cli, ["dissect", str(run_dir), "--repeats", "2"])
    assert table.exit_code == 0 and "| wording | 1 | 50% |" in table.stdout

    missing = CliRunner().invoke(cli, ["dissect", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "not a directory" in missing.output and "Traceback" not in missing.output
    quiet = CliRunner().invoke(cli, ["dissect", str(run_dir), "--repeats", "2", "--quiet"])
    assert quiet.exit_code == 0 and quiet.stdout.strip() == str(run_dir / DISSECT_MD)
    help_text = CliRunner().invoke(cli, ["dissect", "--help"])
    assert help_text.exit_code == 0 and "--temperature" in help_text.output


def test_a_plan_lost_by_the_llm_reformulator_is_a_reformulation_failure(tmp_path: Path) -> None:
    """The generator's text holds the witness (the deterministic parser reads it and every critic accepts
    it) but the LLM reformulator writes a wrong JSON: the failing component is the reformulator."""
    bench = calendar()
    planner = Planner(bench, ["never", "never"])
    ids = [p.id for p in planner.problems[:2]]

    def fn(request: LLMRequest) -> str:
        pid = request.tags["problem_id"]
        if request.tags.get("stage") == "reformulate":
            return json.dumps(planner.bad[pid])
        if pid.startswith(ids[0]):  # problem 0: right text, lost in the rewrite
            return bench.render_plan(planner.good[pid])
        return bench.render_plan(planner.bad[pid])  # problem 1: the generator itself is wrong

    cfg = config(n=2)
    cfg.generator.prompt = "direct"
    cfg.reformulator.mode = "llm"
    cfg.llm.args = {"fn": fn}
    make_run(tmp_path / "run", cfg)
    result = asyncio.run(dissect_run(tmp_path / "run", DissectOptions(repeats=1), config=cfg))
    by_id = {d.problem_id: d for d in result.dissections}
    assert by_id[ids[0]].component == "reformulation" and by_id[ids[1]].component == "plan"
    assert all(s.component == "reformulation" for s in by_id[ids[0]].steps)
    assert "| reformulation | 1 |" in result.markdown


def test_a_redraw_loop_keeps_every_bound_part_of_the_run_but_the_generator() -> None:
    """The loop of another sample index shares the run's executor (a sandbox, worker processes), its user
    in the loop and its settings: a dissection step runs the critics the way the run ran them."""
    import inspect

    from modulo.dissect import Dissector
    from modulo.metacontroller import Metacontroller

    cfg = config()
    cfg.llm.args = {"fn": lambda request: GARBAGE}
    session = build_session(cfg)
    base = session.loop
    base.user = object()  # type: ignore[assignment]  # stands for a bound user: compared by identity only
    base.user_llm = object()
    dissector = Dissector(session, DissectOptions(temperature=0.7), records_sink=lambda r: None)
    other = dissector.loop_for(session.config.run.sample + 3)
    assert other is not base and other.generator is not base.generator
    for name in inspect.signature(Metacontroller.__init__).parameters:
        if name in ("self", "generator"):
            continue
        kept, original = getattr(other, name), getattr(base, name)
        assert kept is original or kept == original, name
    assert dissector.loop_for(session.config.run.sample + 3) is other  # made once per sample index


def test_a_run_that_did_not_finish_or_had_errors_says_so(tmp_path: Path) -> None:
    """dissect.md of a killed run with an errored problem read 'problems: 3 failed in the run' like a
    whole, clean run's; it now says how many of the run's problems ran and how many ended in error."""
    run_dir, planner, cfg = _run(tmp_path, ALL)
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first.update(outcome="error", stop_reason="llm_error", error="PermanentLLMError: bad request")
    kept = [json.dumps(first), *lines[1:4]]  # killed after four records, the first of them errored
    (run_dir / "records.jsonl").write_text("\n".join(kept) + "\n")
    result = asyncio.run(dissect_run(run_dir, DissectOptions(temperature=0.7, limit=1), config=cfg))  # type: ignore[arg-type]
    assert f"- **the run did not finish**: 4 of its {len(planner.problems)} problems ran" in result.markdown
    assert "- **1 problem(s) ended in error** in the run" in result.markdown
    full, _, cfg = _run(tmp_path / "whole", ALL)
    clean = asyncio.run(dissect_run(full, DissectOptions(temperature=0.7, limit=1), config=cfg))  # type: ignore[arg-type]
    assert "did not finish" not in clean.markdown and "ended in error" not in clean.markdown
