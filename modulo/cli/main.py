"""``modulo``: the command-line entry point, one click group.

Subcommands that take Hydra overrides (``run``, ``check``) hand their arguments to Hydra untouched;
the others are plain click commands (those that read finished runs are in :mod:`.commands`); a
benchmark's own commands (``evaluate``, ``synth``, ``critics audit``, ``bench``) are click commands
its hooks return, run as ``modulo evaluate BENCHMARK ...`` (:func:`_dispatch`).

Errors are printed one way, by :func:`fail`: a usage error (of a command here or of a benchmark's
command) or a :class:`ModuloError` raised by any command print ``error: KIND: message`` on stderr and
exit with the code of :data:`modulo.cli.console.EXIT_CODES`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from .. import components
from ..benchmark import Benchmark
from ..critic import critic_meta
from ..errors import ModuloError, PluginLoadError
from .commands import COMMANDS

PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


def fail(exc: BaseException, code: int = 2) -> NoReturn:
    """The one error printer: ``error: KIND: message`` on stderr, then exit with ``code``."""
    from .console import error

    error(exc)
    if isinstance(exc, click.UsageError) and exc.ctx is not None:
        click.echo(f"(see: {exc.ctx.command_path} --help)", err=True)
    sys.exit(code)


class ModuloGroup(click.Group):
    """The ``modulo`` group: every error a command lets out is printed by :func:`fail`."""

    def main(  # type: ignore[override]
        self, args: Any = None, prog_name: str | None = None, standalone_mode: bool = True, **kwargs: Any
    ) -> Any:
        try:
            return super().main(args, prog_name, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        except click.exceptions.Abort:
            click.echo("Aborted.", err=True)
            code = 130
        except click.ClickException as exc:  # usage errors, bad option values
            fail(exc, exc.exit_code)
        except ModuloError as exc:
            fail(exc)
        if standalone_mode or code:
            sys.exit(code)
        return code


@click.group(cls=ModuloGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="modulo")
def cli() -> None:
    """modulo: LLM-Modulo planning. Generate, reformulate, critique, backprompt, certify.

    \b
    Examples:
      modulo run benchmark=travelplanner generator=greedy
      modulo run benchmark=travelplanner llm=openai llm.model=gpt-4-turbo critics=[format,budget]
      modulo run -m critics=all,common,hard,json generator=greedy
      modulo check llm=openai             (bind everything, make no call)
      modulo critics list
    """


def _hydra(ctx: click.Context, check: bool) -> None:
    from .hydra_app import run_hydra

    args = list(ctx.args)
    if args and args[0] in ("-h", "--help") and len(args) == 1:
        click.echo(ctx.get_help())
        click.echo("\nHydra's own help (config groups and options): modulo run --hydra-help / modulo run --cfg job")
        return
    run_hydra(args, check=check)


@cli.command(context_settings=PASS_THROUGH)
@click.pass_context
def run(ctx: click.Context) -> None:
    """Run the loop: modulo run [-m] [KEY=VALUE ...] (Hydra overrides; -m sweeps)."""
    _hydra(ctx, check=False)


@cli.command(context_settings=PASS_THROUGH)
@click.pass_context
def check(ctx: click.Context) -> None:
    """Resolve and bind every component, load the problems, make no LLM call."""
    _hydra(ctx, check=True)


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("overrides", nargs=-1)
def resume(run_dir: Path, overrides: tuple[str, ...]) -> None:
    """Continue a stopped run in RUN_DIR with the overrides it was started with."""
    from .hydra_app import run_hydra

    saved = run_dir / ".hydra" / "overrides.yaml"
    if not saved.exists() and (run_dir / "multirun.yaml").exists():
        from .hydra_app import sweep_command

        again = sweep_command(run_dir) or f"modulo run -m ... hydra.sweep.dir={run_dir}"
        raise ModuloError(
            f"{run_dir} is a sweep, not a run: resume one of its jobs (modulo resume {run_dir / '0'}), or "
            f"finish every job with: {again}"
        )
    if not saved.exists():
        raise ModuloError(f"{run_dir} has no .hydra/overrides.yaml: run again with modulo run run.dir={run_dir} ...")
    import yaml

    try:
        loaded = yaml.safe_load(saved.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        loaded = exc
    if not isinstance(loaded, list):  # an empty or damaged file must not resume with the defaults
        what = (
            "is empty"
            if loaded is None
            else f"is damaged ({loaded})"
            if isinstance(loaded, Exception)
            else (f"holds a {type(loaded).__name__}, not a list of overrides")
        )
        raise ModuloError(
            f"{saved} {what}, so the run's overrides are unknown; resuming with the defaults would mix "
            f"another configuration in. Run again with modulo run run.dir={run_dir} and the original "
            f"overrides (see {run_dir / 'config.yaml'})"
        )
    old = [str(o) for o in loaded if not str(o).startswith(("run.dir=", "hydra."))]
    run_hydra([*old, *overrides, f"run.dir={run_dir}", f"hydra.run.dir={run_dir}"])


# -- listing -------------------------------------------------------------------------------------
KIND_ALIASES = {
    "critic": "critics",
    "critics": "critics",
    "backprompt": "backprompts",
    "backprompts": "backprompts",
    "strategies": "backprompts",
    "generator": "generators",
    "generators": "generators",
    "llm": "llms",
    "llms": "llms",
    "backends": "llms",
    "benchmark": "benchmarks",
    "benchmarks": "benchmarks",
    "user": "users",
    "users": "users",
    "tracker": "trackers",
    "trackers": "trackers",
}


def _describe(kind: str, obj: Any) -> tuple[str, str]:
    if kind == "critics":
        meta = critic_meta(obj)
        scope = ", ".join(meta["benchmarks"]) or "any"
        return meta["group"], f"{meta['description']} [{scope}]"
    doc = (getattr(obj, "description", "") or (obj.__doc__ or "")).strip().splitlines()
    return "", doc[0] if doc else ""


def list_kind(kind: str, names_only: bool, benchmark: str | None = None) -> None:
    key = KIND_ALIASES.get(kind)
    if key is None:
        kinds = "critics, backprompts, generators, llms, benchmarks, trackers, users"
        raise ModuloError(f"unknown kind {kind!r}; kinds: {kinds}")
    registry = components.REGISTRIES[key]
    entries = registry.entries()
    if names_only:
        for name in sorted(entries):
            click.echo(name)
        return
    from rich.table import Table

    from .console import console

    table = Table(title=f"modulo {key}")
    table.add_column("name")
    if key == "critics":
        table.add_column("group")
    table.add_column("description")
    if key == "critics":
        table.add_column("source")
    table.add_column("from")
    for name in sorted(entries):
        info = entries[name]
        origin = "built-in" if info.builtin else (info.distribution or "in process")
        try:
            obj = registry.get(name)
        except PluginLoadError as exc:
            row = (
                [name, "?", f"[red]failed to load: {exc}[/]", "?", origin]
                if key == "critics"
                else [name, f"[red]{exc}[/]", origin]
            )
            table.add_row(*row)
            continue
        group, desc = _describe(key, obj)
        if benchmark and key == "critics":
            scope = critic_meta(obj)["benchmarks"]
            if scope and benchmark not in scope:
                continue
        if key == "critics":
            meta = critic_meta(obj)
            source = str(meta["source"]) + (" (untrusted: sandboxed)" if meta["untrusted"] else "")
            table.add_row(name, group, desc, source, origin)
        else:
            table.add_row(name, desc, origin)
    console.print(table)
    if key == "benchmarks":
        from ..resources import resource_dir
        from .hydra_app import group_options

        choices = [c for c in group_options(resource_dir("conf"), "benchmark") if c != "custom"]
        console.print(
            "benchmark= choices with config defaults (conf/ and the packages' own config groups): "
            + ", ".join(choices)
            + "; any registered benchmark without one: benchmark=NAME (run on benchmark=custom's node)",
            soft_wrap=True,
        )


@cli.command("list")
@click.argument("kind")
@click.option("--names", "names_only", is_flag=True, help="names only (imports no plugin code)")
@click.option("--benchmark", default=None, help="critics: only those that apply to this benchmark")
def list_cmd(kind: str, names_only: bool, benchmark: str | None) -> None:
    """List registered components: critics, backprompts, generators, llms, benchmarks, trackers, users."""
    list_kind(kind, names_only, benchmark)


@cli.group()
def critics() -> None:
    """Critics: list them, audit them, extract them with an LLM."""


@critics.command("list")
@click.option("--names", "names_only", is_flag=True, help="names only (imports no plugin code)")
@click.option("--benchmark", default=None, help="only critics that apply to this benchmark")
def critics_list(names_only: bool, benchmark: str | None) -> None:
    """Names, groups and one-line descriptions of every registered critic."""
    list_kind("critics", names_only, benchmark)


def _add_extract() -> None:
    from .extract import critics_extract

    critics.add_command(critics_extract)


_add_extract()


@critics.command("audit", context_settings=PASS_THROUGH)
@click.argument("benchmark")
@click.option("--data-dir", default=None, help="benchmark data directory (default: $MODULO_DATA_DIR)")
@click.pass_context
def critics_audit(ctx: click.Context, benchmark: str, data_dir: str | None) -> None:
    """Compare a benchmark's critics with its reference: modulo critics audit BENCHMARK [ARGS...] (see its --help)."""
    _dispatch(ctx, "audit_command", benchmark, data_dir)


