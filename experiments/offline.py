"""The sweep -> report -> cached re-run path on TravelPlanner, offline, against the fake provider.

No API key and no network: a fake OpenAI-compatible server on 127.0.0.1
(:class:`modulo.testing.fake_server.FakeProvider`) answers every request with a plan built from
TravelPlanner's annotated train plans, chosen by the problem id and the iteration the request is
tagged with (``llm.args.tag_headers=true``):

* ``train-1``: at iteration 0 its annotated plan with one attraction repeated (a commonsense
  failure, ``diverse_attractions``, that no hard critic sees), from iteration 1 the annotated plan;
* ``train-16``: at iteration 0 a refusal (no plan: the ``format`` critic fails), then the annotated plan;
* ``train-31``: the annotated plan at once.

Because every reply is a function of (problem, iteration, stage), the results do not depend on job
order, process layout or cache hits. Expected Table 1 rows (final pass rate): [All] and [Common] 100%,
[Hard] and [Json] 66.7% (they certify the plan with the repeated attraction), Direct and CoT 33.3%.

Run it::

    python experiments/offline.py                       # critics=all,common,hard, joblib launcher
    python experiments/offline.py --preset table1 --launcher basic
    python experiments/offline.py --launcher ray_local  # needs pip install -e ".[ray]"

It runs the sweep, ``modulo report`` on the sweep root, then the same sweep again with the same
response cache, and prints how many requests reached the server and how long each step took.
The tests in ``tests/experiments/`` use :class:`Scenario` and :func:`sweep_args` from this file.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: problem id -> what the fake model answers at iterations 0, 1, ... (the last entry repeats)
SCRIPT: dict[str, list[str]] = {
    "train-1": ["defective", "good"],
    "train-16": ["refusal", "good"],
    "train-31": ["good"],
}
PROBLEM_IDS = list(SCRIPT)
REFUSAL = "I am sorry, I could not find a plan that fits this query."
NO_PLAN = "The text holds no travel plan."

#: the sweeps this file knows: name -> overrides (besides the LLM and data ones)
PRESETS: dict[str, list[str]] = {
    # the "must show" sweep: three critic subsets, the generator answers in JSON (no reformulation call)
    "critics": ["critics=all,common,hard", "generator.prompt=json", "reformulator=none"],
    # the Table 1 preset as shipped (six methods, LLM reformulation)
    "table1": ["+experiment=llm_modulo_table1"],
}
#: final pass rate (%) per method label / critic subset, for the scenario above
EXPECTED_FINAL_PASS = {
    "Direct": 100 / 3,
    "CoT": 100 / 3,
    "LLM-Modulo [All]": 100.0,
    "LLM-Modulo [Common]": 100.0,
    "LLM-Modulo [Hard]": 200 / 3,
    "LLM-Modulo [Json]": 200 / 3,
    "[All]": 100.0,
    "[Common]": 100.0,
    "[Hard]": 200 / 3,
}


def _days(plan: Any) -> list[dict[str, Any]]:
    return [dict(d) for d in plan if d]


@dataclass
class Scenario:
    """Replies of the fake model, built from the annotated train plans in ``data_dir``."""

    data_dir: Path
    plans: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from critics.travelplanner.benchmark import TravelPlanner
        from critics.travelplanner.data import load_annotated_plans

        annotated = load_annotated_plans(self.data_dir / "travelplanner")
        bench = TravelPlanner(self.data_dir)
        problems = {p.id: p for p in bench.load("train")}
        for pid in PROBLEM_IDS:
            good = _days(annotated[int(pid.split("-")[1])])
            self.plans[f"{pid}/good"] = good
            self.plans[f"{pid}/defective"] = repeat_an_attraction(good)
            for kind in ("good", "defective"):
                self.texts[f"{pid}/{kind}"] = bench.plan_text(self.plans[f"{pid}/{kind}"], problems[pid])

    def kind(self, problem_id: str, iteration: int) -> str:
        steps = SCRIPT[problem_id]
        return steps[min(iteration, len(steps) - 1)]

    def reply_for(self, problem_id: str, iteration: int, stage: str, *, json_generator: bool) -> str:
        """The reply to a ``generate`` or ``reformulate`` request of ``problem_id`` at ``iteration``."""
        kind = self.kind(problem_id, iteration)
        if kind == "refusal":
            return NO_PLAN if stage == "reformulate" else REFUSAL
        key = f"{problem_id}/{kind}"
        if stage == "reformulate" or json_generator:
            return json.dumps(self.plans[key])
        return self.texts[key]

    def reply(self, request: Any) -> str:
        """A :class:`FakeProvider` reply function (reads the ``X-Modulo-*`` tag headers)."""
        headers = request.headers
        pid = headers.get("x-modulo-problem-id") or request.problem_id
        iteration = int(headers.get("x-modulo-iteration", "0"))
        stage = headers.get("x-modulo-stage", "generate")
        # the JSON planner prompt asks for a JSON array; the direct/CoT prompts for text
        prompt = " ".join(m["content"] for m in request.messages)
        json_generator = "Answer with a JSON array only" in prompt
        return self.reply_for(pid, iteration, stage, json_generator=json_generator)


def repeat_an_attraction(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``plan`` with the first listed attraction visited a second time on the next day that has a city stay."""
    out = copy.deepcopy(plan)
    first = next(i for i, d in enumerate(out) if d.get("attraction") not in (None, "", "-"))
    again = out[first]["attraction"].split(";")[0] + ";"
    target = next((i for i in range(first + 1, len(out)) if out[i].get("attraction") not in (None, "", "-")), first)
    out[target]["attraction"] = out[target]["attraction"] + again if target != first else again + again
    return out


