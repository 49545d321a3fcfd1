"""The ``modulo`` commands that read finished runs (report, show, export, track, view, dissect) and the
fake provider (``fake-server``). Each is a click command of the one CLI; a :class:`ModuloError` it
raises is printed by the CLI's one error printer (``modulo.cli.main``) and exits 2.

Heavy modules (pandas, matplotlib, the view builder) are imported inside the commands, so that
``modulo run`` and every ``--help`` start quickly; the option defaults below are the libraries'
defaults (``tests/core/test_cli_commands.py`` checks that they agree).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError, RunError

#: modulo.reports.stats.DEFAULT_RESAMPLES / DEFAULT_SEED, modulo.view.build.DEFAULT_*
REPORT_RESAMPLES, REPORT_SEED = 10_000, 0
VIEW_SPLIT_ABOVE, VIEW_CHUNK_SIZE, VIEW_RESAMPLES = 1000, 50, 2000

RUN_PATHS = click.argument("paths", nargs=-1, required=True, metavar="RUN_DIR|SWEEP_ROOT...", type=click.Path())


def _out(text: str) -> None:
    sys.stdout.write(text)


@click.command()
@RUN_PATHS
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="where to write report.md and the CSV/PNG files (default: the single path given, else the runs' common "
    "parent)",
)
@click.option(
    "--compare",
    is_flag=True,
    help="paired tests between every pair of runs over the problems they share (default: each run against the "
    "baseline when both ran the same problems)",
)
@click.option("--baseline", default=None, help="name or path of the baseline run (default: the first)")
@click.option("--resamples", type=click.IntRange(min=0), default=REPORT_RESAMPLES, show_default=True)
@click.option("--seed", type=int, default=REPORT_SEED, show_default=True, help="bootstrap seed")
@click.option(
    "--no-reevaluate",
    is_flag=True,
    help="report runs without evaluation.json as incomplete instead of re-scoring their best plans",
)
@click.option(
    "--no-budget-curve",
    is_flag=True,
    help="skip the pass-rate-against-budget curve (it evaluates the plans of every budget)",
)
@click.option("--no-figures", is_flag=True, help="write no PNG files")
@click.option("--no-cache", is_flag=True, help="recompute budget curves even when cached")
@click.option("--quiet", is_flag=True, help="print only where the report was written")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["report", "latex", "markdown", "csv"]),
    default="report",
    help="report (default): report.md, CSV tables and figures; latex|markdown|csv: only the paper table of each "
    "benchmark (95% CIs, k/n counts, best per column in bold), printed and written as paper_table1.*",
)
def report(
    paths: tuple[str, ...],
    out: Path | None,
    compare: bool,
    baseline: str | None,
    resamples: int,
    seed: int,
    no_reevaluate: bool,
    no_budget_curve: bool,
    no_figures: bool,
    no_cache: bool,
    quiet: bool,
    fmt: str,
) -> None:
    """Tables (Markdown + CSV), figures (PNG) and paired statistics for one or more runs.

    Each path is a run directory or any tree holding run directories (a sweep root).
    """
    from ..reports.report import ReportOptions, build_report, default_out_dir

    options = ReportOptions(
        out=out,
        compare=compare,
        baseline=baseline,
        n_resamples=resamples,
        seed=seed,
        reevaluate=not no_reevaluate,
        budget_curves=not no_budget_curve,
        figures=not no_figures,
        use_cache=not no_cache,
    )
    if fmt == "report":
        result = build_report(list(paths), options)
        _out(f"{result.out_dir / 'report.md'}\n" if quiet else result.text)
        return
    from ..reports.paper import paper_tables, write_paper_tables

    tables = paper_tables(list(paths), n_resamples=resamples, seed=seed, reevaluate=options.reevaluate)
    files = write_paper_tables(tables, fmt, out if out is not None else default_out_dir(list(paths)))
    _out("\n".join(str(f) for f in files) + "\n" if quiet else "\n".join(t.render(fmt) for t in tables))
    for table in tables:
        for note in table.notes:
            click.echo(f"note: {note}", err=True)


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("problem_id")
@click.option("--plain", is_flag=True, help="plain text (no colours or panels)")
@click.option("--prompts", is_flag=True, help="also print the full prompt of every iteration")
@click.option("--replies", is_flag=True, help="also print the raw model reply of every iteration")
def show(run_dir: Path, problem_id: str, plain: bool, prompts: bool, replies: bool) -> None:
    """The story of one problem in a run, iteration by iteration: outcome, critic flips, backprompts (full
    text), plan diffs, usage."""
    from ..reports.load import load_run
    from ..reports.show import build_story, render_plain, render_rich

    run = load_run(run_dir, only={problem_id})  # that one record, in full
    run.name = run.run_id
    story = build_story(run, problem_id, show_prompt=prompts, show_reply=replies)
    if plain or not sys.stdout.isatty():
        _out(render_plain(story))
    else:
        render_rich(story)


@click.command()
@RUN_PATHS
@click.option(
    "--format",
    "fmt",
    required=True,
    help="parquet, csv, jsonl, records (the run's records expanded, one per problem), or one of the "
    "benchmark's submission formats (then --out FILE, one run)",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="frames: the directory to write into (default: RUN_DIR/export for one path); submission: the file; "
    "records: the file, - for stdout (default: RUN_DIR/export/records.jsonl)",
)
@click.option("--grains", default=None, help="comma-separated frames to write (default: all of them)")
def export(paths: tuple[str, ...], fmt: str, out: Path | None, grains: str | None) -> None:
    """Write a run's or a sweep's data frames (runs, problems, iterations, verdicts, calls) as Parquet, CSV or
    JSON Lines, a run's records expanded (every text in place, as JSON lines for jq), or a benchmark's official
    submission file."""
    from ..analysis.export import ALL_GRAINS, FRAME_FORMATS, export_frames, export_submission
    from ..analysis.frames import load
    from ..analysis.records import skipped

    if fmt == "records":
        _export_records(paths, out)
        return
    results = load(*paths)
    if fmt in FRAME_FORMATS:
        if out is None:
            if len(paths) != 1:
                raise ConfigError("several paths given: say where to write with --out DIR")
            out = Path(paths[0]) / "export"
        chosen = [g.strip() for g in (grains or ",".join(ALL_GRAINS)).split(",") if g.strip()]
        for grain, path in export_frames(results, out, fmt, chosen).items():
            click.echo(f"{grain}: {len(results.frame(grain))} rows -> {path}")
        for note in results.notes:
            click.echo(f"note: {note}", err=True)
        _exit_if_skipped(sum(skipped(dict.fromkeys(m.notes)) for m in results.metas))  # a note per read
        return
    if len(results.metas) != 1:
        raise ConfigError(f"a submission file is written from one run; {len(results.metas)} runs found under {paths}")
    if out is None:
        raise ConfigError(f"--format {fmt} writes one file: give it with --out FILE")
    meta = results.metas[0]
    lines, total, delivered = export_submission(meta, fmt, out)
    click.echo(
        f"{fmt}: {lines} lines -> {out} ({meta.benchmark_name}/{meta.split}: {total} problems, "
        f"{delivered} with a plan from this run, {total - delivered} written as no plan)"
    )
    for note in dict.fromkeys(meta.notes):
        click.echo(f"note: {meta.name}: {note}", err=True)


def _export_records(paths: tuple[str, ...], out: Path | None) -> None:
    """``modulo export RUN_DIR --format records``: the run's records in the expanded form (record format 1)."""
    from ..analysis.export import export_records
    from ..analysis.records import skipped

    if len(paths) != 1:
        raise ConfigError(f"--format records writes the records of one run directory; {len(paths)} paths given")
    run = Path(paths[0])
    notes: list[str] = []
    if out is not None and str(out) == "-":
        written = export_records(run, sys.stdout, notes)
        where = "stdout"
    else:
        if not run.exists():
            raise RunError(f"{run} does not exist")
        target = out or (run if run.is_dir() else run.parent) / "export" / "records.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        # written beside the target and moved over it at the end: the target may be the records being read
        partial = target.with_name(f".{target.name}.partial")
        try:
            with partial.open("w", encoding="utf-8") as fh:
                written = export_records(run, fh, notes)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
        where = str(target)
    click.echo(f"records: {written} problem record(s), expanded -> {where}", err=where == "stdout")
    for note in notes:
        click.echo(f"note: {note}", err=True)
    _exit_if_skipped(skipped(notes))


