"""Tables for papers: the headline table of each benchmark as LaTeX (booktabs), Markdown or CSV.

Built from the report's own rows (:func:`~modulo.reports.tables.headline_rows`): every rate is shown
with its 95% bootstrap interval and the counts behind it (``k/n``), the best value of each rate
column is in bold (every run that ties for it), and the caption names the benchmark, split, model(s)
and budget(s). Rows are labelled by the parts of the method that differ between the runs; the parts
they share go into the caption. From Python::

    from modulo.reports.paper import paper_tables

    for table in paper_tables(["multirun/2026-11-24/10-00-00"]):
        print(table.latex())
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.runs import label_parts
from ..benchmark import MetricSpec
from .labels import configuration_apart
from .load import RunData, ensure_evaluation, load_runs
from .stats import DEFAULT_RESAMPLES, DEFAULT_SEED, Interval
from .tables import headline_rows

FORMATS = ("latex", "markdown", "csv")
EXTENSIONS = {"latex": "tex", "markdown": "md", "csv": "csv"}
#: label parts that may tell rows apart, in this order
_PARTS = ("generator", "critics", "strategy", "feedback", "budget", "model")
#: the mark of a run that did not end clean, explained under the table
FLAG = "\u2020"


@dataclass(frozen=True)
class Cell:
    """One metric of one run: the value (a fraction for rates), its interval and the counts behind it."""

    value: Interval
    kind: str = "rate"
    k: float | None = None
    n: float | None = None
    best: bool = False

    @property
    def missing(self) -> bool:
        return math.isnan(self.value.value)

    def number(self, digits: int = 1) -> str:
        if self.missing:
            return "n/a"
        scale = 100.0 if self.kind == "rate" else 1.0
        return f"{scale * self.value.value:.{digits}f}" if self.kind == "rate" else f"{self.value.value:g}"

    def interval(self, digits: int = 1) -> str:
        if self.missing or math.isnan(self.value.low):
            return ""
        return f"[{100 * self.value.low:.{digits}f}, {100 * self.value.high:.{digits}f}]"

    def extra(self) -> str:
        """The interval and the counts, as in ``[20.0, 80.0] (4/8)``."""
        counts = self.counts()
        return " ".join(x for x in (self.interval(), f"({counts})" if counts else "") if x)

    def counts(self) -> str:
        if self.k is None or self.n is None or not (float(self.k).is_integer() and float(self.n).is_integer()):
            return ""
        return f"{int(self.k)}/{int(self.n)}"


@dataclass
class PaperRow:
    run: str
    label: str
    n: int
    cells: dict[str, Cell] = field(default_factory=dict)
    parts: dict[str, str] = field(default_factory=dict)
    #: how the run ended (:attr:`RunData.status`): anything but ``complete`` is marked in every format
    status: str = "complete"


@dataclass
class PaperTable:
    benchmark: str
    splits: list[str]
    metrics: list[MetricSpec]
    rows: list[PaperRow]
    shared: dict[str, str]
    varying: list[str]
    notes: list[str] = field(default_factory=list)
    #: the bootstrap behind the intervals (named in the caption, so a reader can reproduce them)
    n_resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED

    # -- text pieces ------------------------------------------------------------------------------------
    @property
    def caption(self) -> str:
        models = sorted({r.parts.get("model", "?") for r in self.rows})
        budgets = sorted({r.parts.get("budget", "?") for r in self.rows})
        sizes = sorted({r.n for r in self.rows})
        text = (
            f"{self.benchmark} ({', '.join(self.splits)} split, n = {', '.join(str(s) for s in sizes)} problems); "
            f"model{'s' if len(models) > 1 else ''}: {', '.join(models)}; "
            f"budget{'s' if len(budgets) > 1 else ''}: {', '.join(budgets)}"
        )
        shared = [f"{k} {v}" for k, v in self.shared.items() if k not in ("model", "budget")]
        if shared:
            text += "; " + "; ".join(shared)
        return (
            text + ". Rates in %, with the 95% percentile bootstrap interval over problems "
            f"({self.n_resamples:,} resamples, seed {self.seed}) and the counts behind each "
            "rate (k/n); the best value of each column is in bold (none where all runs are equal)."
        )

    @property
    def flagged(self) -> list[PaperRow]:
        """Rows of runs that did not end clean (errors, killed, cut short, not evaluated)."""
        return [r for r in self.rows if r.status != "complete"]

    def flag_note(self) -> str:
        """The note under the table (after the mark) naming each marked run and how it ended."""
        flagged = "; ".join(f"{r.run}: {r.status}" for r in self.flagged)
        return f"not a clean run, its rates cover only the problems it scored ({flagged})."

    @property
    def label_header(self) -> str:
        return " / ".join(self.varying) if self.varying else "Run"

    # -- formats ----------------------------------------------------------------------------------------
    def latex(self) -> str:
        """A ``table`` environment with a booktabs ``tabular`` (needs ``\\usepackage{booktabs}``)."""
        spec = "l r " + " ".join("r" for _ in self.metrics)
        head = [_tex(self.label_header), "$n$"] + [
            _tex(m.label + (" (\\%)" if m.kind == "rate" else ""), raw_percent=True) for m in self.metrics
        ]
        lines = [
            "\\begin{table}[t]",
            "\\centering",
            "\\small",
            f"\\caption{{{_tex(self.caption)}}}",
            f"\\label{{tab:modulo-{re.sub(r'[^A-Za-z0-9]+', '-', self.benchmark).strip('-')}}}",
            f"\\begin{{tabular}}{{{spec}}}",
            "\\toprule",
            " & ".join(f"{{{h}}}" for h in head) + " \\\\",
            "\\midrule",
        ]
        for row in self.rows:
            mark = "\\textsuperscript{\\dag}" if row.status != "complete" else ""
            cells = [f"{{{_tex(row.label)}{mark}}}", str(row.n)]
            for m in self.metrics:
                cell = row.cells[m.key]
                number = f"\\textbf{{{cell.number()}}}" if cell.best else cell.number()
                extra = cell.extra()
                cells.append("--" if cell.missing else f"{number}{{\\scriptsize\\ {extra}}}" if extra else number)
            lines.append(" & ".join(cells) + " \\\\")
        lines += ["\\bottomrule", "\\end{tabular}"]
        if self.flagged:
            lines.append(f"\\par\\smallskip{{\\footnotesize \\textsuperscript{{\\dag}} {_tex(self.flag_note())}}}")
        lines.append("\\end{table}")
        return "\n".join(lines) + "\n"

    def markdown(self) -> str:
        head = [self.label_header, "n"] + [m.label + (" (%)" if m.kind == "rate" else "") for m in self.metrics]
        out = [f"**Table: {self.caption}**", "", "| " + " | ".join(head) + " |"]
        out.append("|" + "|".join(["---", "--:"] + ["--:" for _ in self.metrics]) + "|")
        for row in self.rows:
            cells = [_md(row.label) + (f" {FLAG}" if row.status != "complete" else ""), str(row.n)]
            for m in self.metrics:
                cell = row.cells[m.key]
                number = f"**{cell.number()}**" if cell.best else cell.number()
                cells.append("n/a" if cell.missing else f"{number} {cell.extra()}".strip())
            out.append("| " + " | ".join(cells) + " |")
        if self.flagged:
            out += ["", f"{FLAG} {self.flag_note()}"]
        return "\n".join(out) + "\n"

    def csv(self) -> str:
        """One row per run: label parts, n, then per metric its value (%), interval, k, n and best flag."""
        buf = io.StringIO()
        fields = ["benchmark", "split", "run", "label", *_PARTS, "n", "status"]
        for m in self.metrics:
            fields += [m.key, f"{m.key}_ci_low", f"{m.key}_ci_high", f"{m.key}_k", f"{m.key}_n", f"{m.key}_best"]
        writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            record: dict[str, object] = {
                "benchmark": self.benchmark,
                "split": ",".join(self.splits),
                "run": row.run,
                "label": row.label,
                **{p: row.parts.get(p, "") for p in _PARTS},
                "n": row.n,
                "status": row.status,
            }
            for m in self.metrics:
                cell = row.cells[m.key]
                scale = 100.0 if m.kind == "rate" else 1.0
                iv = cell.value
                record[m.key] = "" if cell.missing else scale * iv.value
                record[f"{m.key}_ci_low"] = "" if math.isnan(iv.low) else scale * iv.low
                record[f"{m.key}_ci_high"] = "" if math.isnan(iv.high) else scale * iv.high
                record[f"{m.key}_k"] = _count(cell.k)
                record[f"{m.key}_n"] = _count(cell.n)
                record[f"{m.key}_best"] = cell.best
            writer.writerow(record)
        return buf.getvalue()

    def render(self, fmt: str) -> str:
        if fmt == "latex":
            return self.latex()
        if fmt == "markdown":
            return self.markdown()
        if fmt == "csv":
            return self.csv()
        raise ValueError(f"unknown table format {fmt!r}; formats: {', '.join(FORMATS)}")


_TEX_ESCAPES = {
    "\\": "\\textbackslash{}",
    "&": "\\&",
    "%": "\\%",
    "$": "\\$",
    "#": "\\#",
    "_": "\\_",
    "{": "\\{",
    "}": "\\}",
    "~": "\\textasciitilde{}",
    "^": "\\textasciicircum{}",
}


def _tex(text: str, *, raw_percent: bool = False) -> str:
    """Escape LaTeX's special characters (``raw_percent``: keep an already escaped ``\\%``)."""
    if raw_percent:
        return "\\%".join(_tex(part) for part in text.split("\\%"))
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in text)


