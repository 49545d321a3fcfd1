"""Run a ``modulo`` command in process, as the console script would (its exit code, stdout and stderr)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner, Result

from modulo.cli.main import cli


def modulo(*args: object) -> Result:
    """``modulo ARGS...``: the Result's ``exit_code``, ``stdout`` and ``stderr`` (errors as the CLI prints them)."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def invoke(*args: object) -> tuple[int, str]:
    """``modulo ARGS...``: (exit code, output); an exception the CLI does not turn into an exit is raised."""
    result = modulo(*args)
    return result.exit_code, result.output


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``modulo ARGS...`` through ``cli.main``, its streams read with ``capsys``: (exit code, stdout, stderr)."""
    try:
        cli.main(list(args), prog_name="modulo", standalone_mode=False)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def run_command(command: click.Command, *args: object) -> tuple[int, str]:
    """A benchmark's click command (what its ``evaluate_command``/``synth_command``/... hook returns) run on
    ARGS in process: (its return value as the exit code, stdout). Usage errors (``click.UsageError``) and bad
    input (a ``ModuloError``) are raised, as the ``modulo`` CLI receives them."""
    result = CliRunner().invoke(command, [str(a) for a in args], standalone_mode=False, catch_exceptions=False)
    return int(result.return_value or 0), result.stdout
