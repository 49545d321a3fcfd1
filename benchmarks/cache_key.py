"""CPU of the LLM cache key of one TravelPlanner generation request (``generator.prompt=json``: the planner
prompt of a validation problem and the plan's JSON Schema under structured output).

The request is keyed with its schema as the loop hands it (one read-only ``FrozenObject``, encoded once for
every key) and as a plain dict (copied into each request and encoded for each key: how every schema was
keyed before), both by :meth:`LLMRequest.key` (the whole prompt hashed) and by the client's
:class:`RequestKeys` (a problem's prompt resumed). The keys must be the same; the script exits 1 when not.

    python benchmarks/cache_key.py                 # 2000 requests, best of 5 (and 2000 of a run's backprompts)
    python benchmarks/cache_key.py --json FILE     # the figures written to FILE too

Numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_common import conclude

from modulo.build import build_benchmark
from modulo.canonical import frozen_object
from modulo.config import ModuloConfig
from modulo.llm.base import LLMRequest
from modulo.llm.client import RequestKeys
from modulo.types import Message


def per_call_us(fn: Callable[[], Any], n: int, repeats: int = 5) -> float:
    """The best of ``repeats`` timings of ``fn`` (which does ``n`` calls), in microseconds per call."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return round(best / n * 1e6, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="requests timed per repeat")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args(argv)
    cfg = ModuloConfig()
    cfg.benchmark.name = "travelplanner"
    cfg.benchmark.split = "validation"
    bench = build_benchmark(cfg)
    problem = bench.load("validation")[0]
    prompt = bench.template("json").render(**{**bench.prompt_variables(problem), "problem": problem})
    messages = (Message(role="user", content=prompt),)
    schema = bench.plan_json_schema()
    figures: dict[str, Any] = {"prompt_chars": len(prompt)}
    keys: dict[str, set[str]] = {}
    for label, value in (("dict", schema), ("frozen", frozen_object(schema))):
        requests = [
            LLMRequest(
                messages=messages,
                model="m",
                seed=i,
                response_schema=value,
                structured_output="schema",
                tags={"problem_id": problem.id},
            )
            for i in range(args.n)
        ]
        by_parts = RequestKeys()
        figures[f"key_us_{label}"] = per_call_us(lambda rs=requests: [r.key("openai") for r in rs], args.n)
        figures[f"request_keys_us_{label}"] = per_call_us(
            lambda rs=requests, k=by_parts: [k.key(r, "openai") for r in rs], args.n
        )
        keys[label] = {r.key("openai") for r in requests} | {RequestKeys().key(r, "openai") for r in requests}
    same = keys["dict"] == keys["frozen"] and len(keys["dict"]) == args.n
    verdicts = [f"the keys with the schema read-only are the plain dict's ({args.n} requests): {same}"]
    # requests as a run sends them: one seed and schema for all, the request quoted by a new backprompt each
    # (the members besides the messages are the same: their text is made once)
    frozen = frozen_object(schema)
    backprompts = [
        LLMRequest(
            messages=(Message(role="user", content=f"{prompt}\n\nAttempt {i} failed: the plan costs too much."),),
            model="m",
            seed=1,
            response_schema=frozen,
            structured_output="schema",
            tags={"problem_id": problem.id},
        )
        for i in range(args.n)
    ]
    by_parts = RequestKeys()
    by_parts.key(LLMRequest(**{**backprompts[0].__dict__, "messages": messages}), "openai")  # the first prompt
    figures["backprompt_key_us"] = per_call_us(lambda: [r.key("openai") for r in backprompts], args.n)
    figures["backprompt_request_keys_us"] = per_call_us(
        lambda: [by_parts.key(r, "openai") for r in backprompts], args.n
    )
    alike = {by_parts.key(r, "openai") for r in backprompts} == {r.key("openai") for r in backprompts}
    verdicts.append(f"a run's backprompts keyed by parts as whole ({args.n} requests): {alike}")
    return conclude(figures, verdicts, same and alike, args.json)


if __name__ == "__main__":
    sys.exit(main())
