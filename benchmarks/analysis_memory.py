"""Memory of ``modulo.analysis`` frames against holding the whole run as objects.

Writes a synthetic run directory (``--problems`` problems x ``--iterations`` iterations, each
iteration carrying a prompt and a reply of ``--text-kb`` KB, each its own text, as a TravelPlanner run
with reference information does; in record format 2, what runs write, unless ``--record-format 1``),
then measures the Python heap peak (tracemalloc) of:

* ``modulo.analysis.load(RUN).problems()`` and ``.iterations()`` (records streamed line by line);
* ``modulo.reports.load_run(RUN)`` (every record held as pydantic objects, what a report does).

Target: the streamed frames' peak stays a small fraction of the whole-run load and does not grow
with the size of each record's text beyond one record at a time.

    python benchmarks/analysis_memory.py --problems 200 --iterations 10 --text-kb 20
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import record_format_option, write_record, write_run_info


def write_run(path: Path, problems: int, iterations: int, text_kb: int, record_format: int = 2) -> int:
    from modulo.types import ProblemResult

    ids = [f"p{i}" for i in range(problems)]
    critics = ["format", "a", "b"]
    write_run_info(path, "synthetic-memory", "dev", critics, iterations, ids)
    filler = "x" * (text_kb * 1024)
    with (path / "records.jsonl").open("w") as fh:
        for pid in ids:
            its = []
            for k in range(iterations):
                # each prompt and reply its own text (format 2 writes a text once per record)
                prompt, reply = f"prompt {pid} {k} {filler}", f"reply {pid} {k} {filler}"
                verdicts = [
                    {"critic": c, "group": "hard", "passed": (k + j) % 3 == 0, "feedback": f"{c} says no"}
                    for j, c in enumerate(critics)
                ]
                its.append(
                    {
                        "index": k,
                        "prompt": [{"role": "user", "content": prompt}],
                        "raw_reply": reply,
                        "plan": {"x": k},
                        "verdicts": verdicts,
                        "calls": [{"stage": "generate", "messages": [], "reply": reply, "usage": {"calls": 1}}],
                        "usage": {"calls": 1, "input_tokens": 1000, "output_tokens": 100},
                        "timings": {"generate": 0.1},
                    }
                )
            record = {
                "problem_id": pid,
                "benchmark": "synthetic-memory",
                "outcome": "exhausted",
                "stop_reason": "iterations",
                "best_plan": {"x": 0},
                "best_iteration": 0,
                "iterations": its,
            }
            write_record(fh, ProblemResult.model_validate(record), record_format)
    return (path / "records.jsonl").stat().st_size


def peak(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top / 2**20, seconds, value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problems", type=int, default=200)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--text-kb", type=int, default=20)
    record_format_option(p)
    args = p.parse_args()

    import modulo.analysis as a
    from modulo.reports import load_run

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        size = write_run(run, args.problems, args.iterations, args.text_kb, args.record_format)
        print(
            f"records.jsonl: {size / 2**20:.1f} MB ({args.problems} problems x {args.iterations} iterations, "
            f"record format {args.record_format})"
        )
        for label, fn in (
            ("analysis problems()", lambda: len(a.load(run).problems())),
            ("analysis iterations()", lambda: len(a.load(run).iterations())),
            ("analysis verdicts()", lambda: len(a.load(run).verdicts())),
            ("reports load_run (all records as objects)", lambda: len(load_run(run).records)),
        ):
            mb, secs, rows = peak(fn)
            print(f"{label:45s} peak {mb:8.1f} MB  {secs:6.2f} s  ({rows} rows)")


if __name__ == "__main__":
    main()
