"""Helpers for the error-dissection tests: a scripted planner whose answers depend on the problem id
(and so on the variant) and on the sample index, and a small run of synthesized calendar problems."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from critics.synth.benchmark import SynthBenchmark, SynthCalendar
from critics.synth.common import rng_for
from modulo.build import build_session
from modulo.config import ModuloConfig
from modulo.dissect import plan_variants
from modulo.llm.base import LLMRequest
from modulo.runner import run_session
from modulo.runs import RunDir
from modulo.types import Problem

N = 6
SEED = 1
GARBAGE = "Sorry, I could not find a time that works."

#: when the planner answers with a valid plan, per problem index: a predicate on (problem id, sample)
Policy = Callable[[str, int], bool]
POLICIES: dict[str, Policy] = {
    "probability": lambda pid, sample: "~" not in pid and sample == 2,
    "wording": lambda pid, sample: "~w" in pid,
    "topic": lambda pid, sample: "~t-" in pid,
    "structure": lambda pid, sample: "~r" in pid,
    "never": lambda pid, sample: False,
    "always": lambda pid, sample: True,
}


def bad_plan(bench: SynthBenchmark, p: Problem) -> Any:
    """A well-formed plan that breaks a constraint (a boundary mutant of the witness)."""
    fam = bench.family
    for m in fam.mutants(rng_for("dissect-test", p.id), p.constraints, p.metadata["witness"]):
        if m.kind == "boundary_out" and not fam.check_format(p.constraints, m.plan):
            if not fam.z3_valid(p.constraints, m.plan):
                return m.plan
    raise AssertionError(f"no invalid mutant for {p.id}")


class Planner:
    """The scripted backend's ``fn``: a valid plan when the policy of the problem says so, else a bad one
    (an invalid plan, or garbage text for problems listed in ``garbage``)."""

    def __init__(
        self, bench: SynthBenchmark, policies: list[str], garbage: tuple[int, ...] = (), seed: int = 1
    ) -> None:
        self.bench = bench
        self.problems = bench.load("generated")
        self.policy: dict[str, Policy] = {
            p.id: POLICIES[name] for p, name in zip(self.problems, policies, strict=False)
        }
        self.garbage = {self.problems[i].id for i in garbage}
        self.good: dict[str, Any] = {}
        self.bad: dict[str, Any] = {}
        for p in self.problems:
            self.good[p.id] = p.metadata["witness"]
            self.bad[p.id] = bad_plan(bench, p)
            for planned in plan_variants(bench, p, seed).values():
                if not isinstance(planned, str):
                    v = planned[0]
                    self.good[v.id] = v.metadata["witness"]
                    self.bad[v.id] = bad_plan(bench, v)
        self.requests: list[LLMRequest] = []

    @property
    def fn(self) -> Callable[[LLMRequest], str]:
        """A plain function for ``llm.args.fn`` (the config is deep-copied on the way to the backend, and
        a function is copied by reference, so the requests land here)."""

        def answer(request: LLMRequest) -> str:
            return self(request)

        return answer

    def __call__(self, request: LLMRequest) -> str:
        self.requests.append(request)
        pid = request.tags["problem_id"]
        base = pid.split("~")[0]
        if self.policy[base](pid, request.sample_index):
            return json.dumps(self.good[pid])
        if base in self.garbage:
            return GARBAGE
        return json.dumps(self.bad[pid])


def config(bench_name: str = "synth/calendar", n: int = N, max_iterations: int = 2) -> ModuloConfig:
    cfg = ModuloConfig()
    cfg.benchmark.name = bench_name
    cfg.benchmark.args = {"n": n, "seed": SEED}
    cfg.generator.prompt = "json"
    cfg.reformulator.mode = "none"
    cfg.llm.name = "scripted"
    cfg.llm.model = "scripted-1"
    cfg.llm.price_input_per_mtok = 10.0
    cfg.llm.price_output_per_mtok = 30.0
    cfg.cache.mode = "off"
    cfg.metacontroller.max_iterations = max_iterations
    cfg.run.progress = False
    cfg.run.report = False
    return cfg


def yaml_of(cfg: ModuloConfig) -> str:
    llm = cfg.llm.model_copy(update={"args": {k: v for k, v in cfg.llm.args.items() if k != "fn"}})
    return yaml.safe_dump(cfg.model_copy(update={"llm": llm}).to_dict())


def make_run(run_dir: Path, cfg: ModuloConfig) -> None:
    session = build_session(cfg)
    asyncio.run(run_session(session, RunDir(run_dir), config_yaml=yaml_of(cfg)))


class NoVariantCalendar(SynthCalendar):
    """The calendar benchmark without ``variant``: stands for TravelPlanner and NATURAL PLAN here."""

    variant = None  # type: ignore[assignment]


def calendar() -> SynthCalendar:
    return SynthCalendar(n=N, seed=SEED)
