"""The check of issue 18, as a user types it: ``modulo critics extract synth/calendar llm=scripted
llm.script=FILE`` admits the correct candidates, rejects the permissive one with a counterexample, and
writes a plugin package that pip installs and ``modulo critics list`` shows with source ``llm-extracted``;
a run with an extracted critic sandboxes it and labels it, and ``modulo report`` compares it with the
built-in it stands for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..core.plugins import ROOT, install, modulo

pytestmark = pytest.mark.slow  # a whole extraction, a pip install and two runs in subprocesses

SCRIPT = ROOT / "experiments" / "scripts" / "extract_calendar.json"


def test_extract_then_install_then_run_and_compare(tmp_path: Path) -> None:
    out = tmp_path / "extracted"
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-m", "modulo.cli.main", "critics", "extract", "synth/calendar", "llm=scripted",
         f"llm.script={SCRIPT}", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "synth_busy: attempt 1: training: recall" in proc.stderr  # the permissive candidate, rejected
    assert "synth_busy: attempt 2: admitted" in proc.stderr
    summary = json.loads((out / "extraction.json").read_text())
    assert all(c["admitted"] for c in summary["constraints"]) and len(summary["constraints"]) == 6
    busy = json.loads((out / "modulo_extracted_synth_calendar" / "gate" / "synth_busy.json").read_text())
    first = busy["attempts"][0]
    assert not first["admitted"] and first["training"]["counterexamples"][0]["oracle_valid"] is False

    env = install(out, tmp_path / "site")
    listed = modulo(env, "critics", "list", "--benchmark", "synth/calendar")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if "extracted/synth_busy" in x)
    assert "llm-extracted" in line and "modulo-extracted-synth-calendar" in line

    script = tmp_path / "plans.json"
    slots = ["9:00", "10:30", "12:00", "13:00", "14:00", "11:00", "15:00", "9:30", "13:30", "16:00"]
    script.write_text(
        json.dumps(
            {
                "*": [
                    json.dumps({"day": "Monday", "start": s, "end": f"{int(s.split(':')[0]) + 1}:{s.split(':')[1]}"})
                    for s in slots
                ]
            }
        )
    )
    common = ["run", "benchmark=synth/calendar", "benchmark.n=3", "llm=scripted", f"llm.script={script}",
              "generator.prompt=json", "run.report=false"]  # fmt: skip
    run_a = modulo(env, *common, "critics=[format,extracted/synth_busy,synth_meeting_duration]",
                   f"run.dir={tmp_path / 'a'}", cwd=tmp_path)  # fmt: skip
    assert run_a.returncode == 0, run_a.stderr[-3000:]
    run_b = modulo(env, *common, "critics=[format,synth_busy,synth_meeting_duration]", f"run.dir={tmp_path / 'b'}",
                   cwd=tmp_path)  # fmt: skip
    assert run_b.returncode == 0, run_b.stderr[-3000:]
    info = json.loads((tmp_path / "a" / "run.json").read_text())
    assert info["sandbox"]["critics"] == ["extracted/synth_busy"]  # sandboxed although nobody asked
    assert info["untrusted_critics"] == ["extracted/synth_busy"] and "llm-extracted" in info["critic_source"]
    assert info["critic_provenance"]["extracted/synth_busy"]["reference"] == "synth_busy"
    rep = modulo(env, "report", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "rep"),
                 "--no-figures", "--no-budget-curve", "--resamples", "50", cwd=tmp_path)  # fmt: skip
    assert rep.returncode == 0, rep.stderr[-3000:]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "LLM-extracted critics against the built-ins" in md and "source: derived+llm-extracted" in md
    row = next(x for x in md.splitlines() if x.startswith("| a | extracted/synth_busy | synth_busy"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[3]) > 0 and cells[4] == "100.0" and cells[5] == "0" and cells[9] == "b"