# -- benchmarks: every benchmark command is a hook on the benchmark ---------------------------------
def _benchmark(name: str, data_dir: str | None) -> Benchmark:
    from ..binding import bind_benchmark

    return bind_benchmark(name, data_dir=data_dir)


def _benchmark_with(hook: str, name: str) -> str:
    """``name``, or the one registered benchmark called ``.../name`` that has ``hook`` (``modulo synth calendar``)."""
    registry = components.benchmarks
    if name in registry:
        return name
    found = []
    for full in registry.names():
        if not full.endswith("/" + name):
            continue
        try:
            if registry.get(full).has_hook(hook):
                found.append(full)
        except ModuloError:
            continue
    if len(found) > 1:
        raise ModuloError(f"{name!r} is ambiguous: say which of {', '.join(found)}")
    return found[0] if found else name


#: each benchmark command hook, as a benchmark without it is told
HOOKS = {"evaluate_command": "evaluate command", "synth_command": "synth command", "audit_command": "critic audit"}


def _own_help(benchmark: str, hook: str | None = None) -> bool:
    """``modulo evaluate --help``: the arguments pass through to the benchmark, so help is ours to give."""
    if benchmark not in ("-h", "--help"):
        return False
    click.echo(click.get_current_context().get_help())
    names = components.benchmarks.names()
    if hook is not None:
        names = [n for n in names if _has_hook(n, hook)]
    click.echo(f"\nBenchmarks: {', '.join(names) or 'none'} (see: ... BENCHMARK --help)")
    return True


