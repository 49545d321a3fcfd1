"""API keys come from the environment only, and a whole run never writes or prints one.

A real ``modulo run`` process gets a recognisable fake key in ``$OPENAI_API_KEY`` and runs against
the fake provider, which also meets faults, among them a 401 whose message echoes the key it was
sent (as a careless server might). Every file the run (report included), its resume and ``modulo
show`` write (run directory, Hydra's logs and saved config, response cache, home and temp folders,
all inside the test's folder) and everything they print is then searched for the key, and for a
fragment of it. A key put on the command line instead is refused before anything is written.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from modulo.testing.drills import Launcher, cli_command, records

from .conftest import DrillFactory

KEY = "sk-modulo-reliability-SECRET-5e1f0c2b9a7d"
NEEDLES = [KEY, KEY[-14:], KEY[3:20]]


def isolated_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    for name in ("home", "xdg-cache", "tmp", "default-cache"):
        (tmp / name).mkdir(exist_ok=True)
    env.update(
        HOME=str(tmp / "home"),
        XDG_CACHE_HOME=str(tmp / "xdg-cache"),
        TMPDIR=str(tmp / "tmp"),
        MODULO_CACHE_DIR=str(tmp / "default-cache"),
        **extra,
    )
    return env


def leaks(root: Path, outputs: list[str]) -> list[str]:
    found = [f"console output {i}" for i, out in enumerate(outputs) for n in NEEDLES if n in out]
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [str(path) for n in NEEDLES if n.encode() in data]
    return found


def test_a_whole_run_never_writes_or_prints_the_key(drill: DrillFactory, tmp_path: Path) -> None:
    d = drill(retry_after_s=0.01)
    work = tmp_path / "work"
    work.mkdir()
    overrides = d.overrides("run", n=6, max_retries=3, concurrency=2, report=True, extra=["hydra.verbose=true"])
    overrides = [o for o in overrides if not o.startswith("hydra.run.dir")] + [f"hydra.run.dir={tmp_path / 'run'}"]
    d.script(overrides)
    # one problem meets a 401 that echoes the key (a permanent error, recorded), others transient faults
    d.fake.push_faults("server_error", "ok", "auth", "rate_limit", "reset", "ok", "empty")
    # each command is its own process (children of a fork server started with the key in its environment)
    modulo = Launcher(fork=True, env=isolated_env(tmp_path, OPENAI_API_KEY=KEY), cwd=work)
    outputs = []
    try:
        code, out = modulo(["run", *overrides], tmp_path / "console-run.txt")
        outputs.append(out)
        assert code == 0, out[-3000:]
        by_id = records(tmp_path / "run")
        assert len(by_id) == 6
        assert any("auth" in (r.error or "") or "401" in (r.error or "") for r in by_id.values())
        # the key really went to the server (so this test can fail)...
        assert {r.api_key for r in d.fake.requests} == {KEY}

        # ...resume it (which writes the report again) and show a problem too...
        code, out = modulo(["run", *overrides], tmp_path / "console-resume.txt")
        outputs.append(out)
        assert code == 0 and "resumed" in out
        code, out = modulo(["show", str(tmp_path / "run"), sorted(by_id)[0]], tmp_path / "console-show.txt")
        outputs.append(out)
        assert code == 0, out[-2000:]
    finally:
        modulo.close()

    # ...and find it nowhere: not in a file under the test's folder, not on the console
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "llm-cache.sqlite" for p in written) and any(p.suffix == ".log" for p in written)
    assert (tmp_path / "run" / "report.md").exists()
    assert leaks(tmp_path, outputs) == []


@pytest.mark.parametrize(
    "override",
    [
        f"llm.api_key_env={KEY}",  # the key where the name of its variable belongs
        f"++llm.args.api_key={KEY}",  # a key as a backend argument
        f"++llm.args.extra_headers.Authorization=Bearer {KEY}",  # a key anywhere else
    ],
)
def test_a_key_on_the_command_line_is_refused_before_anything_is_written(
    drill: DrillFactory, tmp_path: Path, override: str
) -> None:
    d = drill()
    overrides = [*d.overrides("cli-key", n=2), override]
    proc = subprocess.run(
        cli_command(overrides), env=isolated_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    code, out = proc.returncode, proc.stdout + proc.stderr
    assert code == 2 and "Traceback" not in out
    assert "environment" in out  # it says where keys belong
    assert d.fake.stats().requests == 0
    assert leaks(tmp_path, [out]) == []
