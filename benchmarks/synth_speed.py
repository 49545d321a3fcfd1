"""Problems per second of the synthesized families, at two (or more) difficulty levels.

    python benchmarks/synth_speed.py                  # tasks, calendar, trip at easy and hard, 40 seeds
    python benchmarks/synth_speed.py --n 100 --levels easy medium hard

Reports per family and level: problems/s, ms per problem, mean Z3 checks, and separately the time to
prove an injected contradiction (``prove_unsolvable``) and to check a witness with every critic and Z3.
"""

from __future__ import annotations

import argparse
import statistics
import time

from critics.synth.benchmark import BENCHMARKS
from critics.synth.families import get_family


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--levels", nargs="+", default=["easy", "hard"])
    ap.add_argument("--families", nargs="+", default=list(BENCHMARKS))
    args = ap.parse_args()
    print("| family | level | problems/s | ms/problem | Z3 checks | constraints | ms/proof | ms/witness check |")
    print("|---|---|---|---|---|---|---|---|")
    for family in args.families:
        fam = get_family(family)
        for level in args.levels:
            b = BENCHMARKS[family](n=args.n, seed=args.seed, difficulty=level)
            t0 = time.perf_counter()
            problems = b.generate(args.n)
            gen = time.perf_counter() - t0
            checks = statistics.mean(p.metadata["z3_checks"] for p in problems)
            size = statistics.mean(p.metadata["n_constraints"] for p in problems)
            k = max(1, args.n // 4)
            u = BENCHMARKS[family](n=k, seed=args.seed, difficulty=level, unsolvable_fraction=1.0).generate(k)
            t1 = time.perf_counter()
            for p in u:
                assert b.prove_unsolvable(p) is not None
            prove = (time.perf_counter() - t1) / k
            t2 = time.perf_counter()
            for p in problems:
                w = p.metadata["witness"]
                assert fam.z3_valid(p.constraints, w)
                for kinds in fam.critic_kinds.values():
                    assert not fam.violations(p.constraints, w, kinds)[1]
            check = (time.perf_counter() - t2) / args.n
            print(
                f"| {family} | {level} | {args.n / gen:.1f} | {1000 * gen / args.n:.1f} | {checks:.1f} | {size:.1f} "
                f"| {1000 * prove:.1f} | {1000 * check:.2f} |"
            )


if __name__ == "__main__":
    main()
