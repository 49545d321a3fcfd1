"""Loop overhead: 180 problems, budget 10, a fake backend with a fixed 50 ms latency, 32 calls in flight.

Every reply fails a critic, so each problem makes exactly 10 sequential calls (1,800 in all). With 32
calls in flight the ideal time is 1800 x 50 ms / 32 = 2.81 s; the goal is to finish within 1.05 times
that. The whole stack is real (build_session, Metacontroller, LLMClient with its semaphore and accounting,
scripted backend, run directory with fsync'ed records). The benchmark is a stand-in defined here with
one trivial critic, or, with ``--benchmark travelplanner``, the 180 TravelPlanner validation problems
with all 14 critics in strict mode, the model answering the plausible but wrong plans of
``benchmarks/iteration_cpu.py`` (data from ``MODULO_DATA_DIR``); ``--heavy`` then runs the
TravelPlanner critics in worker processes (``metacontroller.heavy``), ``--heavy-workers`` of them, started
before the clock (each loads the benchmark's database, about a second of CPU that a long run amortises; the
output's benchmark label says so).

Besides the ratio it says what the wall waits on, from the time each request reached the backend and each
reply got back to its caller: the time before the first request, from the first request to the last reply
(at best 57 rounds of 50 ms with 1,800 calls on 32 slots, 1.013 times the ideal, plus each reply noticed a
little late: the event loop's timers wake it up to a millisecond late), a slot's idle time between a reply
and the next request, and the time after the last reply (the last records, the summary, the evaluation),
split at the moment the last records were on disk: until then, and the run's end after them (the summary,
the final evaluation, evaluation.json and summary.json, the session closed).

    python benchmarks/loop_overhead.py [--problems 180] [--budget 10] [--latency 0.05] [--concurrency 32]
    python benchmarks/loop_overhead.py --benchmark travelplanner [--heavy --heavy-workers 2]

Exit status: 0 when the ratio is within the 1.05 bound, 1 when not, 2 when the run made another number of
calls than problems x budget (the ideal assumes every problem runs to its budget).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import RootModel

from modulo import components
from modulo.benchmark import Benchmark, EvalResult, MetricSpec
from modulo.build import build_session
from modulo.config import ModuloConfig
from modulo.critic import critic
from modulo.runner import run_session
from modulo.runs import RunDir
from modulo.types import Problem, Verdict


class Overhead(Benchmark):
    name = "bench/overhead"
    plan_model = RootModel[list[int]]  # a plan is a list of numbers
    metrics = (MetricSpec("solved", "Solved"),)
    primary_metric = "solved"
    quick_format = True  # the schema of a list of numbers: the format critic runs inline, as for the built-ins

    def __init__(self, data_dir: Any = None, *, n: int = 180) -> None:
        super().__init__(None)
        self.n = n

    def splits(self) -> list[str]:
        return ["all"]

    def load(self, split: str) -> list[Problem]:
        return [
            Problem(id=f"p{i}", benchmark=self.name, query=f"Give three numbers summing to {i}.") for i in range(self.n)
        ]

    def critic_names(self) -> list[str]:
        return ["format", "bench/never"]

    def evaluate(self, problems: Any, plans: Any) -> EvalResult:
        return EvalResult(metrics={"solved": 0.0})


@critic("bench/never", group="hard", description="rejects every plan, so the loop runs to its budget", inline=True)
def never(problem: Problem, plan: Any) -> Verdict:
    return Verdict.fail("Not yet: try again.")


class _Trace:
    """When each request reached ``backend.complete`` and when its reply got back to the caller (the backend's
    method wrapped on this one object: two clock reads a call)."""

    def __init__(self, backend: Any) -> None:
        self.sends: list[float] = []
        self.replies: list[float] = []
        complete = backend.complete

        async def timed(request: Any) -> Any:
            self.sends.append(time.perf_counter())
            try:
                return await complete(request)
            finally:
                self.replies.append(time.perf_counter())

        backend.complete = timed

    def parts(self, start: float, end: float, slots: int, latency_s: float) -> dict[str, float]:
        sends, replies = sorted(self.sends), sorted(self.replies)
        if not sends:
            return {}
        # a slot freed by a reply is taken by the next request sent (other requests wait for a slot until
        # the last round): the gap between the two is the slot's idle time
        gaps = [s - r for r, s in zip(replies, sends[slots:], strict=False)]
        held = sum(r - s for s, r in zip(self.sends, self.replies, strict=True)) / len(sends)
        return {
            "before_first_request_s": round(sends[0] - start, 3),
            "first_request_to_last_reply_s": round(replies[-1] - sends[0], 3),
            "after_last_reply_s": round(end - replies[-1], 3),
            "reply_to_next_request_ms_mean": round(1000 * sum(gaps) / max(1, len(gaps)), 3),
            "latency_as_seen_ms_mean": round(1000 * held, 3),
            "latency_ms": round(1000 * latency_s, 3),
        }


class _TimedRunDir(RunDir):
    """The run directory, noting when the last group of records was on disk (written and fsync'ed)."""

    written: float | None = None

    def append_many(self, results: Any) -> None:
        super().append_many(results)
        self.written = time.perf_counter()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=180)
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=32, help="LLM calls in flight")
    ap.add_argument("--problem-concurrency", type=int, default=None, help="problems in flight (default: all)")
    ap.add_argument("--benchmark", choices=["stand-in", "travelplanner"], default="stand-in")
    ap.add_argument("--heavy", action="store_true", help="travelplanner: its critics in worker processes")
    ap.add_argument("--heavy-workers", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    components.benchmarks.register("bench/overhead", Overhead, replace=True)
    components.critics.register("bench/never", never, replace=True)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = ModuloConfig()
        cfg.benchmark.name = "bench/overhead"
        cfg.benchmark.args = {"n": args.problems}
        cfg.generator.prompt = "direct"
        cfg.reformulator.mode = "none"
        cfg.critics = "all"
        cfg.metacontroller.max_iterations = args.budget
        cfg.llm.name = "scripted"
        cfg.llm.concurrency = args.concurrency
        # a different plan each time: a repeated one would end the problem at its fixed point (3 calls)
        replies: dict[str, list[str]] = {"*": [f"[1, 2, {3 + i}]" for i in range(args.budget)]}
        if args.benchmark == "travelplanner":
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from iteration_cpu import wrong_plans  # the same plausible, wrong plans

            replies, args.problems = wrong_plans(args.problems, args.budget)
            cfg.benchmark.name, cfg.benchmark.args = "travelplanner", {}
            cfg.benchmark.split, cfg.benchmark.limit = "validation", args.problems
            cfg.generator.prompt = "json"
            cfg.critic_options.mode = "strict"
            if args.heavy:
                from critics.travelplanner.critics import ALL_CRITICS

                cfg.metacontroller.heavy = list(ALL_CRITICS)
                cfg.metacontroller.heavy_workers = args.heavy_workers
        cfg.llm.args = {"replies": replies, "latency_s": args.latency}
        cfg.cache.mode = "off"
        cfg.run.concurrency = args.problem_concurrency or args.problems
        cfg.run.progress = False
        session = build_session(cfg)
        trace = _Trace(session.llm.backend)
        warm = getattr(session.loop.executor, "warm", None)
        if args.heavy and warm is not None:
            # start every worker (each loads the benchmark's database: about a second of CPU) before the clock
            # starts, as a long run amortises it; one started inside the timed run competes for the cores
            warm(args.heavy_workers)
        load = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), os.times()
        run_dir = _TimedRunDir(Path(tmp) / "run")
        result = asyncio.run(run_session(session, run_dir))
        wall = time.perf_counter() - t0
        c1 = os.times()  # (the run closed its session: the heavy workers are killed and reaped)
    calls = result.summary["usage"]["calls"]
    ideal = calls * args.latency / args.concurrency
    parts = trace.parts(t0, t0 + wall, args.concurrency, args.latency)
    if parts and run_dir.written is not None:
        # after the last reply: until the last records are on disk, then the run's end (the summary, the
        # final evaluation, evaluation.json and summary.json, the session closed)
        last_reply = t0 + wall - parts["after_last_reply_s"]
        parts["last_reply_to_last_records_s"] = round(max(0.0, run_dir.written - last_reply), 3)
        parts["last_records_to_end_s"] = round(t0 + wall - run_dir.written, 3)
    chains = math.ceil(args.problems / args.concurrency) * args.budget * args.latency
    out = {
        "benchmark": args.benchmark
        + (f" (critics in {args.heavy_workers} worker processes, started before the clock)" if args.heavy else ""),
        "problems": args.problems,
        "budget": args.budget,
        "calls": calls,
        "latency_s": args.latency,
        "llm_concurrency": args.concurrency,
        "problem_concurrency": cfg.run.concurrency,
        "wall_s": round(wall, 3),
        "ideal_s": round(ideal, 3),
        "ratio": round(wall / ideal, 4),
        "ideal_if_one_problem_per_slot_s": round(chains, 3),
        # what the wall is made of on this machine: CPU per call of the event loop's process (during the run)
        # and of the heavy-critic worker processes (their whole lives: starting up and loading the benchmark
        # included), and the machine's load when the run started (other work shares the cores)
        "main_process_cpu_ms_per_call": round(((c1.user - c0.user) + (c1.system - c0.system)) * 1000 / calls, 3),
        "worker_processes_cpu_ms_per_call_with_start": round(
            ((c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)) * 1000 / calls, 3
        ),
        # the share of the wall the event loop's process spent on a CPU: near 1, the run is CPU-bound (its
        # thread's work, or other work on the machine taking the cores, stretches the wall, not the routing)
        "main_process_busy_share": round(((c1.user - c0.user) + (c1.system - c0.system)) / wall, 3),
        # what the wall waits on (from the time each request reached the backend and each reply got back to
        # its caller): before the first request; the requests themselves (ideal: calls x latency / slots),
        # made longer by a slot left idle after a reply until the next request is sent, and by a reply
        # noticed after its latency (the event loop's thread busy when it came); after the last reply (the
        # last records written, the summary and the final evaluation), split at the last records on disk
        **parts,
        "load_average_1min_at_start": round(load, 2),
        "cores": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>32}: {v}")
        print("goal: ratio <= 1.05:", "met" if out["ratio"] <= 1.05 else "NOT met")
    if calls != args.problems * args.budget:
        print(f"error: {calls} calls, not {args.problems} x {args.budget}: the run did not do what the bound assumes")
        return 2
    return 0 if out["ratio"] <= 1.05 else 1  # the exit status says whether the bound was met, as the line says


if __name__ == "__main__":
    sys.exit(main())
