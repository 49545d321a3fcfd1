"""Fixtures of the reliability tests: a fake provider answering from a scripted model, drill runs."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from modulo.build import build_session
from modulo.testing import FakeProvider
from modulo.testing.drills import PlanModel, cli_command, compose, drill_overrides, witness_answers


@dataclass
class Drill:
    """A fake provider, its scripted model, and the overrides of runs against it."""

    fake: FakeProvider
    model: PlanModel
    tmp: Path
    kinds: dict[str, str] = field(default_factory=dict)

    def overrides(self, name: str, **options: Any) -> list[str]:
        return drill_overrides(self.fake.openai_base_url, self.tmp / name, self.tmp / f"{name}-cache", **options)

    def script(self, overrides: list[str]) -> dict[str, str]:
        """Answers for the problems of ``overrides`` from their known plans (see witness_answers)."""
        session = build_session(compose(overrides))
        self.model.answers, self.kinds = witness_answers(session.problems, session.critics)
        return self.kinds


DrillFactory = Callable[..., Drill]


@pytest.fixture
def drill(tmp_path: Path) -> Iterator[DrillFactory]:
    """``drill(**FakeProvider options)``: a started fake provider answering through a PlanModel."""
    started: list[FakeProvider] = []

    def make(*, wrap: Callable[[PlanModel], Any] | None = None, **options: Any) -> Drill:
        model = PlanModel()
        fake = FakeProvider(wrap(model) if wrap is not None else model, **options).start()
        started.append(fake)
        return Drill(fake=fake, model=model, tmp=tmp_path)

    yield make
    for fake in started:
        fake.stop()


def start_run(overrides: list[str], ready: Callable[[], bool], timeout: float = 180) -> subprocess.Popen[bytes]:
    """Start ``modulo run OVERRIDES`` (with a dummy key) and wait until ``ready()``; fails if it ends first."""
    env = {**os.environ, "OPENAI_API_KEY": "test-key-not-secret"}
    proc = subprocess.Popen(
        cli_command(overrides),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # Ctrl-C as at a terminal, even when the tests run in a background job (where SIGINT is ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[0].decode()[-2000:])
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"not ready within {timeout} s")
        time.sleep(0.05)
    return proc
