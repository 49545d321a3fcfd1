"""CPU per loop iteration of the generation half, timed inside a real TravelPlanner run.

The run is ``iteration_cpu.py``'s (every critic in strict mode, budget 10, the scripted backend answering a
greedy plan with zero latency, the response cache off), with the critics' outcomes replayed from a first
run, so that the event loop's thread does the loop's own work alone. The generation half is what the
loop does around the model besides judging a plan, each part timed in CPU time of the event loop's thread
(``time.thread_time`` around every call):

* ``first prompt``: :meth:`Metacontroller.first_prompt` (once per problem, shown per iteration);
* ``prompt hash``: :meth:`PromptHasher.sha` (each prompt's ``prompt_sha256``);
* ``generate``: the generator's ``generate`` (the request, the LLM client's call, the scripted backend);
* ``reformulate``: the reformulator's ``reformulate`` (the reply read as JSON, the plan checked, its text);
* ``backprompt``: :meth:`Metacontroller._next_messages` (the strategy's next prompt).

``generate`` and ``reformulate`` are coroutines: their CPU time is theirs only when they do not wait (a
zero-latency script, fewer problems in flight than the client's slots, no response cache: they never do;
the script checks the slots). Each timed call costs the timing itself (two clock reads, measured and
printed); the figures include it.

    python benchmarks/generation_cpu.py                     # 50 problems, budget 10, the median of 3 runs
    python benchmarks/generation_cpu.py --limit 20 --repeat 5

Numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from iteration_cpu import Recorded, config, critic_cpu, one_run, replayed_critics, wrong_plans

from modulo.canonical import PromptHasher
from modulo.generators.llm import LLMGenerator
from modulo.metacontroller import Metacontroller
from modulo.reformulate import JSONReformulator

#: part -> (owner, method name, a coroutine)
PARTS: dict[str, tuple[Any, str, bool]] = {
    "first prompt": (Metacontroller, "first_prompt", False),
    "prompt hash": (PromptHasher, "sha", False),
    "generate": (LLMGenerator, "generate", True),
    "reformulate": (JSONReformulator, "reformulate", True),
    "backprompt": (Metacontroller, "_next_messages", False),
}


@contextmanager
def timed_parts() -> Iterator[dict[str, float]]:
    """CPU seconds of the event loop's thread in each part of :data:`PARTS` (the methods wrapped meanwhile)."""
    spent: dict[str, float] = defaultdict(float)
    clock = time.thread_time
    originals = {}
    for part, (owner, name, is_async) in PARTS.items():
        original: Callable[..., Any] = getattr(owner, name)
        originals[part] = original

        def wrapped(original: Callable[..., Any], part: str, is_async: bool) -> Callable[..., Any]:
            if is_async:

                async def timed_async(*args: Any, **kwargs: Any) -> Any:
                    t0 = clock()
                    try:
                        return await original(*args, **kwargs)
                    finally:
                        spent[part] += clock() - t0

                return timed_async

            def timed(*args: Any, **kwargs: Any) -> Any:
                t0 = clock()
                try:
                    return original(*args, **kwargs)
                finally:
                    spent[part] += clock() - t0

            return timed

        setattr(owner, name, wrapped(original, part, is_async))
    try:
        yield spent
    finally:
        for part, (owner, name, _) in PARTS.items():
            setattr(owner, name, originals[part])


def timing_cost(n: int = 20_000) -> float:
    """Seconds one timed call adds (two clock reads and the wrapper), measured on an empty function."""

    def nothing() -> None:
        return None

    clock = time.thread_time
    spent = [0.0]

    def timed() -> None:
        t0 = clock()
        try:
            return nothing()
        finally:
            spent[0] += clock() - t0

    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            timed()
        mid = time.perf_counter()
        for _ in range(n):
            nothing()
        best = min(best, ((mid - t0) - (time.perf_counter() - mid)) / n)
    return max(best, 0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=50, help="validation problems (of 180)")
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3, help="replayed runs measured (the median reported)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = ap.parse_args(argv)

    probe = config({}, args.limit, args.budget, Path("unused"))
    if probe.run.concurrency > probe.llm.concurrency:  # a call would wait for a slot: its time not its own
        print("the run has more problems in flight than the client has slots: generate's time would not be its own")
        return 2
    script, n = wrong_plans(args.limit, args.budget)
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="modulo-generation-cpu-") as tmp:
        work = Path(tmp)
        warm, _ = wrong_plans(min(n, 5), args.budget, offset=3 * args.budget)
        one_run(warm, min(n, 5), args.budget, work, "warm-up")
        recorded: Recorded = defaultdict(deque)
        with critic_cpu(recorded):
            one_run(script, n, args.budget, work, "plain")
        for r in range(max(1, args.repeat)):
            other, _ = wrong_plans(n, args.budget, offset=args.budget * (1 + r))
            outcomes: Recorded = defaultdict(deque, {k: deque(v) for k, v in recorded.items()})
            with replayed_critics(outcomes), timed_parts() as spent:
                run = one_run(other, n, args.budget, work, f"replayed-{r}")
            iterations = run["iterations"]
            if iterations != n * args.budget:  # the figures assume every problem ran to its budget
                print(f"the replayed run made {iterations} iterations, not {n} x {args.budget}: no figures")
                return 2
            row = {part: spent[part] / iterations * 1e6 for part in PARTS}
            row["generation half"] = sum(row[part] for part in PARTS)
            row["event loop's thread"] = run["main_thread_s"] / iterations * 1e6
            runs.append(row)
    cost = timing_cost() * 1e6
    median = {k: statistics.median(run[k] for run in runs) for k in runs[0]}
    print(
        f"{n} TravelPlanner validation problems, budget {args.budget}, strict critics replayed, zero-latency "
        f"scripted model, response cache off; CPU of the event loop's thread per iteration, in us "
        f"(the median of {len(runs)} runs; each timed call includes {cost:.2f} us of timing)"
    )
    for k, v in median.items():
        every = ", ".join(f"{run[k]:.1f}" for run in runs)
        print(f"  {k:<20} {v:7.1f}   (runs: {every})")
    if args.json is not None:
        args.json.write_text(json.dumps({"median_us": median, "runs_us": runs, "timing_us_per_call": cost}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