def sweep_args(
    base_url: str,
    sweep_dir: Path,
    cache_dir: Path,
    *,
    preset: str = "critics",
    launcher: str = "basic",
    extra: Sequence[str] = (),
    run_reports: bool = False,
) -> list[str]:
    """``modulo run -m`` arguments of the offline sweep (without the program name).

    Jobs write no report of their own unless ``run_reports``: one ``modulo report`` over the sweep
    root covers them all (a report per job costs about 2 s each here).
    """
    return [
        "run",
        "-m",
        *PRESETS[preset],
        f"hydra/launcher={launcher}",
        "llm=openai",
        "llm.model=gpt-4o-mini",  # priced in the built-in table, so reports show what calls cost
        f"llm.base_url={base_url}",
        "+llm.args.tag_headers=true",
        "benchmark=travelplanner",
        "benchmark.split=train",
        f"benchmark.ids=[{','.join(PROBLEM_IDS)}]",
        f"cache.dir={cache_dir}",
        f"hydra.sweep.dir={sweep_dir}",
        "run.progress=false",
        f"run.report={str(run_reports).lower()}",
        *extra,
    ]


def modulo(args: Sequence[str], *, timeout: float = 600, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """Run ``python -m modulo.cli.main ARGS``; (exit status, stdout + stderr, seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "modulo.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0


def job_dirs(sweep_dir: Path) -> list[Path]:
    """The run directories of a sweep, in job order."""
    return sorted((p for p in sweep_dir.iterdir() if (p / "run.json").is_file()), key=lambda p: int(p.name))


def sweep_usage(sweep_dir: Path) -> dict[str, float]:
    """Usage summed over a sweep's runs (from each run's summary.json)."""
    total: dict[str, float] = {}
    for d in job_dirs(sweep_dir):
        for key, value in json.loads((d / "summary.json").read_text())["usage"].items():
            total[key] = total.get(key, 0) + value
    return total


def main(argv: Sequence[str] | None = None) -> int:
    from modulo.settings import data_dir
    from modulo.testing.fake_server import FakeProvider

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--preset", choices=sorted(PRESETS), default="critics")
    p.add_argument("--launcher", default="joblib", help="basic | joblib | ray_local | submitit_local")
    p.add_argument("--out", type=Path, default=None, help="where the sweeps go (default: a temporary folder)")
    args = p.parse_args(argv)
    root = data_dir(None)
    if not (root / "travelplanner").is_dir():
        print("TravelPlanner data not found: set MODULO_DATA_DIR", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="modulo-offline-"))
    scenario = Scenario(root)
    with FakeProvider(scenario.reply) as fake:
        for name in ("first", "again"):
            sweep = out / name
            code, text, secs = modulo(
                sweep_args(fake.openai_base_url, sweep, out / "cache", preset=args.preset, launcher=args.launcher)
            )
            if code != 0:
                print(text[-4000:], file=sys.stderr)
                return code
            usage = sweep_usage(sweep)
            print(
                f"{name:5} sweep: {len(job_dirs(sweep))} jobs in {secs:.1f}s via {args.launcher}; "
                f"requests at the server so far {fake.stats().requests}; calls {usage['calls']:.0f}, "
                f"cached {usage['cached_calls']:.0f}, cost ${usage['cost_usd']:.4f}, "
                f"cached cost ${usage['cached_cost_usd']:.4f}"
            )
            if name == "first":
                code, text, secs = modulo(["report", str(sweep), "--resamples", "1000"])
                print(text)
                print(f"report: {secs:.1f}s (exit {code})")
    print(f"sweeps in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
