"""Does ``llm.requests_per_minute`` hold over a minute-long run? Measured at the server.

    python benchmarks/reliability_rate.py                      # 300 requests/minute for about 70 s
    python benchmarks/reliability_rate.py --rpm 600 --seconds 65 --fault-rate 0.2

A whole ``modulo run`` (synth/tasks, LLM reformulator, the OpenAI SDK), in its own process, against
the fake provider in this one, with enough problems and concurrency to keep the limiter saturated
for ``--seconds``, and transient faults so that retries are limited too. The fake provider stamps
every arrival; the script prints the most requests seen in any 60-second window (the limit's own
terms) and in shorter windows, against the limit, plus the mean rate over the run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import conclude

from modulo.build import build_session
from modulo.runs import latest_records
from modulo.testing import FakeProvider
from modulo.testing.drills import (
    Launcher,
    PlanModel,
    compose,
    drill_overrides,
    fault_rates,
    max_in_window,
    witness_answers,
)

REQUESTS_PER_PROBLEM = 3.5  # the drill script's average (certified, second try, wrong, no plan)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rpm", type=float, default=300.0, help="llm.requests_per_minute (default 300)")
    p.add_argument("--seconds", type=float, default=70.0, help="how long to keep the limiter busy (default 70)")
    p.add_argument("--fault-rate", type=float, default=0.1, help="share of requests faulted (default 0.1)")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--json", type=Path, help="write the figures here too")
    args = p.parse_args(argv)

    wanted = args.rpm / 60.0 * args.seconds * (1 - args.fault_rate)
    n = max(8, int(wanted / REQUESTS_PER_PROBLEM))
    model = PlanModel()
    kinds = ("server_error", "rate_limit_bare", "reset")
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeProvider(
            model, fault_rates=fault_rates(args.fault_rate, kinds) if args.fault_rate else None, retry_after_s=0.0
        ) as fake,
    ):
        overrides = drill_overrides(
            fake.openai_base_url,
            Path(tmp) / "run",
            Path(tmp) / "cache",
            n=n,
            concurrency=args.concurrency,
            max_retries=20,
            extra=[f"llm.requests_per_minute={args.rpm}"],
        )
        session = build_session(compose(overrides))
        model.answers, _ = witness_answers(session.problems, session.critics)
        print(f"{n} problems, {args.rpm:g} requests/minute, {args.fault_rate:.0%} faults; running...", flush=True)
        launcher = Launcher()
        started = time.perf_counter()
        launcher.start(overrides, Path(tmp) / "run.log")
        code, output = launcher.wait(args.seconds * 5)
        wall = time.perf_counter() - started
        stats = fake.stats()
        if code != 0:
            print(output[-3000:])
            return 2
        counts = Counter(r.outcome.value for r in latest_records(Path(tmp) / "run").values())

    arrivals = stats.arrivals
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
    per_second = args.rpm / 60.0
    burst = max(1.0, per_second)
    minute = max_in_window(arrivals, 60.0)
    out = {
        "rpm_limit": args.rpm,
        "requests": len(arrivals),
        "faulted": sum(v for k, v in stats.by_fault.items() if k != "ok"),
        "span_s": round(span, 2),
        "wall_s": round(wall, 2),
        "mean_rate_per_min": round((len(arrivals) - 1) / span * 60, 2) if span else None,
        "max_in_any_60s": minute,
        "max_in_any_1s": max_in_window(arrivals, 1.0),
        "max_in_any_10s": max_in_window(arrivals, 10.0),
        "outcomes": dict(counts),
    }
    ok = span >= 60.0 and minute <= args.rpm
    verdict = (
        f"most requests in any 60 s window: {minute} (limit {args.rpm:g}); "
        f"in any 1 s: {out['max_in_any_1s']} (burst {burst:g} + {per_second:g}/s); "
        f"mean {out['mean_rate_per_min']}/min over {span:.1f} s -> {'OK' if ok else 'OVER THE LIMIT or too short'}"
    )
    return conclude(out, [verdict], ok, args.json)


if __name__ == "__main__":
    sys.exit(main())
