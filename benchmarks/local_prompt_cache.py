"""Does llm=local's prompt cache (``prompt_cache_mb``) pay off in an LLM-Modulo loop?

    python benchmarks/local_prompt_cache.py --iterations 3 --cache-mb 0 256

The request pattern of one problem: each iteration sends the generator prompt (which grows by the
previous reply and a backprompt), then a reformulator prompt (different text, so llama.cpp's single
remembered state no longer matches the next generator prompt). Seconds for the whole problem are
printed for each cache size (0: no cache; the backend default is 256).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.local import LocalBackend
from modulo.settings import data_dir
from modulo.types import Message

FALLBACK = (
    "You are an expert at scheduling meetings. "
    + "Alice is busy on Monday during 9:30 to 10:00 and 12:00 to 12:30; Bob from 10:00 to 11:30. " * 30
    + "Find a one-hour slot for Alice and Bob on Monday between 9:00 and 17:00."
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"day": {"type": "string", "enum": ["Monday"]}, "start": {"type": "string"}},
    "required": ["day", "start"],
}


def first_prompt() -> str:
    path = data_dir() / "natural_plan" / "subsets_100" / "calendar_scheduling_100.json"
    if path.is_file():
        records = json.loads(path.read_text())
        return str(next(iter(records.values()))["prompt_5shot"])
    return FALLBACK


async def one_problem(cache_mb: int, iterations: int, threads: int) -> dict[str, Any]:
    backend = LocalBackend(LLMSettings(name="local"), n_threads=threads, prompt_cache_mb=cache_mb)
    await backend.start()
    messages: list[Message] = [Message(role="user", content=first_prompt())]
    started = time.perf_counter()
    prompt_tokens = 0
    try:
        for i in range(iterations):
            reply = await backend.complete(LLMRequest(messages=tuple(messages), max_tokens=48))
            prompt_tokens += reply.usage.input_tokens
            reform = LLMRequest(
                messages=(Message(role="user", content=f"Turn this answer into JSON:\n{reply.text}"),),
                structured_output="schema",
                response_schema=SCHEMA,
                max_tokens=32,
            )
            await backend.complete(reform)
            messages += [
                Message(role="assistant", content=reply.text),
                Message(role="user", content=f"Iteration {i + 1}: Bob is busy at that time. Try again."),
            ]
    finally:
        await backend.aclose()
    return {
        "prompt_cache_mb": cache_mb,
        "iterations": iterations,
        "generator_prompt_tokens": prompt_tokens,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-mb", type=int, nargs="+", default=[0, 256])
    args = parser.parse_args(argv)
    for cache_mb in args.cache_mb:
        print(json.dumps(asyncio.run(one_problem(cache_mb, args.iterations, args.threads))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
