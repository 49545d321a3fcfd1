"""Console output for the command line: progress, the result table, errors."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..build import Session, build_session
from ..config import ModuloConfig
from ..redact import RedactingStream
from ..runner import RunResult, RunState, run_session
from ..runs import RunDir
from ..terminal import safe_text


def _width() -> int | None:
    """Terminal width on a terminal; otherwise $COLUMNS or 140, so piped tables are not squeezed."""
    if sys.stdout.isatty():
        return None
    try:
        return int(os.environ.get("COLUMNS", "140"))
    except ValueError:
        return 140


# every secret known to the process is redacted from what the console writes (see modulo.redact)
console = Console(file=RedactingStream(lambda: sys.stdout), highlight=False, width=_width())  # type: ignore[arg-type]
err_console = Console(file=RedactingStream(lambda: sys.stderr), highlight=False, width=_width())  # type: ignore[arg-type]


def error(exc: BaseException) -> None:
    # the message is text, not markup (an install command such as pip install ".[local]" must survive),
    # with terminal control characters escaped
    # click's usage errors say which option or argument (format_message); everything else says its kind
    text = f"{exc.format_message()}" if isinstance(exc, click.ClickException) else f"{type(exc).__name__}: {exc}"
    message = escape(safe_text(text))
    err_console.print(f"[bold red]error:[/] {message}", markup=True, soft_wrap=True)


#: the exit codes of every ``modulo`` command (README, "Exit codes")
EXIT_CODES: dict[int, str] = {
    0: "done",
    1: "done, but not all well: some problems ended in error (run), critics disagree with the reference "
    "(critics audit), a tool call was invalid (tools), data is missing (data check), some records could not be "
    "read (export: the rest is written), a sweep job failed",
    2: "nothing ran: a usage error, a configuration typo, an unknown name, unreadable input or data, a "
    "component that cannot start",
    3: "the run was stopped (metacontroller.on_critic_error=stop)",
    4: "the run finished but its tracker could not log it (modulo track logs it later)",
    130: "interrupted by Ctrl-C (finished problems are recorded; modulo resume RUN_DIR)",
    143: "terminated by SIGTERM (as Ctrl-C)",
}
EXIT_ERRORS, EXIT_NOT_STARTED, EXIT_STOPPED = 1, 2, 3


def print_check(session: Session) -> None:
    cfg = session.config
    t = Table(title="modulo check: every component resolved and bound", show_header=False)
    t.add_row("benchmark", f"{session.benchmark.name} / {session.split} ({len(session.problems)} problems)")
    t.add_row("generator", f"{cfg.generator.name} (prompt: {session.loop.generator.prompt_role})")
    t.add_row("reformulator", session.loop.reformulator.mode)
    t.add_row("llm", f"{cfg.llm.name} {cfg.llm.model}".strip() if session.llm is not None else "(none needed)")
    t.add_row("critics", ", ".join(c.name for c in session.critics) or "(none)")
    t.add_row("critic options", f"mode={cfg.critic_options.mode} feedback={session.feedback}")
    sandbox = session.info.sandbox
    sandboxed = sandbox.critics if sandbox is not None else []
    t.add_row("sandboxed critics", ", ".join(sandboxed) or "(none: every critic runs in-process)")
    t.add_row("backprompt", f"{cfg.backprompt.name} {cfg.backprompt.args or ''}".strip())
    t.add_row("budget", f"{cfg.metacontroller.max_iterations} iterations")
    t.add_row("user", user_line(session))
    t.add_row("templates", ", ".join(session.loop.templates().values()))
    t.add_row("tracker", cfg.tracker.name or "none")
    console.print(t)


def user_line(session: Session) -> str:
    """The user in the loop as ``modulo check`` shows it: who answers, how questions count, the updates."""
    user = session.info.user
    loop = session.loop
    parts = [user.name or "none"]
    if user.file:
        parts.append(f"file {user.file}")
    if loop.user is not None and loop.user.needs_llm:
        parts.append(f"on model {user.llm_model or '?'}")
    if loop.user is not None or user.abstain:
        questions = "a question costs an iteration" if loop.settings.question_costs_iteration else "questions are free"
        limit = loop.settings.max_questions
        parts.append(questions + (f", at most {limit} answered" if limit is not None else ""))
    if loop.settings.updates:
        parts.append(
            f"{len(loop.settings.updates)} update(s) after turn(s) "
            + ", ".join(str(u.after) for u in loop.settings.updates)
        )
    if loop.settings.abstain:
        parts.append("the planner is told it may abstain")
    return "; ".join(parts)


class _Bar:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stdout.isatty()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task: Any = None

    def __call__(self, state: RunState) -> None:
        status = (
            f"certified {state.certified}  failed {state.failed}  "
            f"${state.usage.cost_usd:.4f}  calls {state.usage.calls}"
        )
        if not self.enabled:
            return
        if self.task is None:
            self.progress.start()
            self.task = self.progress.add_task("problems", total=state.total, status=status)
        self.progress.update(self.task, completed=state.done, status=status)

    def stop(self) -> None:
        if self.task is not None:
            self.progress.stop()


def run_and_report(
    cfg: ModuloConfig, run_dir: Path, config_yaml: str, extra_files: dict[str, str] | None = None
) -> int:
    """Bind, run into ``run_dir`` (resuming), print the result table. Returns an exit code.
    ``extra_files`` (Hydra's saved config) are written only once the run directory accepts the run."""
    session = build_session(cfg)
    bar = _Bar(cfg.run.progress)
    rd = RunDir(run_dir, extra_files=extra_files)
    received: list[str] = []

    async def until_signal() -> RunResult:
        # SIGTERM cancels the run like Ctrl-C does (asyncio.run turns Ctrl-C into KeyboardInterrupt)
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None

        def on_term() -> None:
            received.append("SIGTERM")
            task.cancel()

        loop.add_signal_handler(signal.SIGTERM, on_term)
        try:
            return await run_session(session, rd, config_yaml=config_yaml, progress=bar)
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        result = asyncio.run(until_signal())
    except (KeyboardInterrupt, asyncio.CancelledError):
        bar.stop()
        interrupted(run_dir, received[0] if received else "SIGINT")
    finally:
        bar.stop()
    print_result(session, result)  # a run with errored problems says so in its first line
    if cfg.run.report:
        write_report(run_dir)
    if result.aborted is not None:
        return EXIT_STOPPED
    return EXIT_ERRORS if result.summary["errors"]["count"] else 0


class Interrupted(SystemExit):
    """The run was stopped by Ctrl-C (130) or SIGTERM (143); records are on disk, the message printed.
    The command-line entry point exits at once on it, skipping the interpreter's slow teardown."""


def interrupted(run_dir: Path, how: str) -> NoReturn:
    """Ctrl-C or SIGTERM: every finished problem is on disk; say so, say how to resume, exit 130 / 143."""
    from ..runs import latest_records

    try:
        kept = f"{len(latest_records(run_dir))} finished problem(s) are recorded"
    except Exception:  # the message must come out whatever the state of the records
        kept = "finished problems are recorded"
    what = "interrupted (Ctrl-C)" if how == "SIGINT" else f"stopped by {how}"
    where = escape(str(run_dir))
    message = f"[bold yellow]{what}:[/] {kept} in {where}; resume with:\n  modulo resume {where}"
    from .hydra_app import current_sweep_dir, sweep_command

    sweep = current_sweep_dir()
    again = sweep_command(sweep) if sweep is not None else None
    if again is not None:  # the sweep's later jobs never started: resuming this job alone leaves them out
        message += f"\nor finish the whole sweep (this job and the ones not started) with:\n  {escape(again)}"
    err_console.print(message, soft_wrap=True)
    raise Interrupted(130 if how == "SIGINT" else 143)


def write_report(run_dir: Path) -> None:
    """The run's report and figures, in the run directory. A failure here never fails the run."""
    from ..reports import ReportOptions, build_report

    try:
        report = build_report([run_dir], ReportOptions(out=run_dir, n_resamples=2000))
    except Exception as exc:  # the records are safe on disk; `modulo report` can be run again later
        err_console.print(f"[yellow]report not written:[/] {type(exc).__name__}: {exc}", soft_wrap=True)
        return
    figures = [f.name for f in report.files if f.suffix == ".png"]
    console.print(
        f"report: {run_dir / 'report.md'}" + (f"; figures: {', '.join(figures)}" if figures else ""), soft_wrap=True
    )


def _published_left_out(session: Session, scored: int) -> str | None:
    """Why a benchmark's published figures (about its whole split, as published) do not belong beside this
    run's table, or None when they do."""
    cfg = session.config
    if cfg.user.updates or cfg.user.name is not None:
        return "this run changes the problems mid-loop (user, user.updates)"
    total = len(session.benchmark.load(session.split))
    if cfg.benchmark.ids or scored != total:
        return f"they are over the whole split ({total:,} problems), this run's figures over {scored:,} of them"
    return None


def budget_rows(session: Session, result: RunResult) -> list[tuple[str, dict[str, float]]]:
    """The run's budget rows (``RunResult.budget_metrics``), labelled: Direct and LLM-Modulo at budget k."""
    rows = result.budget_metrics
    if len(rows) == 1:
        return [(session.config.labels.get("method") or session.config.generator.name, rows[0][1])]
    return [("first plan (no backprompt)" if k == 1 else f"LLM-Modulo, budget {k}", m) for k, m in rows]


def error_banner(summary: dict[str, Any]) -> str | None:
    """``"3 of 8 problems ended in error; first (p1): ConnectionError: ..."`` or None when none did."""
    errors = summary.get("errors") or {}
    count = int(errors.get("count") or 0)
    if not count:
        return None
    return (
        f"{count} of {summary.get('n_problems', '?')} problems ended in error; first ({errors.get('problem_id')}): "
        f"{errors.get('class')}: {errors.get('message')}"
    )


def critic_error_banner(summary: dict[str, Any]) -> str | None:
    """``"12 critic verdicts were errors (mylab/x 9, budget 3): ..."`` or None when no critic errored."""
    errors = summary.get("critic_errors") or {}
    total = sum(errors.values())
    if not total:
        return None
    each = ", ".join(f"{name} {count}" for name, count in sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])))
    return (
        f"{total} critic verdict(s) were errors ({each}): a plan they judged was not certified; "
        "`modulo show RUN_DIR PROBLEM_ID` says what each one raised"
    )


