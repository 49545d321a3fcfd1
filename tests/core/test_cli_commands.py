"""One CLI: every command is a click command of ``modulo``, every --help exits 0, every error is printed one
way with the exit code of the README's table."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from modulo.cli import commands
from modulo.cli.console import EXIT_CODES
from modulo.cli.main import cli
from tests.cli_support import modulo

README = Path(__file__).resolve().parents[2] / "README.md"


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        out.append((*prefix, name))
        if isinstance(command, click.Group):
            out.extend(_command_paths(command, (*prefix, name)))
    return out


@pytest.mark.parametrize("path", [(), *_command_paths(cli)], ids=lambda p: " ".join(p) or "modulo")
def test_every_help_exits_0(path: tuple[str, ...]) -> None:
    shown = modulo(*path, "--help")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.strip() and not shown.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nope"], "No such command 'nope'"),
        (["report"], "Missing argument"),
        (["report", "x", "--resamples", "-1"], "--resamples"),
        (["show", "somewhere"], "Missing argument 'PROBLEM_ID'"),
        (["list", "widgets"], "unknown kind 'widgets'"),
        (["evaluate", "no_such_benchmark"], "unknown benchmark 'no_such_benchmark'"),
        (["synth", "synth/calendar", "--n", "two"], "'--n': 'two' is not a valid integer"),
        (["synth", "calendar", "--help-me"], "No such option '--help-me'"),
        (["critics", "audit", "synth/calendar", "--bogus"], "No such option '--bogus'"),
        (["bench", "synth/calendar", "oracle-script", "--out"], "'--out' requires an argument"),
        (["evaluate", "synth/calendar"], "benchmark 'synth/calendar' has no evaluate command"),
        (["fake-server", "--rate", "rate_limit"], "KEY=VALUE"),
        # critics extract composes its config through compose_config: modulo run's checks and errors
        (["critics", "extract", "synth/calender", "llm=scripted"], "Did you mean 'synth/calendar'"),
        (["critics", "extract", "synth/calendar", "llm.temprature=0"], "unknown configuration key 'llm.temprature'"),
        (["view", "x", "--chunk-size", "0"], "--chunk-size"),
    ],
)
def test_errors_are_printed_one_way_and_exit_2(args: list[str], says: str) -> None:
    failed = modulo(*args)
    assert failed.exit_code == 2, failed.output
    first = failed.stderr.splitlines()[0]
    assert first.startswith("error: ") and says in failed.stderr, failed.stderr
    assert "Traceback" not in failed.output and not failed.stdout


def test_the_readme_lists_the_exit_codes_the_cli_uses() -> None:
    section = README.read_text(encoding="utf-8").split("### Exit codes", 1)[1].split("\n#", 1)[0]
    listed = {int(code) for code in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert listed == set(EXIT_CODES)


def test_the_options_default_to_the_libraries_defaults() -> None:
    from modulo.reports.stats import DEFAULT_RESAMPLES, DEFAULT_SEED
    from modulo.view.build import DEFAULT_CHUNK_SIZE, DEFAULT_SPLIT_ABOVE
    from modulo.view.build import DEFAULT_RESAMPLES as VIEW_RESAMPLES

    assert (commands.REPORT_RESAMPLES, commands.REPORT_SEED) == (DEFAULT_RESAMPLES, DEFAULT_SEED)
    assert (commands.VIEW_SPLIT_ABOVE, commands.VIEW_CHUNK_SIZE, commands.VIEW_RESAMPLES) == (
        DEFAULT_SPLIT_ABOVE,
        DEFAULT_CHUNK_SIZE,
        VIEW_RESAMPLES,
    )


def test_no_module_keeps_an_argparse_entry_point() -> None:
    root = Path(__file__).resolve().parents[2]
    offenders = [
        str(p.relative_to(root))
        for folder in ("modulo", "critics")
        for p in (root / folder).rglob("*.py")
        if (folder == "modulo" and re.search(r"def \w+_main\(argv", p.read_text(encoding="utf-8")))
        or "argparse.ArgumentParser(" in p.read_text(encoding="utf-8")
    ]
    assert offenders == [], "use a click command (modulo/cli, or one a benchmark hook returns)"


@pytest.mark.parametrize(
    ("args", "shows"),
    [
        (["evaluate", "travelplanner"], [" evaluate travelplanner [OPTIONS] PLANS", "--per-plan"]),
        (["evaluate", "natural_plan/trip"], ["--predictions", "--iteration0"]),
        (["synth", "calendar"], [" synth synth/calendar [OPTIONS]", "--hidden-mode"]),
        (["critics", "audit", "synth/calendar"], ["--difficulty", "--critic"]),
        (["critics", "audit", "travelplanner"], ["--golden", "--mode"]),
        (["bench", "synth/calendar", "oracle-script"], ["--problems", "--updates"]),
    ],
)
def test_a_benchmark_command_shows_its_own_options(args: list[str], shows: list[str]) -> None:
    shown = modulo(*args, "--help")
    assert shown.exit_code == 0 and not shown.stderr, shown.output
    assert all(text in shown.stdout for text in shows), shown.stdout


def test_the_benchmark_level_help_lists_the_benchmarks_with_that_command() -> None:
    shown = modulo("synth", "--help")
    assert shown.exit_code == 0
    listed = shown.stdout.split("Benchmarks: ", 1)[1]
    assert "synth/calendar" in listed and "travelplanner" not in listed
