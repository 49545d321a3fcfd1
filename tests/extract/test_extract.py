"""Extractions with scripted model replies: a correct critic admitted, a subtly permissive one rejected with
the counterexample that shows it, one fixed after feedback, and hostile ones contained and rejected with
the reason (nothing of the environment in any file written, no connection out of the sandbox)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from modulo.binding import bind_benchmark
from modulo.extract.gate import GateSettings
from modulo.extract.run import run_extraction
from modulo.llm.base import LLMSettings
from modulo.llm.client import build_client

pytestmark = pytest.mark.slow  # each candidate runs in sandbox worker processes

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "scripts" / "extract_calendar.json"
SECRET_VAR = "MODULO_EXTRACT_TEST_SECRET"
SECRET = "sk-extract-test-7f3a9c1e5b"


def extraction(tmp_path: Path, script: dict[str, Any], names: list[str], **gate: Any) -> Any:
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps(script))
    client = build_client(LLMSettings(name="scripted", model="scripted", script=str(script_file)))
    settings = GateSettings(**{"problems": 6, "timeout_s": 3.0, **gate})
    bench = bind_benchmark("synth/calendar")

    async def go() -> Any:
        try:
            return await run_extraction(bench, names, client, settings, tmp_path / "out")
        finally:
            await client.aclose()

    return asyncio.run(go())


def reply(code: str) -> str:
    return f"Here it is.\n```python\n{code.strip()}\n```\n"


def files_text(folder: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in folder.rglob("*") if p.is_file())


def test_a_permissive_critic_is_rejected_with_its_counterexample_and_fixed_after_feedback(tmp_path: Path) -> None:
    busy = json.loads(SCRIPT.read_text())["synth_busy"]  # [subtly permissive, correct]
    result = extraction(tmp_path, {"synth_busy": busy}, ["synth_busy"])
    [r] = result.results
    first, second = r.attempts
    assert not first.admitted and "training: recall" in first.reason and first.training.confusion.false_rejects == 0
    example = first.training.counterexamples[0]
    assert example["oracle_valid"] is False and example["critic_rejected"] is False
    assert "Z3: breaks" in example["oracle"]
    # the counterexample went back to the model, and nothing of the held-out part did
    assert json.dumps(example["plan"], sort_keys=True) in first.feedback and "Counterexample 1" in first.feedback
    held_ids = {c["problem_id"] for c in first.held_out.counterexamples}
    assert held_ids and not any(pid in first.feedback for pid in held_ids)
    assert second.admitted and r.admitted and second.held_out.confusion.recall == 1.0
    assert second.training.confusion.false_rejects == 0 and second.held_out.confusion.false_rejects == 0
    out = result.out
    report = json.loads((out / "modulo_extracted_synth_calendar" / "gate" / "synth_busy.json").read_text())
    assert report["admitted"] and report["gate"]["min_recall"] == 1.0 and len(report["attempts"]) == 2
    assert report["attempts"][0]["training"]["counterexamples"][0]["plan"] == example["plan"]
    assert report["prompt"][1]["content"].startswith("Benchmark: synth/calendar. Constraint: synth_busy")
    md = (out / "modulo_extracted_synth_calendar" / "gate" / "synth_busy.md").read_text()
    assert "ADMITTED" in md and "Counterexamples (training)" in md and "| invalid (" in md
    pyproject = (out / "pyproject.toml").read_text()
    assert '"extracted/synth_busy" = "modulo_extracted_synth_calendar.extracted:synth_busy"' in pyproject


def test_the_permissive_critic_alone_is_not_admitted(tmp_path: Path) -> None:
    permissive = json.loads(SCRIPT.read_text())["synth_busy"][:1]
    result = extraction(tmp_path, {"synth_busy": permissive}, ["synth_busy"], attempts=1)
    [r] = result.results
    assert not r.admitted and r.reason.startswith("rejected after 1 attempt(s): training: recall")
    assert result.package is None and not (result.out / "pyproject.toml").exists()
    report = json.loads((result.out / "rejected" / "synth_busy.json").read_text())
    assert not report["admitted"] and report["attempts"][0]["training"]["counterexamples"]
    assert "No critic was admitted" in (result.out / "extraction.md").read_text()


HOSTILE = {
    # opens a connection to a listener of the test
    "synth_busy": """
import socket
def check(problem, plan):
    with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
        s.sendall(b"leak")
    return True, ""
""",
    "synth_work_hours": """
def check(problem, plan):
    while True:
        pass
""",
    "synth_meeting_duration": """
def check(problem, plan):
    chunks = []
    while True:
        chunks.append(bytearray(64 * 2**20))
""",
    "synth_preference": """
import os
def check(problem, plan):
    if os.fork() == 0:
        os._exit(0)
    return True, ""
""",
    # puts environment variables in its feedback and accepts everything
    "synth_deadline": """
import os
def check(problem, plan):
    return True, "%s %s" % (os.environ.get("SECRET_VAR", ""), os.environ.get("OPENAI_API_KEY", ""))
