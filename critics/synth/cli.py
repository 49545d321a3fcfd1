"""``modulo synth FAMILY --n N --seed S --out FILE.jsonl``: write a fixed set of synthesized problems.

The file holds one :class:`~modulo.types.Problem` per line; run on it with
``benchmark=synth/FAMILY benchmark.path=FILE.jsonl``. Knobs of the family go in ``--knob NAME=VALUE``
(values are read as JSON when they parse, e.g. ``--knob n_actions=6 --knob kinds='["precedence"]'``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from modulo.benchmark import CommandParser
from modulo.errors import ConfigError
from modulo.registry import bind_arguments

from .benchmark import BENCHMARKS, SPLIT, SynthBenchmark, write_problems


def _parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="modulo synth", description=__doc__.split("\n\n")[0])
    p.add_argument("family", help="tasks, calendar or trip (synth/ prefix allowed)")
    p.add_argument("--n", type=int, default=50, help="number of problems (default 50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True, help="output .jsonl file")
    p.add_argument("--difficulty", default="easy", choices=("easy", "medium", "hard"))
    p.add_argument(
        "--unsolvable-fraction", type=float, default=0.0, help="share of problems with an injected contradiction"
    )
    p.add_argument("--topic", default=None, help="fix the skin (job, meeting kind or region)")
    p.add_argument("--wording-seed", type=int, default=None, help="re-draw the wordings only")
    uniq = p.add_mutually_exclusive_group()
    uniq.add_argument("--unique", dest="unique", action="store_true", default=None, help="force a unique solution")
    uniq.add_argument("--no-unique", dest="unique", action="store_false", help="do not force uniqueness")
    p.add_argument(
        "--hidden",
        type=int,
        default=0,
        metavar="K",
        help="hold back K stated requirements per problem (told by a user in the loop; see --hidden-mode)",
    )
    p.add_argument(
        "--hidden-mode",
        default="ask",
        choices=("ask", "update"),
        help="ask: told when the planner asks (problem.hidden); update: injected after turns k, k+1, ...",
    )
    p.add_argument("--update-after", type=int, default=1, metavar="k", help="--hidden-mode update: the first turn")
    p.add_argument(
        "--hide-contradiction",
        action="store_true",
        help="with --unsolvable-fraction: hold back the injected contradiction first (a user's update makes "
        "the problem unsolvable)",
    )
    p.add_argument(
        "--knob",
        "--arg",
        dest="knob",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="family knob (repeatable)",
    )
    return p


def _knobs(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--knob {item!r}: expected NAME=VALUE")
        name, raw = item.split("=", 1)
        try:
            out[name.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[name.strip()] = raw
    return out


def _write(bench: SynthBenchmark, path: Path) -> tuple[int, int, int]:
    """Write the benchmark's problems to ``path``: (problems, unsolvable ones, requirements held back)."""
    written = unsolvable = held = 0
    for p in write_problems(bench.iter_problems(SPLIT), path):
        written += 1
        unsolvable += not p.metadata["solvable"]
        held += len(p.metadata.get("hidden_ids", []))
    return written, unsolvable, held


def synth_main(argv: list[str], out: TextIO | None = None) -> int:
    """Write ``--n`` problems of a family to ``--out``; print a one-line summary. Exit code."""
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    family = args.family.removeprefix("synth/")
    if family not in BENCHMARKS:
        raise ConfigError(f"unknown family {args.family!r}; choose from {', '.join(BENCHMARKS)}")
    cls = BENCHMARKS[family]
    given = {
        "n": args.n,
        "seed": args.seed,
        "difficulty": args.difficulty,
        "unsolvable_fraction": args.unsolvable_fraction,
        "topic": args.topic,
        "wording_seed": args.wording_seed,
        "unique": args.unique,
        "hidden": args.hidden,
        "hidden_mode": args.hidden_mode,
        "update_after": args.update_after,
        "hide_contradiction": args.hide_contradiction,
        **_knobs(args.knob),
    }
    bench = cls(**bind_arguments("benchmark", cls.name, cls, given))
    start = time.perf_counter()
    # generated one after another and written as they come (no list of problems is kept), in a worker
    # thread: Z3 pays, for each context it creates on the main thread, a cost that grows with the
    # process's heap (several times the whole synthesis of a small problem)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="modulo-synth") as pool:
        written, unsolvable, held = pool.submit(_write, bench, args.out).result()
    seconds = time.perf_counter() - start
    where = "as updates" if args.hidden_mode == "update" else "told when asked"
    extra = f", {held} requirements held back ({where})" if args.hidden else ""
    out.write(
        f"wrote {written} {bench.name} problems ({unsolvable} unsolvable{extra}) to {args.out} in {seconds:.1f} s\n"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(synth_main(sys.argv[1:]))


def oracle_script_main(benchmark: str, argv: list[str], out: TextIO | None = None) -> int:
    """``modulo bench synth/FAMILY oracle-script --problems FILE.jsonl --out SCRIPT.json [--updates JSON]``.

    Writes a scripted-model script (``llm=scripted llm.script=SCRIPT.json``) that plans like an oracle that
    knows only what it has been told: for each problem, the plan Z3 finds for the constraints in force, one
    reply per version of the problem (before any update, then after each scheduled update and each of
    ``--updates``, the ``user.updates`` of the run), and ``ABSTAIN:`` with the unsat core once the told
    constraints have no plan. A run on it exercises the multi-turn machinery (updates, re-judged plans,
    recovery, abstention checks) with no model; its scores measure the machinery, not a planner.
    """
    from modulo.types import ProblemUpdate

    out = out or sys.stdout
    p = CommandParser(prog=f"modulo bench {benchmark} oracle-script", description=__doc__)
    p.add_argument("--problems", type=Path, required=True, help="problems written by 'modulo synth ... --out'")
    p.add_argument("--out", type=Path, required=True, help="the script file to write (JSON)")
    p.add_argument("--updates", default="[]", help="the run's user.updates as a JSON list ([{after, add, text}])")
    args = p.parse_args(argv)
    try:
        extra = [ProblemUpdate.model_validate({"source": "config", **u}) for u in json.loads(args.updates)]
        bench = BENCHMARKS[benchmark.removeprefix("synth/")](path=str(args.problems))
        script: dict[str, list[str]] = {}
        for problem in bench.load("generated"):
            updates = [*problem.updates, *extra]
            turns = sorted({u.after or 0 for u in updates})  # the loop applies updates due at one turn together
            replies: list[str] = []
            current, plan = problem, None
            for turn in [None, *turns]:
                for update in [u for u in updates if turn is not None and (u.after or 0) == turn]:
                    current = bench.apply_update(current, update)
                if plan is not None and bench.family.z3_valid(current.constraints, plan):
                    continue  # the plan in hand still meets every constraint: no new reply is needed
                why = bench.family.explain_unsat(current.constraints)
                if why is not None:
                    replies.append(f"ABSTAIN: {why}")
                    break
                plan = bench.family.solve(current.constraints)
                replies.append(bench.family.render_plan(plan))
            script[problem.id] = replies
    except ValueError as exc:  # a malformed --updates (a ModuloError goes to the CLI as it is)
        raise ConfigError(f"oracle-script: {exc}") from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(script, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    out.write(f"wrote replies for {len(script)} problems to {args.out}\n")
    return 0
