"""Shared helpers for the synthesized benchmarks' tests."""

from __future__ import annotations

import os
from typing import Any

import pytest

from critics.synth.audit import load_critics
from critics.synth.benchmark import BENCHMARKS, SynthBenchmark
from modulo.critic import Critic

FAMILIES = ("tasks", "calendar", "trip")

#: seeds checked per family by the bulk test; the 1,000-seed run is benchmarks/synth_seeds.py
#: (about 10-60 s per family on a loaded 2-core machine, too slow for every CI run)
BULK_SEEDS = int(os.environ.get("MODULO_SYNTH_SEEDS", "200"))


def bench(family: str, **kwargs: Any) -> SynthBenchmark:
    return BENCHMARKS[family](**kwargs)


@pytest.fixture(scope="session")
def critics_by_family() -> dict[str, dict[str, Critic]]:
    """The registered critics of each family, bound the way the loop binds them."""
    return {f: load_critics(bench(f, n=0)) for f in FAMILIES}
