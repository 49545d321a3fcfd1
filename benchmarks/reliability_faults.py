"""Faults and kills at full size: what 20% faulted requests cost, and whether any paid request repeats.

    python benchmarks/reliability_faults.py                    # 180 problems, 20% faults, 10 kills
    python benchmarks/reliability_faults.py --problems 60 --kills 5 --json out.json

Every run is a real ``modulo run`` process (synth/tasks, the LLM reformulator, the OpenAI SDK, the
response cache, a run directory) against the fake provider in this process, which answers from a
scripted model (a quarter of the problems certified at once, a quarter after one backprompt, a
quarter never, a quarter with no plan at all) and counts every request.

1. A fault-free run, then the same answers with one request in five faulted by every kind the
   client retries (429 with and without Retry-After, 500, 503, 529, dropped connections, empty
   replies), then the same with timeouts in the mix (``--timeout`` seconds each). For each faulted
   run: outcomes, plans, replies and verdicts equal to the fault-free run's, no problem lost, the
   faults in the traces by class against the server's count, the wall-time ratio to the fault-free
   run, and the requests sent again after a normal answer (repeated paid requests; goal zero).
2. The run killed with SIGKILL at ``--kills`` random moments and resumed each time: equal to the
   uninterrupted run, with every request classified at the server (first send, retry after a
   fault, re-send of a request in flight at a kill, re-send of a recorded one: goal zero).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import conclude

from modulo.build import build_session
from modulo.testing import FakeProvider
from modulo.testing.drills import (
    RETRIED_FAULTS,
    KillSwitch,
    Launcher,
    PlanModel,
    comparable,
    compose,
    drill_overrides,
    expected_trace_faults,
    fault_pattern,
    fault_rates,
    kill_drill,
    paid_repeats,
    records,
    request_digest,
    trace_faults,
    witness_answers,
)


def cli_run(launcher: Launcher, overrides: list[str], log: Path) -> tuple[float, float]:
    """Run ``modulo run OVERRIDES`` to the end: (process wall seconds, the run's own seconds)."""
    started = time.perf_counter()
    launcher.start(overrides, log)
    code, out = launcher.wait(3600)
    wall = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"modulo run exited with {code}:\n{out[-3000:]}")
    run_dir = Path(next(o.split("=", 1)[1] for o in overrides if o.startswith("run.dir=")))
    seconds = float(json.loads((run_dir / "summary.json").read_text())["seconds"])
    return wall, seconds


