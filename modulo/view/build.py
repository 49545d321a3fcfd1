"""Assemble the viewer's files: one self-contained HTML page per run (and one per sweep).

A page holds the CSS, the script and the data inline; it opens from disk with no network. A run's
problems are kept out of the page's start-up work: each problem's detail is its own JSON block,
parsed only when the problem is opened. Above ``split_above`` problems (and always under ``--serve``)
the details go into chunk files next to the page (``view-data/chunk-NNNNN.js``, ``chunk_size``
problems each), loaded by a ``<script>`` tag when first needed, so a 5,000-problem run opens with its
index only and the problem list pages through it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from ..reports.load import (
    RECORDS_FILE,
    RunData,
    ensure_evaluation,
    find_runs,
    iter_records,
    load_run,
    load_runs,
    note_unfinished,
)
from ..types import Outcome, ProblemResult
from .data import problem_detail, problem_summary, run_overview, sweep_overview

PAGE_NAME = "view.html"
DATA_DIR = "view-data"
DEFAULT_SPLIT_ABOVE = 1000
DEFAULT_CHUNK_SIZE = 50
#: bootstrap resamples for the intervals on the page (the report's default is 10,000)
DEFAULT_RESAMPLES = 2000


@dataclass
class ViewOptions:
    split_above: int = DEFAULT_SPLIT_ABOVE
    chunk_size: int = DEFAULT_CHUNK_SIZE
    n_resamples: int = DEFAULT_RESAMPLES
    #: the page polls the server for changes (``--serve``)
    live: bool = False
    version: str = ""


@dataclass
class ViewFiles:
    """The files a view wrote, by path relative to ``base``; ``main`` is the page to open."""

    base: Path
    main: str
    files: list[str] = field(default_factory=list)

    @property
    def page(self) -> Path:
        return self.base / self.main

    @contextmanager
    def open(self, rel: str) -> Iterator[TextIO]:
        """A file to write piece by piece, put in place when complete (a reader never sees half a page)."""
        path = self.base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                yield fh
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, path)
        self.files.append(rel)

    def write(self, rel: str, content: str) -> None:
        with self.open(rel) as fh:
            fh.write(content)


def _static(name: str) -> str:
    return resources.files("modulo.view").joinpath("static", name).read_text(encoding="utf-8")


def script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` (so no ``</script>``), no line separators."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def page_head(title: str) -> str:
    """The page up to its data: inline CSS, and a policy that lets it load nothing from a network."""
    return "\n".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            "script-src 'self' 'unsafe-inline' file:; style-src 'unsafe-inline'; img-src data:; connect-src 'self'\">",
            f"<title>{_escape_text(title)}</title>",
            f'<style>{_static("viewer.css")}</style></head><body><div id="app"></div>\n',
        ]
    )


def problem_block(k: int, detail: Any) -> str:
    """One problem's data in the page (embedded mode), parsed by the script only when opened."""
    return f'<script type="application/json" id="modulo-p-{k}">{script_json(detail)}</script>\n'


def page_tail(meta: dict[str, Any]) -> str:
    """The page's metadata and index, and the script (which runs once everything above is parsed)."""
    return (
        f'<script type="application/json" id="modulo-meta">{script_json(meta)}</script>\n'
        f"<script>{_static('viewer.js')}</script></body></html>\n"
    )


def page_html(meta: dict[str, Any]) -> str:
    return page_head(str(meta["overview"].get("title", "modulo view"))) + page_tail(meta)


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def page_meta(
    overview: dict[str, Any],
    index: dict[str, list[Any]],
    options: ViewOptions,
    split: bool,
    chunk_size: int,
    parent: str | None,
) -> dict[str, Any]:
    """What the page's script reads first: the overview, the problem index and where problem details are."""
    return {
        "overview": overview,
        "index": index,
        "mode": "split" if split else "embedded",
        "chunk_size": chunk_size,
        "data_dir": DATA_DIR,
        "live": options.live,
        "version": options.version,
        "parent": parent,
    }


def _count_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as fh:
        return sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b"")) + 1