def _exit_if_skipped(count: int) -> None:
    """Exit 1 (done, but not all well) when ``count`` records could not be read: what was read is written,
    and the output is not the whole run."""
    if count:
        click.echo(f"export: {count} record(s) could not be read and are not in the output (see the notes)", err=True)
        sys.exit(1)


def _key_values(option: str, items: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` items as a dict, each value read as JSON when it is JSON (else kept as text)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"takes KEY=VALUE, got {item!r}", param_hint=option)
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


@click.command()
@RUN_PATHS
@click.option("--tracker", "tracker_name", default="mlflow", show_default=True, help="a modulo.trackers plugin")
@click.option(
    "--arg",
    "args",
    multiple=True,
    metavar="KEY=VALUE",
    help="a tracker argument, e.g. --arg tracking_uri=sqlite:///mlflow.db --arg experiment=table1",
)
def track(paths: tuple[str, ...], tracker_name: str, args: tuple[str, ...]) -> None:
    """Log finished runs (every run under each path) to an experiment tracker, one tracker run each.

    Exit code 4 when a run could not be logged (the message says how to retry)."""
    from ..reports.load import find_runs
    from ..trackers import log_to_tracker, open_tracker

    tracker = open_tracker(tracker_name, _key_values("--arg", args))
    if tracker is None:
        raise ConfigError("--tracker none logs nothing; name a tracker (mlflow)")
    codes = [log_to_tracker(tracker, run) for run in find_runs(list(paths))]
    sys.exit(max(codes, default=0))


@click.command()
@click.argument("path", type=click.Path(path_type=Path), metavar="RUN_DIR|SWEEP_DIR")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="the HTML file (default: PATH/view.html)")
@click.option("--serve", is_flag=True, help="serve on 127.0.0.1 with live refresh instead of writing")
@click.option("--port", type=click.IntRange(min=0), default=8765, show_default=True, help="port for --serve (0: any)")
@click.option(
    "--split-above",
    type=click.IntRange(min=0),
    default=VIEW_SPLIT_ABOVE,
    show_default=True,
    help="above this many problems, problem details go to chunk files in view-data/ next to the page",
)
@click.option("--chunk-size", type=click.IntRange(min=1), default=VIEW_CHUNK_SIZE, show_default=True)
@click.option("--resamples", type=click.IntRange(min=0), default=VIEW_RESAMPLES, show_default=True)
def view(
    path: Path, out: Path | None, serve: bool, port: int, split_above: int, chunk_size: int, resamples: int
) -> None:
    """Write a run (or a sweep) as one self-contained HTML page that opens from disk with no network: overview,
    problem list, each problem's iterations, verdict matrix, backprompts, plan diffs and LLM calls. --serve
    serves it on 127.0.0.1 and refreshes it while the run writes."""
    from ..view import ViewOptions, build_view, serve_view

    options = ViewOptions(split_above=split_above, chunk_size=chunk_size, n_resamples=resamples)
    if serve:
        sys.exit(serve_view(path, options, port))
    built = build_view(path, out, options)
    extra = len(built.files) - 1
    click.echo(f"{built.page}" + (f" (and {extra} more file(s) it links to)" if extra else ""))


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--repeats", type=click.IntRange(min=0), default=3, show_default=True, help="fresh re-runs")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="dissect at most N failed problems")
@click.option("--ids", multiple=True, metavar="ID[,ID...]", help="dissect only these problems (commas, or repeat it)")
@click.option(
    "--temperature",
    type=float,
    default=None,
    help="temperature for every dissection run (default: the run's; at 0 a fresh draw may repeat the first)",
)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="where to write (default: RUN_DIR)")
@click.option("--seed", type=int, default=1, show_default=True, help="first seed of wording/structure variants")
@click.option("--concurrency", type=click.IntRange(min=1), default=None, help="problems at once (default: the run's)")
@click.option("--max-dollars", type=float, default=None, help="stop spending past this many dollars")
@click.option("--json", "as_json", is_flag=True, help="print the summary and every dissection as JSON")
@click.option("--quiet", is_flag=True, help="print only where dissect.md was written")
def dissect(
    run_dir: Path,
    repeats: int,
    limit: int | None,
    ids: tuple[str, ...],
    temperature: float | None,
    out: Path | None,
    seed: int,
    concurrency: int | None,
    max_dollars: float | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Label why the planner failed each failed problem of a run (PDoctor's cascade): re-run with fresh draws
    (probability), then with the constraint wording changed (wording), the topic changed (topic), and as an
    equivalent constraint set written as another problem (structure); constraint when none certifies. Writes
    dissect.jsonl, dissect-records.jsonl and dissect.md."""
    import asyncio

    from ..dissect import DISSECT_JSONL, DISSECT_MD, Dissection, DissectOptions, dissect_run

    options = DissectOptions(
        repeats=repeats,
        limit=limit,
        ids=[i.strip() for item in ids for i in item.split(",") if i.strip()] or None,
        temperature=temperature,
        out=out,
        seed=seed,
        concurrency=concurrency,
        max_dollars=max_dollars,
    )

    def progress(d: Dissection, i: int, total: int) -> None:
        if not (as_json or quiet):
            click.echo(f"[{i}/{total}] {d.problem_id}: {d.label}", err=True)

    result = asyncio.run(dissect_run(run_dir, options, progress=progress))
    if as_json:
        payload = {**result.summary, "dissections": [d.model_dump(mode="json") for d in result.dissections]}
        click.echo(json.dumps(payload, indent=1, default=str))
    elif quiet:
        click.echo(result.out_dir / DISSECT_MD)
    else:
        _out(result.markdown)
        click.echo(f"written: {result.out_dir / DISSECT_MD}, {result.out_dir / DISSECT_JSONL}")


class _FakeServerCommand(click.Command):
    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from ..testing.fake_server import FAULT_KINDS  # listed in the help only: not imported to run other commands

        with formatter.section("Faults"):
            formatter.write_dl(list(FAULT_KINDS.items()))


@click.command("fake-server", cls=_FakeServerCommand)
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", type=click.IntRange(min=0), default=0, help="port (default: a free one, printed at start)")
@click.option("--port-file", type=click.Path(path_type=Path), help="write the chosen port here once listening")
@click.option("--script", type=click.Path(path_type=Path), help="JSON: a list of replies or {problem_id: [...]}")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the fault draws and generated replies")
@click.option("--rate", "rates", multiple=True, metavar="FAULT=P", help="inject FAULT with probability P")
@click.option("--faults", default="", help="comma-separated faults for the first requests, in order ('ok' = none)")
@click.option("--latency", type=float, default=0.0, show_default=True, help="seconds added to every request")
@click.option("--slow", type=float, default=1.0, show_default=True, help="delay of the 'slow' fault (seconds)")
@click.option("--hang", type=float, default=30.0, show_default=True, help="how long the 'timeout' fault hangs")
@click.option("--retry-after", type=float, default=0.1, show_default=True, help="Retry-After of 'rate_limit'")
@click.option("--model", default="fake-model", show_default=True, help="model name reported when a request names none")
def fake_server(
    host: str,
    port: int,
    port_file: Path | None,
    script: Path | None,
    seed: int,
    rates: tuple[str, ...],
    faults: str,
    latency: float,
    slow: float,
    hang: float,
    retry_after: float,
    model: str,
) -> None:
    """A fault-injecting fake LLM provider (OpenAI chat completions and Anthropic messages) on 127.0.0.1,
    for tests and plugin authors. Serves until interrupted."""
    from ..testing.fake_server import FakeProvider, ReplySource

    fault_rates: dict[str, float] = {}
    for kind, value in _key_values("--rate", rates).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise click.BadParameter(f"wants FAULT=P with P a number, not {kind}={value!r}", param_hint="--rate")
        fault_rates[kind.strip()] = float(value)
    replies: ReplySource = None
    if script is not None:
        try:
            replies = json.loads(script.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the script {script}: {exc}") from None
        if not isinstance(replies, list | dict):
            raise ConfigError(f"{script}: a script is a JSON list or object")
    try:
        provider = FakeProvider(
            replies,
            faults=[f.strip() for f in faults.split(",") if f.strip()],
            fault_rates=fault_rates,
            seed=seed,
            latency_s=latency,
            slow_s=slow,
            hang_s=hang,
            retry_after_s=retry_after,
            model=model,
            host=host,
            port=port,
        ).start()
    except (OSError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    click.echo(
        f"fake provider listening on {provider.url} (OpenAI base_url {provider.openai_base_url}, Anthropic "
        f"base_url {provider.anthropic_base_url}; counters at {provider.url}/_stats)"
    )
    sys.stdout.flush()
    if port_file is not None:
        port_file.write_text(str(provider.port), encoding="utf-8")
    try:
        while not provider.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        provider.stop()


COMMANDS = (report, show, export, track, view, dissect, fake_server)
