"""Fuzz the reformulator's parsers and every critic with Hypothesis, at benchmark size.

    python benchmarks/reliability_fuzz.py                    # 10,000 inputs per parser, critics to 10,000 each
    python benchmarks/reliability_fuzz.py --examples 2000 --only synth/tasks

For each benchmark (the three synthesized families; NATURAL PLAN's three tasks and TravelPlanner
when ``$MODULO_DATA_DIR`` holds their data):

- ``--examples`` generated answers go through ``extract_json`` and the benchmark's ``parse``
  (contract: a value or a PlanFormatError; the validation of that value never raises);
- generated plans go through validation and the critics as the loop runs them, in rounds, until
  every critic of the benchmark has judged at least ``--examples`` plans (contract: validation
  raises nothing but PlanFormatError, no critic raises).

The contracts and strategies are in :mod:`modulo.testing.fuzz`; a failure prints Hypothesis's
shrunk counterexample, which belongs in ``tests/reliability/test_fuzz.py`` as a regression test once
fixed at its source. Prints, per benchmark, the inputs generated and how far they got.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import finish

from modulo.testing.fuzz import (
    Target,
    benchmark_target,
    check_plan,
    check_text,
    edited_plans,
    plans,
    texts,
)


def targets(data_dir: Path | None) -> list[Target]:
    out = [benchmark_target(name) for name in ("synth/tasks", "synth/calendar", "synth/trip")]
    if data_dir is not None and (data_dir / "natural_plan").is_dir():
        out += [benchmark_target(f"natural_plan/{task}", data_dir=data_dir) for task in ("trip", "meeting", "calendar")]
    if data_dir is not None and (data_dir / "travelplanner").is_dir():
        out.append(benchmark_target("travelplanner", data_dir=data_dir))
    return out


def run(strategy: Any, check: Any, target: Target, n: int, seed: int) -> None:
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink],
    )
    @given(strategy)
    def prop(case: tuple[Any, Any]) -> None:
        check(target, *case)

    prop._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    prop()


def describe(exc: BaseException) -> str:
    """Where and why a contract broke, with Hypothesis's (shrunk) input cut to a readable length."""
    frames = "".join(traceback.format_tb(exc.__traceback__)[-6:])
    notes = "\n".join(
        n if len(n) < 1500 else n[:700] + f" ...[{len(n)} chars]... " + n[-700:] for n in getattr(exc, "__notes__", [])
    )
    return f"{frames}{type(exc).__name__}: {str(exc)[:800]}\n{notes}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--examples", type=int, default=10_000, help="inputs per parser and per critic (default 10000)")
    p.add_argument("--only", action="append", default=[], help="benchmark name(s) to fuzz (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="write the counts here too")
    args = p.parse_args(argv)
    env = os.environ.get("MODULO_DATA_DIR")
    data_dir = Path(env) if env and Path(env).is_dir() else None
    report: dict[str, Any] = {}
    failed = False
    for target in targets(data_dir):
        if args.only and target.name not in args.only:
            continue
        started = time.perf_counter()
        entry: dict[str, Any] = {"problems": len(target.problems), "critics": [c.name for c in target.critics]}
        try:
            run(texts(target), check_text, target, args.examples, args.seed)
            # the mixed strategy first (arbitrary JSON included), then edited plans until every critic is busy
            run(plans(target), check_plan, target, args.examples, args.seed + 1)
            rounds = 0
            while min(target.counts[f"critic:{c.name}"] for c in target.critics) < args.examples and rounds < 20:
                rounds += 1
                run(edited_plans(target), check_plan, target, args.examples, args.seed + 1 + rounds)
        except Exception as exc:
            failed = True
            parts = exc.exceptions if isinstance(exc, BaseExceptionGroup) else [exc]
            entry["failure"] = "\n\n".join(describe(e) for e in parts)
            print(f"{target.name}: CONTRACT BROKEN\n{entry['failure']}", flush=True)
        entry["seconds"] = round(time.perf_counter() - started, 1)
        entry["counts"] = dict(sorted(target.counts.items()))
        report[target.name] = entry
        critic_counts = [target.counts[f"critic:{c.name}"] for c in target.critics]
        print(
            f"{target.name}: {target.counts['texts']} answers parsed ({target.counts['parse:value']} read by the "
            f"parser, {target.counts['extract_json:value']} by extract_json), {target.counts['plans']} plans "
            f"({target.counts['invalid']} invalid, {target.counts['format_failed']} failed format, "
            f"{target.counts['all_accept']} certified); inputs per critic: min {min(critic_counts)}, "
            f"max {max(critic_counts)}; {entry['seconds']} s" + ("" if "failure" not in entry else "  FAILED"),
            flush=True,
        )
    print("all contracts held" if not failed else "SOME CONTRACT BROKE (see above)")
    return finish(report, args.json, ok=not failed)


if __name__ == "__main__":
    sys.exit(main())
