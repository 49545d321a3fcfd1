"""Run a ``modulo`` command in process, as the console script would (its exit code, stdout and stderr)."""

from __future__ import annotations

from click.testing import CliRunner, Result

from modulo.cli.main import cli


def modulo(*args: object) -> Result:
    """``modulo ARGS...``: the Result's ``exit_code``, ``stdout`` and ``stderr`` (errors as the CLI prints them)."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
