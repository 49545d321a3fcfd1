"""Speed and size of ``modulo view`` on synthetic TravelPlanner-shaped runs, opened in headless Chromium.

A synthetic run: ``--problems`` problems x ``--iterations`` iterations, 14 critics whose verdicts change
at random, a TravelPlanner-shaped plan (3-7 days) per iteration, and per problem a unique reference
text of ``--context-chars`` characters that every prompt and backprompt repeats (as TravelPlanner's
real prompts do: a real scripted run records about 750 KB per problem at 10 iterations).

Figures printed for each size:
* the time to build the view (read records.jsonl, write the page and any chunk files) and the sizes;
* in Chromium (system packages, via selenium; skipped with the reason if not installed): the time from
  navigation start to the problem list on screen (``window.moduloRenderedAt``, the page's own mark), and
  the time to open one problem (parse or load its data and draw the verdict matrix and the timeline).

    python benchmarks/view_speed.py [--problems 180] [--iterations 10] [--context-chars 20000]
    python benchmarks/view_speed.py --problems 5000 --context-chars 2000

Timings on a loaded shared machine are pessimistic.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import record_format_option, write_record, write_run_info

from modulo.types import IterationRecord, LLMCall, Message, Outcome, ProblemResult, Usage, Verdict, plan_fingerprint
from modulo.view import ViewOptions, build_view

ROOT = Path(__file__).resolve().parent.parent
CRITICS = [
    ("format", "format"),
    *[
        (c, "commonsense")
        for c in (
            "within_sandbox",
            "complete_information",
            "within_current_city",
            "reasonable_city_route",
            "diverse_restaurants",
            "diverse_attractions",
            "non_conflicting_transportation",
            "minimum_nights_stay",
        )
    ],
    *[(c, "hard") for c in ("budget", "room_rule", "room_type", "cuisine", "transportation")],
]
WORDS = "city flight hotel cafe museum park river tower garden bridge market station harbor".split()


def _text(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(WORDS) + str(rng.randint(0, 999))
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def _plan(rng: random.Random, days: int) -> list[dict[str, Any]]:
    return [
        {
            "days": d + 1,
            "current_city": f"City{rng.randint(0, 30)}",
            "transportation": f"Flight Number: F{rng.randint(1000000, 9999999)}",
            "breakfast": f"Cafe {rng.randint(0, 500)}",
            "attraction": f"Museum {rng.randint(0, 500)};Park {rng.randint(0, 500)};",
            "lunch": f"Diner {rng.randint(0, 500)}",
            "dinner": f"Bistro {rng.randint(0, 500)}",
            "accommodation": f"Hotel {rng.randint(0, 500)}",
        }
        for d in range(days)
    ]


def synthetic_run(
    path: Path,
    n_problems: int,
    n_iterations: int,
    context_chars: int,
    template_chars: int = 3000,
    seed: int = 0,
    record_format: int = 2,
) -> Path:
    rng = random.Random(seed)
    ids = [f"validation-{i}" for i in range(n_problems)]
    write_run_info(path, "travelplanner", "validation", [c for c, _ in CRITICS], n_iterations, ids)
    template = ("You are an expert travel planner. " * (template_chars // 34 + 1))[:template_chars]
    with (path / "records.jsonl").open("w") as fh:
        for pid in ids:
            context = _text(rng, context_chars)
            days = rng.choice([3, 5, 7])
            first = f"{template}\nGiven information: {context}\nQuery: plan {pid}"
            prompt = first
            iterations = []
            for k in range(n_iterations):
                plan = _plan(rng, days)
                reply = "\n".join(f"Day {d['days']}: " + "; ".join(map(str, d.values())) for d in plan)
                verdicts = [
                    Verdict(
                        critic=c,
                        group=g,
                        passed=rng.random() < 0.7,
                        feedback=f"{c}: day {rng.randint(1, days)} {_text(rng, 120)}",
                    )
                    for c, g in CRITICS
                ]
                # the paper's "all" strategy: the task again, the previous plan and every failure
                backprompt = f"{first}\nYour previous plan:\n{reply}\nProblems:\n" + "\n".join(
                    v.feedback for v in verdicts if not v.passed
                )
                usage = Usage(calls=2, input_tokens=len(prompt) // 4, output_tokens=len(reply) // 4, cost_usd=0.01)
                iterations.append(
                    IterationRecord(
                        index=k,
                        prompt=[Message(role="user", content=prompt)],
                        raw_reply=reply,
                        plan=plan,
                        plan_sha256=plan_fingerprint(plan),
                        verdicts=verdicts,
                        backprompt=backprompt,
                        calls=[
                            LLMCall(stage="generate", messages=[Message(role="user", content=prompt)], reply=reply),
                            LLMCall(
                                stage="reformulate",
                                messages=[Message(role="user", content=f"Rewrite as JSON:\n{reply}")],
                                reply=json.dumps(plan),
                            ),
                        ],
                        usage=usage,
                    )
                )
                prompt = backprompt
            rec = ProblemResult(
                problem_id=pid,
                benchmark="travelplanner",
                outcome=Outcome.EXHAUSTED,
                stop_reason="iterations",
                best_plan=iterations[-1].plan,
                best_iteration=n_iterations - 1,
                iterations=iterations,
                metadata={"level": rng.choice(["easy", "medium", "hard"])},
            )
            write_record(fh, rec, record_format)
    return path


def _size(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def measure_browser(page: Path, first_id: str) -> str:
    sys.path.insert(0, str(ROOT))
    from tests.view.browser import BrowserUnavailable, console_errors, start_browser

    try:
        driver = start_browser()
    except BrowserUnavailable as exc:
        return f"browser: skipped ({exc})"
    try:
        loads, opens = [], []
        for _ in range(3):
            driver.get("about:blank")
            driver.get(page.as_uri() + "#/overview")
            end = time.monotonic() + 60
            while driver.execute_script("return window.moduloRenderedAt") is None and time.monotonic() < end:
                time.sleep(0.01)
            loads.append(float(driver.execute_script("return window.moduloRenderedAt")))
            ms = driver.execute_async_script(
                """const [id, done] = arguments; const t0 = performance.now();
                location.hash = '#/p/' + encodeURIComponent(id);
                const poll = () => document.getElementById('matrix') && document.querySelector('section.iteration')
                  ? done(performance.now() - t0) : setTimeout(poll, 2);
                poll();""",
                first_id,
            )
            opens.append(float(ms))
        errors = console_errors(driver)
    finally:
        driver.quit()
    return (
        f"browser: problem list on screen {min(loads):.0f} ms after navigation start (best of 3; all {loads!r}), "
        f"one problem opened in {min(opens):.0f} ms (all {[round(x) for x in opens]}); console errors: {len(errors)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=180)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--context-chars", type=int, default=20000)
    ap.add_argument("--template-chars", type=int, default=3000)
    ap.add_argument("--split-above", type=int, default=ViewOptions().split_above)
    ap.add_argument("--keep", type=Path, default=None, help="write the run and page here instead of a temp dir")
    record_format_option(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        t0 = time.perf_counter()
        run = synthetic_run(
            base / "run",
            args.problems,
            args.iterations,
            args.context_chars,
            args.template_chars,
            record_format=args.record_format,
        )
        made = time.perf_counter() - t0
        print(
            f"synthetic run: {args.problems} problems x {args.iterations} iterations, "
            f"{args.context_chars:,} context chars; record format {args.record_format}, "
            f"records.jsonl {_size(run / 'records.jsonl')} "
            f"(written in {made:.1f} s)"
        )
        t0 = time.perf_counter()
        view = build_view(run, None, ViewOptions(split_above=args.split_above))
        page = view.page
        built = time.perf_counter() - t0
        chunks = [run / rel for rel in view.files if rel != view.main]
        total = sum(p.stat().st_size for p in chunks)
        print(
            f"modulo view: {built:.1f} s; page {_size(page)}"
            + (f" + {len(chunks)} chunk files, {total / 1e6:.1f} MB in all" if chunks else " (one file)")
        )
        print(measure_browser(page, "validation-0"))


if __name__ == "__main__":
    main()
