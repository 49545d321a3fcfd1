"""Installing a test plugin package for real (pip into a target directory put on a subprocess's path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def install(package: Path, target: Path) -> dict[str, str]:
    """``pip install`` ``package`` into ``target``; the environment for a subprocess that sees it."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(package),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.fail(f"could not install {package.name}: {proc.stderr[-2000:]}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "200"
    return env


def modulo(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``modulo ARGS`` in a subprocess with ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "modulo.cli.main", *args], capture_output=True, text=True, env=env, timeout=300, cwd=cwd
    )