def write_run(run: RunData, page: str, options: ViewOptions, view: ViewFiles, *, parent: str | None = None) -> None:
    """Write the page of one run (``page``: its path relative to the view's base) and its chunk files.

    ``run`` comes without its records: they are streamed from ``records.jsonl`` one at a time, each
    problem's detail written out (into the page, or into the current chunk file) before the next is
    read. What stays in memory is the index and each record without its iterations (for the overview).
    """
    bench = run.benchmark_or_none()
    if bench is None:
        run.notes.append(f"plans are shown as JSON: the benchmark is not available here ({run.benchmark_error()})")
    critic_index: dict[str, int] = {name: i for i, name in enumerate(run.critics)}
    records = run.path / RECORDS_FILE
    split = options.live or _count_lines(records) > options.split_above
    chunk_size = options.chunk_size if split else 1
    page_dir = os.path.dirname(page)
    data_dir = DATA_DIR if not page_dir else f"{page_dir}/{DATA_DIR}"
    rows: dict[str, list[Any]] = {}
    light: dict[str, ProblemResult] = {}
    batch: list[Any] = []

    def flush(k: int) -> None:
        view.write(f"{data_dir}/chunk-{k:05d}.js", f"window.moduloChunk({k},{script_json(batch)});\n")
        batch.clear()

    with ExitStack() as stack:
        fh = None if split else stack.enter_context(view.open(page))
        if fh is not None:
            fh.write(page_head(f"{run.run_id}: {run.benchmark_name}/{run.split}"))
        n = 0
        for rec in iter_records(records, run.notes):
            if rec.problem_id in light:
                run.notes.append(
                    f"records.jsonl: problem {rec.problem_id} recorded more than once; the last record is used"
                )
                del light[rec.problem_id]
            light[rec.problem_id] = rec.model_copy(update={"iterations": []})
            detail = problem_detail(rec, run.critics, bench)
            rows[rec.problem_id] = [*problem_summary(rec, critic_index), n // chunk_size, n % chunk_size]
            if fh is not None:
                fh.write(problem_block(n, detail))
            else:
                batch.append(detail)
                if len(batch) == chunk_size:
                    flush(n // chunk_size)
            n += 1
        if batch:
            flush(n // chunk_size)
        run.records = light
        note_unfinished(run)
        ensure_evaluation(run, reevaluate=False)  # an evaluation.json the records outgrew: no metrics shown
        index: dict[str, list[Any]] = {
            "critics": list(critic_index),
            "rows": [rows[pid] for pid in run.finished_ids],
            "outcomes": [o.value for o in Outcome],
        }
        meta = page_meta(run_overview(run, n_resamples=options.n_resamples), index, options, split, chunk_size, parent)
        if fh is not None:
            fh.write(page_tail(meta))
        else:
            view.write(page, page_html(meta))


def build_view(path: str | Path, out: str | Path | None = None, options: ViewOptions | None = None) -> ViewFiles:
    """Write the viewer for a run directory or a sweep (any tree holding run directories).

    A run's page goes to ``out`` (default ``RUN_DIR/view.html``). A sweep's page goes to ``out``
    (default ``SWEEP_DIR/view.html``) and each job's page to ``<job path under the sweep>/view.html``
    next to it, so the links between them are relative.
    """
    options = options or ViewOptions()
    root = Path(path)
    found = find_runs([root])
    if (root / "run.json").is_file():
        run = load_run(root, with_records=False)
        run.name = run.run_id
        target = Path(out) if out is not None else root / PAGE_NAME
        view = ViewFiles(target.parent, target.name)
        write_run(run, target.name, options, view)
        return view
    target = Path(out) if out is not None else root / PAGE_NAME
    view = ViewFiles(target.parent, target.name)
    runs = load_runs(found, with_records=False)
    links = []
    for run in runs:
        rel = run.path.resolve().relative_to(root.resolve()).as_posix()
        page = f"{rel}/{PAGE_NAME}"
        up = "/".join([".."] * len(Path(rel).parts))
        write_run(run, page, options, view, parent=f"./{up}/{target.name}")
        links.append(f"./{page}")
    index: dict[str, list[Any]] = {"critics": [], "rows": [], "outcomes": []}
    meta = page_meta(sweep_overview(runs, links, root, n_resamples=options.n_resamples), index, options, False, 1, None)
    view.write(target.name, page_html(meta))
    return view
