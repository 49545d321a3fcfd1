"""modulo report --format latex|markdown|csv: the paper table, its structure, and that LaTeX compiles it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from modulo.reports.paper import paper_tables
from tests.cli_support import modulo
from tests.reports.conftest import ToyBench, set_outcome, toy_problems


@pytest.fixture
def sweep(tmp_path: Path, make_run: Any, run_a_plans: Any, run_b_plans: Any) -> Path:
    make_run(tmp_path / "sweep" / "0", run_a_plans, critics=("format", "c_nonneg", "c_even", "h_max"))
    make_run(tmp_path / "sweep" / "1", run_b_plans, critics=("format",), model="toy-model_v2")
    return tmp_path / "sweep"


def test_the_table_holds_counts_intervals_best_values_and_a_caption(sweep: Path) -> None:
    (table,) = paper_tables([sweep], n_resamples=500)
    assert table.varying == ["critics", "model"]
    assert [r.label for r in table.rows] == ["[All]; toy-model", "[Json]; toy-model_v2"]
    final_a = table.rows[0].cells["final_pass_rate"]
    final_b = table.rows[1].cells["final_pass_rate"]
    # RUN_A passes p0, p4 (2/6); RUN_B passes p1, p3, p4, p5 (4/6)
    assert final_a.counts() == "2/6" and final_b.counts() == "4/6"
    assert final_b.best and not final_a.best
    assert final_a.value.low <= final_a.value.value <= final_a.value.high
    delivery = [r.cells["delivery_rate"] for r in table.rows]
    assert [c.counts() for c in delivery] == ["5/6", "5/6"] and not any(c.best for c in delivery)  # a tie of all
    assert "toy_reports (dev split, n = 6 problems)" in table.caption
    assert "models: toy-model, toy-model_v2" in table.caption and "budget: 4 it" in table.caption
    # the interval's method, as the report names it (a table for a paper said only 'bootstrap interval')
    assert "95% percentile bootstrap interval over problems (500 resamples, seed 0)" in table.caption


def _structure(tex: str) -> list[list[str]]:
    """The rows of the tabular (cells split on unescaped &), checking the booktabs skeleton on the way."""
    assert tex.count("\\begin{table}") == tex.count("\\end{table}") == 1
    assert tex.count("\\begin{tabular}") == tex.count("\\end{tabular}") == 1
    body = tex.split("\\midrule")[1].split("\\bottomrule")[0]
    assert tex.index("\\toprule") < tex.index("\\midrule") < tex.index("\\bottomrule")
    spec = re.search(r"\\begin\{tabular\}\{([^}]*)\}", tex)
    assert spec is not None
    width = len(spec.group(1).split())
    header = tex.split("\\toprule")[1].split("\\midrule")[0]
    rows = [header, *[line for line in body.strip().split("\n") if line.strip()]]
    cells = [re.split(r"(?<!\\)&", row.strip().removesuffix("\\\\")) for row in rows]
    assert all(len(c) == width for c in cells), cells
    assert tex.count("{") - tex.count("\\{") == tex.count("}") - tex.count("\\}")
    # every special character outside commands is escaped
    assert not re.search(r"(?<!\\)[%#_$](?![^$]*\$)", tex.replace("$n$", "")), tex
    return cells


def test_latex_output_is_a_well_formed_booktabs_table(sweep: Path, capsys: Any) -> None:
    shown = modulo("report", sweep, "--format", "latex", "--resamples", "200")
    assert shown.exit_code == 0
    tex = shown.stdout
    assert tex == (sweep / "paper_table1.tex").read_text()
    cells = _structure(tex)
    assert cells[2][0].strip() == "{[Json]; toy-model\\_v2}"  # a row label starting with [ is braced for \\
    assert "\\textbf{66.7}" in cells[2][-1] and "(4/6)" in cells[2][-1] and "(2/6)" in cells[1][-1]
    assert "\\caption{toy\\_reports (dev split" in tex


def test_markdown_and_csv_formats(sweep: Path, capsys: Any) -> None:
    shown = modulo("report", sweep, "--format", "markdown", "--resamples", "200")
    assert shown.exit_code == 0
    md = shown.stdout
    assert "| [Json]; toy-model_v2 | 6 |" in md and "**66.7** [" in md and "(4/6)" in md
    assert modulo("report", sweep, "--format", "csv", "--resamples", "200", "--quiet").exit_code == 0
    df = pd.read_csv(sweep / "paper_table1.csv")
    assert df["final_pass_rate_k"].tolist() == [2, 4] and df["final_pass_rate_n"].tolist() == [6, 6]
    assert df["final_pass_rate_best"].tolist() == [False, True]
    assert df["final_pass_rate"].tolist() == pytest.approx([100 / 3, 200 / 3])
    assert (df["final_pass_rate_ci_low"] <= df["final_pass_rate"]).all()


def test_the_latex_table_compiles_in_a_minimal_document(sweep: Path, tmp_path: Path, capsys: Any) -> None:
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        pytest.skip(
            "pdflatex is not installed (Debian: apt-get install texlive-latex-base texlive-latex-recommended, "
            "about 340 MB); the structural check above still runs"
        )
    assert modulo("report", sweep, "--format", "latex", "--resamples", "200", "--quiet").exit_code == 0
    table = (sweep / "paper_table1.tex").read_text()
    doc = tmp_path / "doc.tex"
    doc.write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage[margin=1cm,landscape]{geometry}\n"
        f"\\begin{{document}}\n{table}\\end{{document}}\n"
    )
    proc = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 1000


def test_a_run_that_did_not_end_clean_is_marked_in_every_format(
    tmp_path: Path, make_run: Any, run_a_plans: Any, run_b_plans: Any, capsys: Any
) -> None:
    """A paper table of a sweep with a killed job and a job with an errored problem showed both as clean
    rows in the .tex, .md and .csv files (the notes went to the console only); now each such row is
    marked and the note under the table (a column in CSV) says how the run ended."""
    root = tmp_path / "sweep"
    make_run(root / "0", run_a_plans)
    make_run(root / "1", run_b_plans, critics=("format",), evaluate=False, truncate_last=True)
    errored = make_run(root / "2", run_a_plans, critics=("format", "c_nonneg"))
    set_outcome(errored, 1, "error")
    lines = (errored / "records.jsonl").read_text().split("\n")
    scored = [p for p in toy_problems() if p.id != "p1"]  # the run's own evaluation leaves the error out
    ev = ToyBench().evaluate(scored, [json.loads(lines[i])["best_plan"] for i in (0, 2, 3, 4, 5)])
    (errored / "evaluation.json").write_text(json.dumps({"metrics": ev.metrics, "per_problem": ev.per_problem}))
    killed, erred = "1: killed (5/6), re-evaluated", "2: errors (1 of 6 problems)"
    (table,) = paper_tables([root], n_resamples=200)
    assert [r.status for r in table.rows] == ["complete", killed[3:], erred[3:]]
    assert modulo("report", root, "--format", "latex", "--resamples", "200", "--quiet").exit_code == 0
    tex = (root / "paper_table1.tex").read_text()
    cells = _structure(tex)
    assert ["\\textsuperscript{\\dag}" in row[0] for row in cells[1:]] == [False, True, True]
    assert "\\textsuperscript{\\dag} not a clean run" in tex and killed in tex and erred in tex
    assert modulo("report", root, "--format", "markdown", "--resamples", "200", "--quiet").exit_code == 0
    md = (root / "paper_table1.md").read_text()
    rows = md.split("|--:|\n")[1].split("\n\n")[0].splitlines()
    assert [row.split(" | ")[0].endswith("\u2020") for row in rows] == [False, True, True]
    assert "\u2020 not a clean run" in md and killed in md and erred in md
    assert modulo("report", root, "--format", "csv", "--resamples", "200", "--quiet").exit_code == 0
    df = pd.read_csv(root / "paper_table1.csv")
    assert df["status"].tolist() == ["complete", killed[3:], erred[3:]]


def test_the_best_value_of_a_metric_where_lower_is_better_is_the_lowest() -> None:
    """Wrongful abstention 14.3 % was bolded as the best beside 0.0 %: the paper table bolded the highest value
    of every rate column. A metric declared lower-is-better (MetricSpec.higher_is_better=False) marks the
    lowest; the others still mark the highest."""
    from modulo.benchmark import MetricSpec
    from modulo.reports.paper import Cell, PaperRow, _mark_best
    from modulo.reports.stats import Interval

    specs = [MetricSpec("success", "success"), MetricSpec("wrongful", "wrongful", higher_is_better=False)]

    def row(name: str, success: float, wrongful: float) -> PaperRow:
        cells = {k: Cell(Interval(v, v, v)) for k, v in (("success", success), ("wrongful", wrongful))}
        return PaperRow(run=name, label=name, n=7, cells=cells)

    rows = [row("a", 0.5, 1 / 7), row("b", 0.25, 0.0)]
    _mark_best(rows, specs)
    assert [r.cells["success"].best for r in rows] == [True, False]
    assert [r.cells["wrongful"].best for r in rows] == [False, True]
    from critics.synth.benchmark import SynthBenchmark
    from critics.travelbench.benchmark import TravelBenchSingleTurn, TravelBenchUnsolvable

    for bench, lower in (
        (SynthBenchmark, {"wrongful_abstention"}),
        (TravelBenchSingleTurn, {"wrongful_abstention", "tool_error_rate"}),
        (TravelBenchUnsolvable, {"wrongful_abstention"}),
    ):
        assert {m.key for m in bench.metrics if not m.higher_is_better} == lower