def _count(value: float | None) -> object:
    if value is None:
        return ""
    return int(value) if float(value).is_integer() else value


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _mark_best(rows: list[PaperRow], metrics: Sequence[MetricSpec]) -> None:
    """Bold the best value of each rate column, the highest or, for a metric where lower is better
    (:attr:`MetricSpec.higher_is_better`), the lowest (all runs that tie for it; none for one run or all equal)."""
    if len(rows) < 2:
        return
    for m in metrics:
        if m.kind != "rate":
            continue
        values = [r.cells[m.key].value.value for r in rows if not r.cells[m.key].missing]
        if not values or max(values) - min(values) < 1e-12:
            continue  # every run has the same value: no best
        top = max(values) if m.higher_is_better else min(values)
        for r in rows:
            cell = r.cells[m.key]
            if not cell.missing and abs(cell.value.value - top) < 1e-12:
                r.cells[m.key] = Cell(cell.value, cell.kind, cell.k, cell.n, best=True)


def table_for(
    benchmark: str, runs: Sequence[RunData], *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> PaperTable:
    """The paper table of one benchmark's runs (each run evaluated or re-evaluated beforehand)."""
    specs: list[MetricSpec] = []
    for run in runs:
        for spec in run.metric_specs():
            if spec.key not in {s.key for s in specs}:
                specs.append(spec)
    headline = headline_rows(list(runs), n_resamples=n_resamples, seed=seed)
    parts = [label_parts(run) for run in runs]
    varying = [p for p in _PARTS if len({x[p] for x in parts}) > 1]
    shared = {p: parts[0][p] for p in _PARTS if p not in varying} if parts else {}
    rows: list[PaperRow] = []
    # runs alike in every part yet configured apart (a sweep over run.sample): the keys they differ in
    apart = configuration_apart(runs, {r.name: tuple(p[k] for k in varying) for r, p in zip(runs, parts, strict=True)})
    for run, head, part in zip(runs, headline, parts, strict=True):
        label = "; ".join([*(part[p] for p in varying), *apart[run.name]]) or run.name
        n = len((run.evaluation or {}).get("per_problem") or [])
        cells: dict[str, Cell] = {}
        for spec in specs:
            iv = head.values.get(spec.key, Interval(math.nan, math.nan, math.nan))
            kn = head.counts.get(spec.key)
            cells[spec.key] = Cell(iv, spec.kind, kn[0] if kn else None, kn[1] if kn else None)
        rows.append(PaperRow(run.name, label, n, cells, part, run.status))
    labels = [r.label for r in rows]
    if len(set(labels)) < len(labels):  # two runs with the same configuration: name them apart
        for r in rows:
            r.label = f"{r.run}: {r.label}" if varying else r.label
    _mark_best(rows, specs)
    notes = [f"{run.name}: {note}" for run in runs for note in run.notes]
    splits = sorted({r.split for r in runs})
    return PaperTable(benchmark, splits, specs, rows, shared, varying, notes, n_resamples, seed)


def paper_tables(
    paths: Sequence[str | Path] | Sequence[RunData],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    reevaluate: bool = True,
) -> list[PaperTable]:
    """One :class:`PaperTable` per benchmark for the runs under ``paths`` (or already loaded runs)."""
    runs = [p for p in paths if isinstance(p, RunData)]
    if len(runs) != len(paths):
        runs = load_runs([p for p in paths if not isinstance(p, RunData)], light=True)
    by_bench: dict[str, list[RunData]] = {}
    for run in runs:
        ensure_evaluation(run, reevaluate=reevaluate)
        by_bench.setdefault(run.benchmark_name, []).append(run)
    return [table_for(b, rs, n_resamples=n_resamples, seed=seed) for b, rs in by_bench.items()]


def write_paper_tables(tables: Sequence[PaperTable], fmt: str, out_dir: Path) -> list[Path]:
    """``out_dir/paper_table1.<ext>`` (``paper_table1_<benchmark>.<ext>`` when there are several)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for table in tables:
        stem = "paper_table1"
        if len(tables) > 1:
            stem += "_" + re.sub(r"[^A-Za-z0-9]+", "_", table.benchmark).strip("_")
        path = out_dir / f"{stem}.{EXTENSIONS[fmt]}"
        path.write_text(table.render(fmt), encoding="utf-8")
        paths.append(path)
    return paths
