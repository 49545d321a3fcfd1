"""modulo: LLM-Modulo planning.

An LLM (or search) *generator* proposes a plan, a *reformulator* turns it into the benchmark's JSON,
*binary critics* test it and write backprompts, and the *metacontroller* iterates until every
critic accepts or a budget is spent. See the README for the command line, ARCHITECTURE.md for the
layout; in Python::

    import asyncio
    from modulo.build import build_session
    from modulo.config import ModuloConfig
    from modulo.runner import run_session
    from modulo.runs import RunDir

    cfg = ModuloConfig()
    cfg.benchmark.name, cfg.generator.name = "travelplanner", "greedy"
    result = asyncio.run(run_session(build_session(cfg), RunDir("runs/notebook")))
"""

from .benchmark import Benchmark, EvalResult, MetricSpec
from .critic import Critic, critic
from .errors import ModuloError
from .types import Message, Outcome, PlanJSON, Problem, ProblemResult, Usage, Verdict

__version__ = "0.1.0"

__all__ = [
    "Benchmark",
    "Critic",
    "EvalResult",
    "Message",
    "MetricSpec",
    "ModuloError",
    "Outcome",
    "PlanJSON",
    "Problem",
    "ProblemResult",
    "Usage",
    "Verdict",
    "critic",
]