""",
    "synth_earliest": """
def check(problem, plan):
    with open(ESCAPE, "w") as fh:
        fh.write("escaped")
    return True, ""
""",
}


def test_hostile_candidates_are_contained_and_rejected_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_VAR, SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET + "-openai")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    escape = tmp_path / "escaped.txt"
    script = {
        name: [
            reply(
                code.replace("PORT", str(port))
                .replace("ESCAPE", repr(str(escape)))
                .replace('"SECRET_VAR"', repr(SECRET_VAR))
            )
        ]
        for name, code in HOSTILE.items()
    }
    try:
        result = extraction(tmp_path, script, list(HOSTILE), attempts=1, timeout_s=2.0, memory_mb=768)
        with pytest.raises(TimeoutError):
            listener.accept()  # no connection ever left the sandbox
    finally:
        listener.close()
    reasons = {r.info.name: r.reason for r in result.results}
    assert not any(r.admitted for r in result.results)
    # socket, os and open are out of a candidate's reach (modulo.extract.confine); the sandbox's own guards
    # against connections, processes and writes stand behind that (tests/sandbox)
    assert "importing socket is refused in the modulo sandbox" in reasons["synth_busy"]
    assert "did not finish within 2 s (sandbox worker killed)" in reasons["synth_work_hours"]
    assert "MemoryError" in reasons["synth_meeting_duration"]
    assert "importing os is refused in the modulo sandbox" in reasons["synth_preference"]
    assert "importing os is refused in the modulo sandbox" in reasons["synth_deadline"]
    assert "NameError: name 'open' is not defined" in reasons["synth_earliest"]
    assert not escape.exists()
    written = files_text(result.out)
    assert written and SECRET not in written  # no environment value in any file written
    assert result.package is None


def test_travelplanner_critics_are_gated_by_the_golden_official_verdicts(tmp_path: Path) -> None:
    script = json.loads((ROOT / "experiments" / "scripts" / "extract_travelplanner.json").read_text())
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps(script))
    client = build_client(LLMSettings(name="scripted", model="scripted", script=str(script_file)))
    bench = bind_benchmark("travelplanner")

    async def go() -> Any:
        try:
            return await run_extraction(
                bench, ["diverse_restaurants"], client, GateSettings(timeout_s=10.0), tmp_path / "out"
            )
        finally:
            await client.aclose()

    [r] = asyncio.run(go()).results
    first, second = r.attempts
    assert not first.admitted and "training: recall" in first.reason  # it ignored breakfasts
    example = first.training.counterexamples[0]
    assert example["oracle"].startswith("official is_valid_restaurants: False") and not example["critic_rejected"]
    assert second.admitted and r.admitted
    # whole families of golden plans on one side of the split: no variant of a held-out plan is trained on
    train_groups = {c["group"] for c in first.training.counterexamples}
    held_groups = {c["group"] for c in first.held_out.counterexamples}
    assert train_groups and held_groups and not train_groups & held_groups
    assert r.gate_set["training"]["problems"] + r.gate_set["held_out"]["problems"] == 12


def test_a_candidate_that_calls_the_built_in_critic_it_stands_for_is_not_admitted(tmp_path: Path) -> None:
    # it would agree with the oracle on every gate case, and be reported as an LLM-written critic
    code = """
from modulo.binding import bind_benchmark, bind_critics
from modulo.types import Problem
def check(problem, plan):
    [built_in] = bind_critics(["synth_busy"], bind_benchmark("synth/calendar"), {}, {})
    verdict = built_in(Problem(id="p", benchmark="synth/calendar", query=problem["query"],
                               constraints=problem["constraints"]), plan)
    return verdict.passed, verdict.feedback
"""
    result = extraction(tmp_path, {"synth_busy": [reply(code)]}, ["synth_busy"], attempts=1)
    [r] = result.results
    assert not r.admitted and "importing modulo.binding is refused in the modulo sandbox" in r.reason
    assert result.package is None


BLIND = """
def _minutes(text):
    hours, minutes = str(text).split(":")
    return int(hours) * 60 + int(minutes)


def check(problem, plan):
    day, end = plan["day"], _minutes(plan["end"])
    for c in problem["constraints"]["constraints"]:  # avoid_before is never looked at
        if c["kind"] in ("avoid_after", "avoid_day") and c["day"] == day:
            if c["kind"] == "avoid_day" or end > c["time"]:
                return False, c["text"]
    return True, ""
"""


def test_a_critic_that_ignores_one_kind_of_its_constraint_is_not_admitted(tmp_path: Path) -> None:
    # seed 1 with 6 problems: among the first problems, no plan breaks an avoid_before requirement alone
    result = extraction(tmp_path, {"synth_preference": [reply(BLIND)]}, ["synth_preference"], attempts=1, seed=1)
    [r] = result.results
    assert not r.admitted and "avoid_before" in json.dumps(r.final.training.counterexamples)
