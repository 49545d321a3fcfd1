"""experiments/analysis.ipynb runs top to bottom (nbclient) on a small scripted sweep: Direct against LLM-Modulo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import toy_sweep

NOTEBOOK = Path(__file__).resolve().parents[2] / "experiments" / "analysis.ipynb"


@pytest.mark.slow
def test_the_analysis_notebook_runs_on_a_scripted_sweep(
    tmp_path: Path, toy_critics: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    nbformat = pytest.importorskip("nbformat", reason="nbformat (in the dev extra) reads the notebook")
    nbclient = pytest.importorskip("nbclient", reason="nbclient (in the dev extra) runs the notebook")
    pytest.importorskip("ipykernel", reason="ipykernel (in the dev extra) is the notebook's kernel")
    # Direct (single shot) against LLM-Modulo at budget 4
    sweep, code, out = toy_sweep(tmp_path, "metacontroller.max_iterations=1,4")
    assert code == 0, out
    # job 0's p2 ended in error (as a run writes it: no evaluation row): left out of the rates, said so
    records = [json.loads(line) for line in (sweep / "0" / "records.jsonl").read_text().splitlines()]
    for rec in records:
        if rec["problem_id"] == "p2":
            rec.update(outcome="error", stop_reason="llm_error", error="PermanentLLMError: bad request")
    (sweep / "0" / "records.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in records))
    evaluation = json.loads((sweep / "0" / "evaluation.json").read_text())
    evaluation["per_problem"] = [row for row in evaluation["per_problem"] if row["problem_id"] != "p2"]
    (sweep / "0" / "evaluation.json").write_text(json.dumps(evaluation))
    monkeypatch.setenv("MODULO_SWEEP", str(sweep))  # the kernel inherits the environment
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()

    def text(i: int) -> str:
        out = []
        for o in nb.cells[i].get("outputs", []):
            out.append(o.get("text", "") + json.dumps(o.get("data", {}).get("text/plain", "")))
        return "\n".join(out)

    codes = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    assert "2 run(s)" in text(codes[0])
    assert "cfg.budget.max_iterations" in text(codes[1])
    # the paired test: Direct passes p4 only (x=4 at once); LLM-Modulo also fixes p0 and p3 (SCRIPT)
    summary = text(codes[2])
    assert "note: 0: 1 problem(s) ended in error or were skipped; left out below" in summary
    paired = text(codes[3])
    assert "n = 5 problems" in paired and "pass rate A 20.0%, B 60.0%" in paired
    assert "only A passes: 0, only B passes: 2" in paired
    figures = [o for o in nb.cells[codes[4]].outputs if "image/png" in o.get("data", {})]
    assert figures, "the budget plot was not drawn"
