"""Scale of ``modulo run``: N synthesized calendar problems at budget 10, a zero-latency scripted model.

For each N, the problems are synthesized once (``modulo synth calendar --n N``, kept in the work
directory, not timed), then a real ``modulo run`` subprocess solves them with the scripted backend
answering a well-formed, always-wrong slot (so every problem uses its whole budget), then
``modulo report`` runs over the result. Printed per N:

* wall time of the run, and CPU (user + system, of the run process and its children) per iteration;
* peak RSS of the run process (``ru_maxrss`` of the waited-for child, via ``os.wait4``);
* the size of ``records.jsonl``, the iterations recorded and the outcome counts (from ``summary.json``);
* wall time and peak RSS of ``modulo report`` over the run directory;
* with two sizes or more, the slope of peak RSS against the number of problems (a least-squares line
  through the sizes measured), in KB per problem, for the run and for the report: what memory grows by
  with each problem (flat memory: near zero).

    python benchmarks/scale.py                          # N = 1,000 and 10,000, budget 10
    python benchmarks/scale.py --n 1000 10000 100000 --budget 10 --keep /tmp/scale-work
    python benchmarks/scale.py --n 1000 10000 --keep /tmp/scale-work --report-only  # the kept runs' reports

It then checks issue 15's targets for the sizes it measured: with 1,000 and 10,000 problems, the
10,000-problem run's peak RSS within 20 % of the 1,000-problem run's and under 300 MB; with 5,000
problems, that run under 60 seconds of wall time. Numbers depend on the machine and its load.

Exit status: 0 when every target checked is met (or none could be checked), 1 when one is not, 2 when
a run or a report exited non-zero or a run made another number of iterations than problems x budget
(the figures assume every problem runs to its budget).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: the command line, run by this interpreter from the current directory (run the script from another
#: checkout, with PYTHONPATH=. , to measure that checkout)
MODULO = [
    sys.executable,
    "-c",
    "import sys; from modulo.cli.main import main; sys.argv[0] = 'modulo'; sys.exit(main())",
]


def wrong_slots(budget: int) -> list[str]:
    """Well-formed slots (the JSON plan the loop reads with ``reformulator.mode=none``), outside any work
    hours and of the wrong length, a different one each iteration (a repeated plan would end the problem
    at its fixed point), so that every iteration is parsed and every critic runs and rejects it."""
    return [json.dumps({"day": "Sunday", "start": f"3:{i:02d}", "end": f"3:{i + 7:02d}"}) for i in range(budget)]


def measured(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``argv`` to its end; wall seconds, CPU seconds and peak RSS (MB) of it, its exit status."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()  # read before waiting, so a chatty child never blocks on a full pipe
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    out = {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,  # kilobytes on Linux
        "rc": proc.returncode,
    }
    if proc.returncode not in (0,):
        tail = err.decode("utf-8", "replace")[-2000:]
        print(f"  {' '.join(argv[:3])} ... exited {proc.returncode}:\n{tail}", file=sys.stderr)
    return out


def slope_kb(points: dict[int, float]) -> float:
    """Least-squares slope of peak RSS (MB) against problems, in KB per problem (NaN with one size)."""
    if len(points) < 2:
        return float("nan")
    xs, ys = list(points), list(points.values())
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return 1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def one(
    n: int, budget: int, work: Path, env: dict[str, str], report: bool = True, run_again: bool = True
) -> dict[str, Any]:
    problems = work / f"calendar-{n}.jsonl"
    if not problems.exists():
        t0 = time.perf_counter()
        subprocess.run(
            [*MODULO, "synth", "calendar", "--n", str(n), "--seed", "0", "--out", str(problems)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        print(f"  synthesized {n} problems in {time.perf_counter() - t0:.1f} s (not counted)", file=sys.stderr)
    script = work / f"script-{budget}.json"
    script.write_text(json.dumps({"*": wrong_slots(budget)}))
    run_dir = work / f"run-{n}-{budget}"
    if not run_again and not (run_dir / "summary.json").is_file():
        raise SystemExit(f"--report-only: no finished run in {run_dir}")
    if run_again:
        shutil.rmtree(run_dir, ignore_errors=True)
    run = (
        measured(
            [
                *MODULO,
                "run",
                "benchmark=synth/calendar",
                f"benchmark.path={problems}",
                "llm=scripted",
                f"llm.script={script}",
                "cache.mode=off",
                "reformulator.mode=none",
                f"metacontroller.max_iterations={budget}",
                f"run.dir={run_dir}",
                "run.progress=false",
                "run.report=false",
            ],
            env,
        )
        if run_again
        else {"wall_s": float("nan"), "cpu_s": float("nan"), "peak_rss_mb": float("nan"), "rc": 0}
    )
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    out = work / f"report-{n}-{budget}"
    shutil.rmtree(run_dir / "report_cache", ignore_errors=True)  # the report scores the budget curve afresh
    reported = measured([*MODULO, "report", str(run_dir), "--out", str(out)], env) if report else None
    iterations = int(summary.get("iterations") or 0)
    records = run_dir / "records.jsonl"
    return {
        "n": n,
        "budget": budget,
        "run": run,
        "iterations": iterations,
        "counts": summary.get("counts"),
        "cpu_ms_per_iteration": 1000 * run["cpu_s"] / iterations if iterations else float("nan"),
        "records_mb": records.stat().st_size / 1e6 if records.exists() else 0.0,
        "report": reported,
    }


#: issue 15's targets: peak RSS of 10,000 problems against 1,000 (ratio, MB), and 5,000 problems' wall (s)
RSS_RATIO, RSS_MB, WALL_5000_S = 1.20, 300.0, 60.0


def targets(results: dict[int, dict[str, Any]]) -> list[tuple[str, bool]]:
    """Issue 15's targets that the measured sizes allow checking: (what was measured, met)."""
    checked = []
    if 1000 in results and 10000 in results:
        small, large = results[1000]["run"]["peak_rss_mb"], results[10000]["run"]["peak_rss_mb"]
        ratio = large / small
        checked.append(
            (
                f"peak RSS of 10,000 problems within {RSS_RATIO - 1:.0%} of 1,000's and under {RSS_MB:.0f} MB: "
                f"{large:.0f} MB = {ratio:.2f}x {small:.0f} MB",
                ratio <= RSS_RATIO and large < RSS_MB,
            )
        )
    if 5000 in results:
        wall = results[5000]["run"]["wall_s"]
        checked.append((f"5,000 problems under {WALL_5000_S:.0f} s: {wall:.1f} s", wall < WALL_5000_S))
    return checked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 10000], help="problem counts (100000 is an option)")
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--keep", type=Path, help="work directory to keep (problem sets are reused from it)")
    ap.add_argument("--no-report", action="store_true", help="measure the run only, not `modulo report` over it")
    ap.add_argument("--json", action="store_true", help="print the raw figures as JSON lines too")
    ap.add_argument(
        "--report-only", action="store_true", help="measure `modulo report` over the runs kept in --keep, not the runs"
    )
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="modulo-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MODULO_CACHE_DIR": str(work / "cache")}
    print("| problems | budget | wall | CPU/iter | peak RSS | records | iterations | outcomes | report | report RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    if args.report_only and (args.keep is None or args.no_report):
        raise SystemExit("--report-only needs --keep DIR (the runs to report on) and no --no-report")
    peaks: dict[int, float] = {}
    report_peaks: dict[int, float] = {}
    results: dict[int, dict[str, Any]] = {}
    broken: list[str] = []
    try:
        for n in args.n:
            r = one(n, args.budget, work, env, report=not args.no_report, run_again=not args.report_only)
            if r["run"]["rc"] != 0:
                broken.append(f"the run of {n:,} problems exited {r['run']['rc']}")
            elif r["report"] is not None and r["report"]["rc"] != 0:
                broken.append(f"the report over {n:,} problems exited {r['report']['rc']}")
            elif r["iterations"] != n * args.budget:
                broken.append(f"the run of {n:,} problems made {r['iterations']:,} iterations, not {n * args.budget:,}")
            elif not args.report_only:
                results[n] = r
            if not args.report_only:
                peaks[n] = r["run"]["peak_rss_mb"]
            if r["report"] is not None and r["report"]["rc"] == 0:
                report_peaks[n] = r["report"]["peak_rss_mb"]
            run, rep = r["run"], r["report"]
            failed = "" if run["rc"] == 0 else f" (exit {run['rc']})"
            if rep is None:
                rep_wall, rep_rss = "not run", ""
            else:
                rep_wall = f"{rep['wall_s']:.1f} s" + ("" if rep["rc"] == 0 else f" (exit {rep['rc']})")
                rep_rss = f"{rep['peak_rss_mb']:.0f} MB"
            if args.report_only:  # the run was kept from before: its figures were printed then
                wall = cpu = rss = "kept"
            else:
                wall = f"{run['wall_s']:.1f} s{failed}"
                cpu, rss = f"{r['cpu_ms_per_iteration']:.2f} ms", f"{run['peak_rss_mb']:.0f} MB"
            print(
                f"| {n:,} | {r['budget']} | {wall} | {cpu} | {rss} | {r['records_mb']:.1f} MB | {r['iterations']:,} "
                f"| {r['counts']} | {rep_wall} | {rep_rss} |",
                flush=True,
            )
            if args.json:
                print(json.dumps(r))
        smallest = min(peaks, default=0)
        for n, peak in peaks.items():
            if n != smallest and peaks[smallest]:
                print(f"peak RSS at {n:,} problems: {peak / peaks[smallest]:.2f}x that of {smallest:,}")
        for what, points in (("run", peaks), ("report", report_peaks)):
            if len(points) >= 2:
                fit = f"least squares over {list(points)}"
                print(f"{what}: peak RSS grows by {slope_kb(points):.2f} KB per problem ({fit})")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    for what in broken:
        print(f"not measured: {what}")
    checked = targets(results) if args.budget == 10 else []  # the targets are for budget 10
    for what, met in checked:
        print(f"target: {what}: {'met' if met else 'NOT met'}")
    if broken:
        return 2
    return 0 if all(met for _, met in checked) else 1


if __name__ == "__main__":
    sys.exit(main())