def print_result(session: Session, result: RunResult) -> None:
    s = result.summary
    counts = s["counts"]
    n = s["n_problems"]
    banner = error_banner(s)
    if banner:
        err_console.print(f"[bold red]errors:[/] {escape(safe_text(banner))}", soft_wrap=True, markup=True)
    critic_banner = critic_error_banner(s)
    if critic_banner:
        err_console.print(f"[bold yellow]critic errors:[/] {escape(safe_text(critic_banner))}", soft_wrap=True)
    console.print(
        f"\n[bold]run[/] {result.run_dir.path}  ({result.state.resumed} resumed, "
        f"{s['iterations']} iterations, {s['seconds']:.1f}s)",
        soft_wrap=True,
    )
    outcome = Table(title=f"{session.benchmark.name}/{session.split}: outcomes of {n} problems")
    columns = ["certified", "exhausted", "failed", "unsolvable", "error", "skipped"]
    if counts.get("abstained"):  # the planner declined (a user-in-the-loop run, an unsolvable split)
        columns.insert(4, "abstained")
    for key in columns:
        outcome.add_column(key, justify="right")
    outcome.add_row(*(str(counts.get(k, 0)) for k in columns))
    console.print(outcome)
    rows = budget_rows(session, result)
    if rows:
        specs = session.benchmark.metrics
        keys = ["certified"] + ([m.key for m in specs] or sorted(k for k in rows[0][1] if k != "certified"))
        labels = {"certified": "Certified", **{m.key: m.label for m in specs}}
        kinds = {m.key: m.kind for m in specs}  # counts and values print as they are, rates in percent
        scored = s.get("evaluated", n)
        errored, skipped = counts.get("error", 0), counts.get("skipped", 0)
        left = [f"{errored} errored", f"{skipped} skipped (never started)", f"{n - scored - errored - skipped} not run"]
        table = Table(
            title=f"{session.benchmark.name}: certified by the critics, and the evaluator's metrics (rates in %), "
            f"on the same {scored} problems"
            + (f" ({', '.join(x for x in left if not x.startswith('0 '))} left out)" if scored != n else "")
        )
        table.add_column("method")
        for k in keys:
            table.add_column(labels.get(k, k), justify="right")
        for label, metrics in rows:
            table.add_row(label, *(_pct(metrics.get(k), kinds.get(k, "rate")) for k in keys))
        # published figures are about the whole split's original problems: beside a run of other problems (a
        # user in the loop or updates mid-loop change the task; a limit or ids take part of the split) they
        # would stand in a table "on the same N problems" that they are not about
        published = session.benchmark.published_rows(session.split, session.config.generator.name)
        left_out = _published_left_out(session, scored) if published else None
        for label, metrics in [] if left_out else published:
            table.add_row(f"{label} (published)", *(_pct(metrics.get(k), kinds.get(k, "rate")) for k in keys))
        console.print(table)
        if left_out:
            console.print(f"published figures left out: {left_out}")
    derived = session.problems.derived
    if derived:
        shown = ", ".join(derived[:8]) + (f" and {len(derived) - 8} more" if len(derived) > 8 else "")
        console.print(
            f"[yellow]derived data:[/] {len(derived)} of {n} problems carry data derived by modulo, not official "
            f"({shown}); run.json lists them under 'derived_problems'",
            soft_wrap=True,
        )
    u = s["usage"]
    unpriced = s.get("unpriced_models") or []
    console.print(
        f"LLM calls {u['calls']} (cached {u['cached_calls']}, failed attempts {u['failed_calls']}), "
        f"tokens {u['input_tokens']}+{u['output_tokens']}, cost "
        + (f"${u['cost_usd']:.4f}" if not unpriced else f"unknown (at least ${u['cost_usd']:.4f})")
        + (f" (cache saved ${u['cached_cost_usd']:.4f})" if u["cached_cost_usd"] else ""),
        soft_wrap=True,
    )
    if unpriced:
        console.print(
            f"[yellow]cost:[/] no price known for {', '.join(repr(m) for m in unpriced)}: its calls count as $0; "
            "set llm.price_input_per_mtok and llm.price_output_per_mtok (USD per million tokens)",
            soft_wrap=True,
        )
    if result.aborted:
        err_console.print(f"[bold red]run stopped:[/] {result.aborted}")


def _pct(value: float | None, kind: str = "rate") -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}" if kind == "rate" else f"{value:g}"
