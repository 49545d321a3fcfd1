"""Peak memory of a run that meets a 10 MB hostile reply (issue 14 item 3).

    python benchmarks/hostile_reply.py                 # 3 synth/tasks problems, 150,000 identical items
    python benchmarks/hostile_reply.py --items 150000 --problems 5 --json out.json

A real ``modulo run`` process (synth/tasks, JSON generation with no reformulation, the OpenAI SDK, the
response cache, a run directory) against the fake provider in this process, which answers every
request with one schema-valid schedule of ``--items`` identical entries, padded to ``--mb`` megabytes.
Once, such a reply made the no-overlap critic build every O(n^2) clash string (21.6 GB resident).

Checked: every problem is recorded with a format error naming the reply-size limit, the records stay
small, and the process's peak resident memory (ru_maxrss of the child) stays under ``--max-rss-mb``
(500 by default). Exit status 0 when all hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import finish

from modulo.testing import FakeProvider
from modulo.testing.drills import cli_command, drill_overrides, records


def hostile_reply(items: int, megabytes: float) -> str:
    item = '{"task": "write the report", "start": "09:00", "end": "10:00"}'
    text = '{"schedule": [' + ", ".join([item] * items) + "]}"
    target = int(megabytes * 1024 * 1024)
    return text[:-2] + " " * max(0, target - len(text)) + "]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=150_000)
    ap.add_argument("--mb", type=float, default=10.0)
    ap.add_argument("--problems", type=int, default=3)
    ap.add_argument("--max-rss-mb", type=float, default=500.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    reply = hostile_reply(args.items, args.mb)
    with tempfile.TemporaryDirectory() as tmp, FakeProvider(lambda _req: reply) as fake:
        root = Path(tmp)
        overrides = drill_overrides(
            fake.openai_base_url,
            root / "run",
            root / "cache",
            n=args.problems,
            reformulator="none",
            max_iterations=1,
            concurrency=args.problems,
            max_retries=0,
            timeout_s=120,
        )
        env = {**os.environ, "OPENAI_API_KEY": "not-a-secret"}
        started = time.perf_counter()
        proc = subprocess.run(cli_command(overrides), env=env, capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
        by_id = records(root / "run")
        errors = {pid: (r.iterations[0].format_error if r.iterations else r.error) for pid, r in by_id.items()}
        record_bytes = (root / "run" / "records.jsonl").stat().st_size if by_id else 0
        summary_ok = (root / "run" / "summary.json").exists()
    result: dict[str, Any] = {
        "reply_bytes": len(reply.encode()),
        "items": args.items,
        "problems": args.problems,
        "exit_code": proc.returncode,
        "recorded": len(by_id),
        "format_errors_naming_the_limit": sum(1 for e in errors.values() if e and "max_reply_chars" in e),
        "records_bytes": record_bytes,
        "summary_written": summary_ok,
        "peak_rss_mb": round(peak_mb, 1),
        "wall_s": round(wall, 1),
        "requests": fake.stats().requests,
    }
    ok = (
        proc.returncode == 0
        and result["recorded"] == args.problems
        and result["format_errors_naming_the_limit"] == args.problems
        and summary_ok
        and peak_mb < args.max_rss_mb
    )
    result["ok"] = ok
    print(json.dumps(result, indent=1))
    if not ok:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
    return finish(result, args.json, ok)


if __name__ == "__main__":
    sys.exit(main())