def faulted_run(
    fake: FakeProvider,
    launcher: Launcher,
    tmp: Path,
    name: str,
    n: int,
    kinds: tuple[str, ...],
    clean: dict[str, Any],
    clean_requests: int,
    timeout_s: float,
) -> dict[str, Any]:
    fake.reset_stats()
    fake.push_faults(*fault_pattern(6 * clean_requests, 0.2, kinds, seed=11))
    overrides = drill_overrides(fake.openai_base_url, tmp / name, tmp / f"{name}-cache", n=n, timeout_s=timeout_s)
    wall, seconds = cli_run(launcher, overrides, tmp / f"{name}.log")
    stats = fake.stats()
    with fake._lock:  # the queue may hold unused entries
        fake._queue.clear()
    results = records(tmp / name)
    faults = {k: v for k, v in stats.by_fault.items() if k != "ok"}
    return {
        "requests": stats.requests,
        "faulted": sum(faults.values()),
        "faulted_share": round(sum(faults.values()) / stats.requests, 4),
        "faults_at_server": faults,
        "faults_in_traces": dict(trace_faults(results.values())),
        "traces_match_server": trace_faults(results.values()) == expected_trace_faults(stats.by_fault),
        "problems_recorded": len(results),
        "same_as_fault_free": comparable(tmp / name) == clean,
        "outcomes": dict(Counter(r.outcome.value for r in results.values())),
        "repeated_paid_requests": len(paid_repeats(fake.requests)),
        "extra_requests_are_retries": stats.requests == clean_requests + sum(faults.values()),
        "wall_s": round(wall, 2),
        "run_s": round(seconds, 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--problems", type=int, default=180)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--kill-problems", type=int, default=None, help="problems of the kill drill (default --problems)")
    p.add_argument("--timeout", type=float, default=2.0, help="client timeout for the 'timeout' fault (seconds)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, help="write the figures here too")
    args = p.parse_args(argv)
    out: dict[str, Any] = {"problems": args.problems}
    model = PlanModel()
    switch = KillSwitch(model)
    launcher = Launcher()
    with tempfile.TemporaryDirectory() as tmp_name, FakeProvider(switch, retry_after_s=0.01, hang_s=60.0) as fake:
        tmp = Path(tmp_name)
        clean_overrides = drill_overrides(fake.openai_base_url, tmp / "clean", tmp / "clean-cache", n=args.problems)
        session = build_session(compose(clean_overrides))
        model.answers, kinds = witness_answers(session.problems, session.critics)
        out["kinds"] = dict(Counter(kinds.values()))
        print(f"{args.problems} problems {out['kinds']}: fault-free run...", flush=True)
        wall, seconds = cli_run(launcher, clean_overrides, tmp / "clean.log")
        clean = comparable(tmp / "clean")
        clean_requests = fake.stats().requests
        out["fault_free"] = {
            "requests": clean_requests,
            "outcomes": dict(Counter(r.outcome.value for r in records(tmp / "clean").values())),
            "wall_s": round(wall, 2),
            "run_s": round(seconds, 2),
        }
        no_timeouts = tuple(k for k in RETRIED_FAULTS if k != "timeout")
        for name, mix in (("faults20", no_timeouts), ("faults20_with_timeouts", RETRIED_FAULTS)):
            print(f"20% faulted run ({', '.join(mix)})...", flush=True)
            res = faulted_run(fake, launcher, tmp, name, args.problems, mix, clean, clean_requests, args.timeout)
            res["wall_ratio"] = round(res["wall_s"] / out["fault_free"]["wall_s"], 3)
            res["run_ratio"] = round(res["run_s"] / out["fault_free"]["run_s"], 3)
            out[name] = res

        # the kill drill, with a light fault mix so that retries are told apart from repeats
        n_kill = args.kill_problems or args.problems
        fake.reset_stats()
        ref = drill_overrides(fake.openai_base_url, tmp / "kref", tmp / "kref-cache", n=n_kill)
        print(f"kill drill on {n_kill} problems: uninterrupted run...", flush=True)
        cli_run(launcher, ref, tmp / "kref.log")
        ref_digests = {request_digest(r.messages) for r in fake.requests}
        ref_requests = fake.stats().requests
        fake.fault_rates = fault_rates(0.1, ("rate_limit", "server_error", "reset"))
        print(f"... and {args.kills} SIGKILLs with resumes...", flush=True)
        report = kill_drill(
            fake,
            switch,
            drill_overrides(fake.openai_base_url, tmp / "killed", tmp / "killed-cache", n=n_kill),
            run_dir=tmp / "killed",
            cache_file=tmp / "killed-cache" / "llm-cache.sqlite",
            kills=args.kills,
            expected_requests=ref_requests,
            seed=args.seed,
            launcher=launcher,
        )
        kinds_of_sends = Counter(s.kind for s in report.sends)
        out["kill_drill"] = {
            "problems": n_kill,
            "kills": report.kills,
            "uninterrupted_requests": ref_requests,
            "requests": report.requests,
            "sends": dict(kinds_of_sends),
            "resent_in_flight_reply_already_written": report.resent_reply_written,
            "repeated_paid_requests": report.repeated_paid,
            "same_requests_as_uninterrupted": report.digests == ref_digests
            and kinds_of_sends["first"] == len(ref_digests),
            "same_as_uninterrupted": comparable(tmp / "killed") == comparable(tmp / "kref"),
            "problems_recorded": len(records(tmp / "killed")),
            "seconds": round(report.seconds, 1),
        }

    ok = True
    verdicts: list[str] = []
    for name in ("faults20", "faults20_with_timeouts"):
        r = out[name]
        ok &= r["same_as_fault_free"] and r["traces_match_server"] and r["problems_recorded"] == args.problems
        verdicts.append(
            f"{name}: {r['faulted']} of {r['requests']} requests faulted ({r['faulted_share']:.1%}); "
            f"same outcomes and plans: {r['same_as_fault_free']}; faults in traces match the server: "
            f"{r['traces_match_server']}; wall-time ratio vs fault-free {r['wall_ratio']:.2f} "
            f"(run time ratio {r['run_ratio']:.2f}); repeated paid requests: {r['repeated_paid_requests']}"
        )
        ok &= r["repeated_paid_requests"] == 0
    k = out["kill_drill"]
    ok &= k["same_as_uninterrupted"] and k["same_requests_as_uninterrupted"] and k["repeated_paid_requests"] == 0
    verdicts.append(
        f"kill drill: {k['kills']} SIGKILLs, {k['requests']} requests for {k['uninterrupted_requests']} uninterrupted "
        f"(resent in flight at a kill {k['sends'].get('resent_after_kill', 0)}, retried after a fault "
        f"{k['sends'].get('retried_after_fault', 0)}); same results: {k['same_as_uninterrupted']}; "
        f"repeated paid requests: {k['repeated_paid_requests']}"
    )
    return conclude(out, verdicts, ok, args.json)


if __name__ == "__main__":
    sys.exit(main())
