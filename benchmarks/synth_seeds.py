"""The full soundness sweep: 1,000 seeds per family (the unit test runs a few hundred).

    python benchmarks/synth_seeds.py                       # 1000 seeds, default difficulty, all families
    python benchmarks/synth_seeds.py --n 1000 --difficulty medium --families trip

For every seed: the problem is satisfiable (Z3), the witness passes every registered critic, Z3 agrees
with every critic on the witness, the query text parses back to the constraints it was rendered from,
and the witness text parses back to the witness. Then the same number of injected-contradiction
problems: each is proved unsolvable with an explanation quoting the injected constraint. Exit 1 on
any failure; prints counts and timings.
"""

from __future__ import annotations

import argparse
import sys
import time

from critics.synth.audit import load_critics
from critics.synth.benchmark import BENCHMARKS
from critics.synth.common import canonical_set
from critics.synth.families import get_family


def sweep(family: str, n: int, seed: int, difficulty: str) -> list[str]:
    fam = get_family(family)
    b = BENCHMARKS[family](n=n, seed=seed, difficulty=difficulty)
    critics = load_critics(b)
    failures: list[str] = []
    t0 = time.perf_counter()
    for p in b.load("generated"):
        w = p.metadata["witness"]
        if not p.metadata["solvable"] or w is None or not fam.satisfiable(p.constraints):
            failures.append(f"{p.id}: not satisfiable")
            continue
        truths = fam.z3_truths(p.constraints, w) or {}
        verdicts = {name: c(p, w).accepts for name, c in critics.items()}
        if not all(truths.values()) or not all(verdicts.values()):
            failures.append(f"{p.id}: witness rejected (z3={truths}, critics={verdicts})")
        if canonical_set(fam.parse_query(p.query)["constraints"]) != canonical_set(p.constraints["constraints"]):
            failures.append(f"{p.id}: query does not parse back to its constraints")
        if b.parse(b.render_plan(w), p) != w:
            failures.append(f"{p.id}: witness text does not parse back")
    t1 = time.perf_counter()
    u = BENCHMARKS[family](n=n, seed=seed, difficulty=difficulty, unsolvable_fraction=1.0)
    for p in u.load("generated"):
        injected = next(c for c in p.constraints["constraints"] if c["id"] == p.metadata["injected"])
        why = u.prove_unsolvable(p)
        if why is None or f'"{injected["text"]}"' not in why:
            failures.append(f"{p.id}: injected contradiction not explained: {why}")
    t2 = time.perf_counter()
    print(
        f"{family:9s} {difficulty:6s} {n} solvable seeds in {t1 - t0:.1f} s, {n} unsolvable in {t2 - t1:.1f} s, "
        f"{len(failures)} failures",
        flush=True,
    )
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--difficulty", default="easy")
    ap.add_argument("--families", nargs="+", default=list(BENCHMARKS))
    args = ap.parse_args()
    failures = [f for family in args.families for f in sweep(family, args.n, args.seed, args.difficulty)]
    for f in failures[:20]:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