def _has_hook(name: str, hook: str) -> bool:
    try:
        return bool(components.benchmarks.get(name).has_hook(hook))
    except ModuloError:
        return False


def _invoke(ctx: click.Context, command: click.Command, info_name: str, args: list[str]) -> NoReturn:
    """Run a benchmark's click command as ``modulo ... INFO_NAME`` (its usage and errors say so) and exit
    with the callback's return value (None: 0)."""
    with command.make_context(f"{ctx.command_path} {info_name}", args, help_option_names=["-h", "--help"]) as sub:
        code = command.invoke(sub)
    sys.exit(code if isinstance(code, int) else 0)


def _dispatch(ctx: click.Context, hook: str, name: str, data_dir: str | None) -> None:
    """Run the click command the benchmark's hook ``hook`` (``evaluate_command``, ...) returns with the
    arguments after the benchmark's name, and exit with its code."""
    if _own_help(name, hook):
        return
    full = _benchmark_with(hook, name)
    command = getattr(_benchmark(full, data_dir), hook)()
    if command is None:
        raise ModuloError(f"benchmark {full!r} has no {HOOKS[hook]}")
    _invoke(ctx, command, full, list(ctx.args))


@cli.command(context_settings=PASS_THROUGH)
@click.argument("benchmark")
@click.option("--data-dir", default=None, help="benchmark data directory (default: $MODULO_DATA_DIR)")
@click.pass_context
def evaluate(ctx: click.Context, benchmark: str, data_dir: str | None) -> None:
    """Score plans with a benchmark's evaluator: modulo evaluate BENCHMARK [ARGS...] (see BENCHMARK --help)."""
    _dispatch(ctx, "evaluate_command", benchmark, data_dir)


