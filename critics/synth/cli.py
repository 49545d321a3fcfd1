"""``modulo synth FAMILY --n N --seed S --out FILE.jsonl``: write a fixed set of synthesized problems.

The file holds one :class:`~modulo.types.Problem` per line; run on it with
``benchmark=synth/FAMILY benchmark.path=FILE.jsonl``. Knobs of the family go in ``--knob NAME=VALUE``
(values are read as JSON when they parse, e.g. ``--knob n_actions=6 --knob kinds='["precedence"]'``).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

import click

from modulo.errors import ConfigError
from modulo.registry import bind_arguments

from .benchmark import BENCHMARKS, SPLIT, SynthBenchmark, write_problems


def synth_command(benchmark: str) -> click.Command:
    """``modulo synth synth/FAMILY [OPTIONS]``: the click command of one family."""

    @click.command(help="Write a fixed set of synthesized problems to --out (JSONL).", epilog=__doc__.split("\n\n")[1])
    @click.option("--n", type=int, default=50, show_default=True, help="number of problems")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="output .jsonl file")
    @click.option("--difficulty", type=click.Choice(("easy", "medium", "hard")), default="easy", show_default=True)
    @click.option(
        "--unsolvable-fraction", type=float, default=0.0, help="share of problems with an injected contradiction"
    )
    @click.option("--topic", default=None, help="fix the skin (job, meeting kind or region)")
    @click.option("--wording-seed", type=int, default=None, help="re-draw the wordings only")
    @click.option(
        "--unique/--no-unique", default=None, help="force a unique solution, or do not (default: the family's)"
    )
    @click.option(
        "--hidden",
        type=int,
        default=0,
        metavar="K",
        help="hold back K stated requirements per problem (told by a user in the loop; see --hidden-mode)",
    )
    @click.option(
        "--hidden-mode",
        type=click.Choice(("ask", "update")),
        default="ask",
        show_default=True,
        help="ask: told when the planner asks (problem.hidden); update: injected after turns k, k+1, ...",
    )
    @click.option("--update-after", type=int, default=1, metavar="k", help="--hidden-mode update: the first turn")
    @click.option(
        "--hide-contradiction",
        is_flag=True,
        help="with --unsolvable-fraction: hold back the injected contradiction first (a user's update makes "
        "the problem unsolvable)",
    )
    @click.option("--knob", "--arg", "knob", multiple=True, metavar="NAME=VALUE", help="family knob (repeatable)")
    def synth(out: Path, knob: tuple[str, ...], **given: Any) -> None:
        write_set(benchmark, out, {**given, **_knobs(list(knob))})

    return synth


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


def write_set(family: str, path: Path, given: dict[str, Any], out: TextIO | None = None) -> None:
    """Write the problems of ``family`` (``synth/`` prefix allowed) built with the arguments ``given`` (its
    knobs included) to ``path``; print a one-line summary."""
    out = out or sys.stdout
    name = family.removeprefix("synth/")
    if name not in BENCHMARKS:
        raise ConfigError(f"unknown family {family!r}; choose from {', '.join(BENCHMARKS)}")
    cls = BENCHMARKS[name]
    bench = cls(**bind_arguments("benchmark", cls.name, cls, given))
    start = time.perf_counter()
    # generated one after another and written as they come (no list of problems is kept), in a worker
    # thread: Z3 pays, for each context it creates on the main thread, a cost that grows with the
    # process's heap (several times the whole synthesis of a small problem)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="modulo-synth") as pool:
        written, unsolvable, held = pool.submit(_write, bench, path).result()
    seconds = time.perf_counter() - start
    where = "as updates" if given.get("hidden_mode") == "update" else "told when asked"
    extra = f", {held} requirements held back ({where})" if given.get("hidden") else ""
    out.write(f"wrote {written} {bench.name} problems ({unsolvable} unsolvable{extra}) to {path} in {seconds:.1f} s\n")


def oracle_script_command(benchmark: str) -> click.Command:
    """``modulo bench synth/FAMILY oracle-script --problems FILE.jsonl --out SCRIPT.json [--updates JSON]``."""

    @click.command("oracle-script", help=oracle_script.__doc__)
    @click.option(
        "--problems",
        type=click.Path(dir_okay=False, path_type=Path),
        required=True,
        help="problems written by 'modulo synth ... --out'",
    )
    @click.option(
        "--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="the script file to write (JSON)"
    )
    @click.option("--updates", default="[]", help="the run's user.updates as a JSON list ([{after, add, text}])")
    def command(problems: Path, out: Path, updates: str) -> None:
        oracle_script(benchmark, problems, out, updates)

    return command


def oracle_script(
    benchmark: str, problems: Path, script_path: Path, extra_updates: str, out: TextIO | None = None
) -> None:
    """Write a scripted-model script (``llm=scripted llm.script=SCRIPT.json``) that plans like an oracle
    that knows only what it has been told: for each problem, the plan Z3 finds for the constraints in
    force, one reply per version of the problem (before any update, then after each scheduled update and
    each of ``--updates``, the ``user.updates`` of the run), and ``ABSTAIN:`` with the unsat core once the
    told constraints have no plan. A run on it exercises the multi-turn machinery (updates, re-judged
    plans, recovery, abstention checks) with no model; its scores measure the machinery, not a planner.
    """
    from modulo.types import ProblemUpdate

    out = out or sys.stdout
    try:
        extra = [ProblemUpdate.model_validate({"source": "config", **u}) for u in json.loads(extra_updates)]
        bench = BENCHMARKS[benchmark.removeprefix("synth/")](path=str(problems))
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
    script_path.parent.mkdir(parents=True, exist_ok=True)
    script_path.write_text(json.dumps(script, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    out.write(f"wrote replies for {len(script)} problems to {script_path}\n")
