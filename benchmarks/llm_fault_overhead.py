"""What the LLM client layer costs, and what faults cost, measured end to end.

    python benchmarks/llm_fault_overhead.py                 # defaults: 2000 scripted calls, 300 HTTP calls
    python benchmarks/llm_fault_overhead.py --http-calls 1000 --json out.json

1. Client overhead per call (scripted backend, no network): plain, cache miss (read-write, the
   reply is written to SQLite) and cache hit.
2. The real OpenAI SDK against the fake provider on 127.0.0.1 with 16 calls in flight, first with no
   faults, then with a fault mix (10% 500, 10% 429 with Retry-After 10 ms, 5% connection reset, 5%
   empty reply): wall time, requests per logical call, and whether every call still got its reply.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.client import build_client
from modulo.testing import FakeProvider
from modulo.types import Message

FAULT_MIX = {"server_error": 0.10, "rate_limit": 0.10, "reset": 0.05, "empty": 0.05}


def req(i: int) -> LLMRequest:
    return LLMRequest(
        messages=(Message(role="user", content=f"Plan trip number {i} to Rome."),), tags={"problem_id": f"p{i}"}
    )


async def client_overhead(n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    settings = LLMSettings(name="scripted", args={"fn": lambda r: "a short reply"})
    client = build_client(settings)
    started = time.perf_counter()
    for i in range(n):
        await client.call(req(i), "generate")
    out["plain_us_per_call"] = (time.perf_counter() - started) / n * 1e6
    await client.aclose()
    with tempfile.TemporaryDirectory() as tmp:
        cached = build_client(settings, cache_mode="read-write", cache_dir=Path(tmp))
        started = time.perf_counter()
        for i in range(n):
            await cached.call(req(i), "generate")
        out["cache_miss_us_per_call"] = (time.perf_counter() - started) / n * 1e6
        started = time.perf_counter()
        for i in range(n):
            await cached.call(req(i), "generate")
        out["cache_hit_us_per_call"] = (time.perf_counter() - started) / n * 1e6
        await cached.aclose()
    return out


async def http_run(n: int, rates: dict[str, float], seed: int) -> dict[str, Any]:
    with FakeProvider(fault_rates=rates, seed=seed, retry_after_s=0.01) as fake:
        settings = LLMSettings(
            name="openai",
            model="gpt-4o-mini",
            base_url=fake.openai_base_url,
            concurrency=16,
            max_retries=8,
            max_backoff_s=0.05,
            timeout_s=10,
        )
        client = build_client(settings)
        await client.call(req(-1), "generate")  # warm the SDK's connection pool
        fake.reset_stats()
        started = time.perf_counter()
        results = await asyncio.gather(*(client.call(req(i), "generate") for i in range(n)), return_exceptions=True)
        wall = time.perf_counter() - started
        await client.aclose()
        stats = fake.stats()
    ok = [r for r in results if not isinstance(r, BaseException)]
    seconds = [r.seconds for r in ok]
    return {
        "calls": n,
        "succeeded": len(ok),
        "wall_s": round(wall, 3),
        "calls_per_s": round(n / wall, 1),
        "requests": stats.requests,
        "requests_per_call": round(stats.requests / n, 3),
        "faults_seen": {k: v for k, v in sorted(stats.by_fault.items()) if k != "ok"},
        "median_call_s": round(statistics.median(seconds), 4) if seconds else None,
        "p95_call_s": round(sorted(seconds)[int(0.95 * (len(seconds) - 1))], 4) if seconds else None,
        "usage_failed_attempts": sum(r.usage.failed_calls for r in ok),
    }


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="scripted calls for the overhead figures")
    parser.add_argument("--http-calls", type=int, default=300, help="calls against the fake provider")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"overhead": await client_overhead(args.calls)}
    report["http_no_faults"] = await http_run(args.http_calls, {}, args.seed)
    report["http_fault_mix"] = await http_run(args.http_calls, FAULT_MIX, args.seed)
    report["fault_mix"] = FAULT_MIX
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