@cli.command(context_settings=PASS_THROUGH)
@click.argument("benchmark")
@click.pass_context
def synth(ctx: click.Context, benchmark: str) -> None:
    """Write a fixed set of generated problems: modulo synth BENCHMARK [ARGS...] (e.g. calendar --n 50 --out F)."""
    _dispatch(ctx, "synth_command", benchmark, None)


@cli.command(context_settings=PASS_THROUGH)
@click.argument("benchmark")
@click.argument("command", required=False)
@click.option("--data-dir", default=None, help="benchmark data directory (default: $MODULO_DATA_DIR)")
@click.pass_context
def bench(ctx: click.Context, benchmark: str, command: str | None, data_dir: str | None) -> None:
    """A benchmark's own subcommands: modulo bench BENCHMARK COMMAND [ARGS...] (no COMMAND: list them)."""
    if _own_help(benchmark):
        return
    commands = {c.name: c for c in _benchmark(benchmark, data_dir).commands()}
    if command is None:
        click.echo("\n".join(sorted(n for n in commands if n)) or f"benchmark {benchmark!r} has no commands of its own")
        return
    if command in ("-h", "--help"):
        for name, found in sorted(commands.items()):
            click.echo(f"{name}: {found.get_short_help_str(100)}")
        return
    if command not in commands:
        known = ", ".join(sorted(n for n in commands if n)) or "none"
        raise ModuloError(f"benchmark {benchmark!r} has no command {command!r} (its commands: {known})")
    _invoke(ctx, commands[command], f"{benchmark} {command}", list(ctx.args))


@cli.command("tools")
@click.argument("benchmark")
@click.argument("name", required=False)
@click.argument("args", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="the result as JSON: rows with the benchmark's column names")
@click.option("--data-dir", default=None, help="benchmark data directory (default: $MODULO_DATA_DIR)")
def tools_cmd(benchmark: str, name: str | None, args: tuple[str, ...], as_json: bool, data_dir: str | None) -> None:
    """Call one of a benchmark's tools: modulo tools BENCHMARK NAME ARG... [--json] (no NAME: list them).

    \b
    Example:
      modulo tools travelplanner FlightSearch Sarasota Chicago 2022-03-22 --json
    Exit code 0 when the tool answered (rows, or its "nothing matches" message), 1 when the call was
    invalid for the tool (an unknown city, a malformed date), 2 for an unknown tool or a wrong argument count.
    """
    toolbox = _benchmark(benchmark, data_dir).tools()
    if toolbox is None:
        raise ModuloError(f"benchmark {benchmark!r} offers no tools")
    if name is None:
        for spec in toolbox.specs():
            alias = f" (alias {', '.join(spec.aliases)})" if spec.aliases else ""
            click.echo(f"{spec.signature()}{alias}: {spec.description}")
        return
    result = toolbox.call(name, list(args))
    if as_json:
        click.echo(json.dumps(result.to_json(), ensure_ascii=False, default=str))
    else:
        click.echo(result.text)
        click.echo(f"({len(result.rows or [])} row(s), {result.micros:.0f} µs)", err=True)
    sys.exit(0 if result.ok else 1)


@cli.group()
def data() -> None:
    """Benchmark data: check what is present, download what is missing."""


def _data_action(benchmark: str, data_dir: str | None, action: str) -> None:
    bench = _benchmark(benchmark, data_dir)
    report = bench.data_check() if action == "check" else bench.data_download()
    for line in report.lines:
        click.echo(line)
    sys.exit(0 if report.ok else 1)


@data.command("check")
@click.argument("benchmark")
@click.option("--data-dir", default=None)
def data_check(benchmark: str, data_dir: str | None) -> None:
    """What data is present, what is missing, and what that rules out."""
    _data_action(benchmark, data_dir, "check")


@data.command("download")
@click.argument("benchmark")
@click.option("--data-dir", default=None)
def data_download(benchmark: str, data_dir: str | None) -> None:
    """Fetch and verify a benchmark's official files (needs a network)."""
    _data_action(benchmark, data_dir, "download")


# -- runs and tools that read them ----------------------------------------------------------------
for _command in COMMANDS:
    cli.add_command(_command)


def main() -> None:
    from .console import Interrupted

    try:
        cli(prog_name="modulo")
    except Interrupted as exc:  # records are fsync'ed and the message printed: leave now, not seconds later
        import logging
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(exc.code if isinstance(exc.code, int) else 1)


if __name__ == "__main__":
    main()
