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
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..reports.load import RunData, find_runs, load_run, load_runs
from ..types import Outcome
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

    def write(self, rel: str, content: str) -> None:
        """Write one file (atomically: a reader never sees half a page)."""
        path = self.base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, path)
        self.files.append(rel)


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


def page_html(meta: dict[str, Any], blocks: list[str] | None = None) -> str:
    """The page: inline CSS, the metadata and (embedded mode) one JSON block per problem, inline script."""
    title = str(meta["overview"].get("title", "modulo view"))
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        # no network: the page may load nothing but its own inline code and (split mode) its chunk files
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'self' 'unsafe-inline' file:; style-src 'unsafe-inline'; img-src data:; connect-src 'self'\">",
        f"<title>{_escape_text(title)}</title>",
        f'<style>{_static("viewer.css")}</style></head><body><div id="app"></div>',
        f'<script type="application/json" id="modulo-meta">{script_json(meta)}</script>',
    ]
    for i, block in enumerate(blocks or []):
        parts.append(f'<script type="application/json" id="modulo-p-{i}">{block}</script>')
    parts.append(f"<script>{_static('viewer.js')}</script></body></html>\n")
    return "\n".join(parts)


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_run(run: RunData, page: str, options: ViewOptions, view: ViewFiles, *, parent: str | None = None) -> None:
    """Write the page of one run (``page``: its path relative to the view's base) and its chunk files.

    Problem details are made one at a time; in split mode each chunk is written as soon as it is full,
    so only one chunk's data is held at once.
    """
    bench = run.benchmark_or_none()
    notes = []
    if bench is None:
        notes.append(f"plans are shown as JSON: the benchmark is not available here ({run.benchmark_error()})")
    critic_index: dict[str, int] = {name: i for i, name in enumerate(run.critics)}
    ids = run.finished_ids
    rows = [problem_summary(run.records[pid], critic_index) for pid in ids]
    overview = run_overview(run, n_resamples=options.n_resamples, notes=notes)
    split = options.live or len(ids) > options.split_above
    chunk_size = options.chunk_size if split else 1
    page_dir = os.path.dirname(page)
    data_dir = DATA_DIR if not page_dir else f"{page_dir}/{DATA_DIR}"
    meta = {
        "overview": overview,
        "index": {"critics": list(critic_index), "rows": rows, "outcomes": [o.value for o in Outcome]},
        "mode": "split" if split else "embedded",
        "chunk_size": chunk_size,
        "data_dir": DATA_DIR,
        "live": options.live,
        "version": options.version,
        "parent": parent,
    }
    details = (problem_detail(run.records[pid], run.critics, bench) for pid in ids)
    if not split:
        view.write(page, page_html(meta, [script_json(d) for d in details]))
        return
    batch: list[Any] = []
    for n, detail in enumerate(details):
        batch.append(detail)
        if len(batch) == chunk_size or n == len(ids) - 1:
            k = n // chunk_size
            view.write(f"{data_dir}/chunk-{k:05d}.js", f"window.moduloChunk({k},{script_json(batch)});\n")
            batch = []
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
        run = load_run(root)
        run.name = run.run_id
        target = Path(out) if out is not None else root / PAGE_NAME
        view = ViewFiles(target.parent, target.name)
        write_run(run, target.name, options, view)
        return view
    target = Path(out) if out is not None else root / PAGE_NAME
    view = ViewFiles(target.parent, target.name)
    runs = load_runs(found)
    links = []
    for run in runs:
        rel = run.path.resolve().relative_to(root.resolve()).as_posix()
        page = f"{rel}/{PAGE_NAME}"
        up = "/".join([".."] * len(Path(rel).parts))
        write_run(run, page, options, view, parent=f"./{up}/{target.name}")
        links.append(f"./{page}")
    meta = {
        "overview": sweep_overview(runs, links, root, n_resamples=options.n_resamples),
        "index": {"critics": [], "rows": [], "outcomes": []},
        "mode": "embedded",
        "chunk_size": 1,
        "data_dir": DATA_DIR,
        "live": options.live,
        "version": options.version,
        "parent": None,
    }
    view.write(target.name, page_html(meta))
    return view
