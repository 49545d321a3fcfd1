"""The records writer's CPU per iteration on TravelPlanner, and what it is made of.

``benchmarks/iteration_cpu.py`` times ``RunDir.append_many`` inside a run (its "writing the records"
figure), where the writer thread shares the machine with the event loop. This script takes the records
of the same run (its session: TravelPlanner validation problems, budget 10, strict critics, the
zero-latency scripted model answering wrong plans), kept as the runner hands them to the writer, and
writes them again in this thread with nothing else running, ``--repeat`` times (the least time of each
part is kept), to say what the writer's time is spent on:

* ``encode``: each record's line (:func:`modulo.recordformat.record_pieces`, no secret registered);
* of which ``verdict encodings``: each record's distinct verdict objects, each encoded once as the writer
  encodes them (what the verdict table needs; the line's own JSON and the tables' bookkeeping are the rest);
* ``write``: the lines written in groups of ``--group`` records (``os.writev``), without fsync;
* ``fsync``: one per group, on top of the writes;
* ``append_many``: the whole, as the runner calls it.

It also counts, per record: bytes, verdict objects, distinct verdict JSONs (the verdict table), and the
verdict encodings that only found a JSON already in the table (a critic that handed out the same verdict
object again, when its outcome is the same, would save them).

    python benchmarks/records_writer.py                 # 50 problems, groups of 3, best of 7
    python benchmarks/records_writer.py --limit 20 --group 8 --repeat 5
    PYTHONPATH=/other/checkout python benchmarks/records_writer.py   # measures that checkout's writer

Numbers depend on the machine and its load; the script measures, it checks nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import finish, least_time
from iteration_cpu import one_run, wrong_plans

from modulo.recordformat import encode_record
from modulo.runs import RunDir
from modulo.types import ProblemResult

try:  # the writer's own verdict encoder (a checkout before it: the verdict's pydantic serialiser)
    from modulo.recordformat import _model_json as verdict_json
except ImportError:

    def verdict_json(verdict: Any) -> bytes:
        return bytes(verdict.__pydantic_serializer__.to_json(verdict))


try:  # a checkout before the writer wrote lines in pieces (PYTHONPATH=/other/checkout measures that one)
    from modulo.recordformat import record_pieces
    from modulo.runs import _write_all
except ImportError:

    def record_pieces(result: ProblemResult, scrub: Callable[[str], str] | None = None) -> list[bytes | memoryview]:
        return [encode_record(result, scrub)]

    def _write_all(fd: int, pieces: list[bytes | memoryview]) -> None:
        os.write(fd, b"".join(pieces))


def kept_records(limit: int, budget: int, work: Path) -> list[ProblemResult]:
    """The records of one iteration_cpu-like run, as the runner hands them to ``RunDir.append_many``."""
    kept: list[ProblemResult] = []
    append_many = RunDir.append_many

    def keep(self: RunDir, results: Any) -> None:
        kept.extend(results)
        append_many(self, results)

    script, n = wrong_plans(limit, budget)
    RunDir.append_many = keep  # type: ignore[method-assign]
    try:
        one_run(script, n, budget, work, "kept")
    finally:
        RunDir.append_many = append_many  # type: ignore[method-assign]
    return kept


def least(fn: Callable[[], Any], repeat: int) -> float:
    """The least thread CPU seconds of ``repeat`` calls of ``fn``."""
    return least_time(fn, repeat, time.thread_time)


def verdict_encodings(records: list[ProblemResult]) -> tuple[int, int]:
    """Encode each record's distinct verdict objects once; (objects, distinct JSONs) over all records."""
    objects = distinct = 0
    for r in records:
        seen: set[int] = set()
        jsons: set[bytes] = set()
        for it in r.iterations:
            for v in it.verdicts:
                if id(v) not in seen:
                    seen.add(id(v))
                    jsons.add(verdict_json(v))
        objects += len(seen)
        distinct += len(jsons)
    return objects, distinct


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=50, help="validation problems (of 180)")
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--group", type=int, default=3, help="records a write (iteration_cpu's runs write 2-3)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", type=Path, help="also write the figures to this file (JSON)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="modulo-records-writer-") as tmp:
        work = Path(tmp)
        records = kept_records(args.limit, args.budget, work)
        iterations = sum(len(r.iterations) for r in records)
        groups = [records[i : i + args.group] for i in range(0, len(records), args.group)]
        lines = [[*record_pieces(r), b"\n"] for r in records]
        pieces = [[p for line in lines[i : i + args.group] for p in line] for i in range(0, len(lines), args.group)]
        target = work / "again.jsonl"

        def write(sync: bool) -> None:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for group in pieces:
                    _write_all(fd, group)
                    if sync:
                        os.fsync(fd)
            finally:
                os.close(fd)

        def append_many() -> None:
            target.unlink(missing_ok=True)
            run_dir = RunDir(work)
            for group in groups:
                run_dir.append_many(group)

        per_iteration = 1000 / iterations
        encode = least(lambda: [record_pieces(r) for r in records], args.repeat) * per_iteration
        verdicts = least(lambda: verdict_encodings(records), args.repeat) * per_iteration
        written = least(lambda: write(False), args.repeat) * per_iteration
        synced = least(lambda: write(True), args.repeat) * per_iteration
        whole = least(append_many, args.repeat) * per_iteration
        objects, distinct = verdict_encodings(records)
        size = sum(sum(len(p) for p in line) for line in lines)

    n = len(records)
    out = {
        "records": n,
        "iterations": iterations,
        "group": args.group,
        "bytes_per_record": round(size / n),
        "verdict_objects_per_record": round(objects / n, 1),
        "distinct_verdicts_per_record": round(distinct / n, 1),
        "ms_per_iteration": {
            "encode": round(encode, 4),
            "verdict_encodings": round(verdicts, 4),
            "rest_of_encode": round(encode - verdicts, 4),
            "write": round(written, 4),
            "fsync": round(synced - written, 4),
            "append_many": round(whole, 4),
        },
    }
    ms = out["ms_per_iteration"]
    print(
        f"{n} records ({iterations:,} iterations), {out['bytes_per_record']:,} bytes a record, groups of {args.group}"
    )
    print(
        f"  verdicts a record: {out['verdict_objects_per_record']} objects encoded, "
        f"{out['distinct_verdicts_per_record']} distinct (the rest found a JSON already in the table)"
    )
    print(f"  thread CPU per iteration, least of {args.repeat}, nothing else running:")
    print(f"    encode        {ms['encode']:.4f} ms  (verdict encodings {ms['verdict_encodings']:.4f}, the rest "
          f"{ms['rest_of_encode']:.4f})")  # fmt: skip
    print(f"    write         {ms['write']:.4f} ms")
    print(f"    fsync         {ms['fsync']:.4f} ms")
    print(f"    append_many   {ms['append_many']:.4f} ms  (all of it, as the runner calls it)")
    return finish(out, args.json)


if __name__ == "__main__":
    sys.exit(main())
