"""The greedy baseline: valid routes, deterministic for a seed, and what it scores."""

from __future__ import annotations

from pathlib import Path

import pytest

from critics.travelplanner.benchmark import TravelPlanner
from critics.travelplanner.data import load_split
from critics.travelplanner.greedy import GreedyGenerator, route_of
from modulo.components import generators
from modulo.errors import DataError
from modulo.generators import GenerationContext
from modulo.registry import bind_arguments


def test_registered_and_needs_no_llm(tp: TravelPlanner) -> None:
    factory = generators.get("greedy")
    assert factory is GreedyGenerator and GreedyGenerator.needs_llm is False
    gen = factory(**bind_arguments("generator", "greedy", factory, {"seed": 3}, {"benchmark": tp}))
    assert gen.seed == 3 and gen.benchmark is tp


def test_route_is_read_from_the_reference_information(tp: TravelPlanner) -> None:
    p = next(p for p in tp.load("validation") if p.id == "validation-171")
    cities, hops = route_of(p)
    assert cities == ["Texarkana", "Abilene", "Amarillo"]
    assert hops == [
        ("Baton Rouge", "Texarkana", 1),
        ("Texarkana", "Abilene", 3),
        ("Abilene", "Amarillo", 5),
        ("Amarillo", "Baton Rouge", 7),
    ]


async def test_generate_returns_a_plan(tp: TravelPlanner) -> None:
    problem = tp.load("train")[0]
    generation = await GreedyGenerator(benchmark=tp).generate(problem, [], GenerationContext(iteration=0, llm=None))
    assert generation.plan and generation.text is None
    assert tp.check_format(problem, generation.plan) == []
    assert tp.validate_plan(generation.plan)


def test_deterministic_for_a_seed(tp: TravelPlanner) -> None:
    problems = tp.load("train")
    a = [GreedyGenerator(benchmark=tp, seed=7).plan(p) for p in problems]
    b = [GreedyGenerator(benchmark=tp, seed=7).plan(p) for p in problems]
    c = [GreedyGenerator(benchmark=tp, seed=8).plan(p) for p in problems]
    assert a == b and a != c  # the seed moves the attractions only
    assert tp.evaluate(problems, a).metrics == tp.evaluate(problems, c).metrics


def test_scores_on_train(tp: TravelPlanner) -> None:
    problems = tp.load("train")
    result = tp.evaluate(problems, [GreedyGenerator(benchmark=tp).plan(p) for p in problems])
    m = result.metrics
    assert m["delivery_rate"] == 1.0
    # the paper's greedy: every meal at the city's cheapest restaurant, so no plan is commonsense-valid
    assert m["commonsense_macro"] == 0.0 and m["final_pass_rate"] == 0.0
    assert m["commonsense_micro"] == pytest.approx(273 / 360)
    assert m["hard_micro"] == pytest.approx(65 / 105)
    by_key = {row["constraint"]: row for row in result.tables["per_constraint"]}
    assert by_key["is_valid_restaurants"]["true"] == 0
    assert by_key["is_valid_information_in_sandbox"]["true"] == 45  # everything comes from the database
    assert by_key["is_reasonable_visiting_city"]["true"] == 45


def test_distinct_meals_variant(tp: TravelPlanner) -> None:
    problems = tp.load("train")
    plans = [GreedyGenerator(benchmark=tp, distinct_meals=True).plan(p) for p in problems]
    m = tp.evaluate(problems, plans).metrics
    assert m["commonsense_micro"] > 0.85 and m["commonsense_macro"] > 0


def test_no_reference_information(tp: TravelPlanner) -> None:
    derived = next(p for p in load_split(tp.root, "validation") if not p.context)
    with pytest.raises(DataError, match="validation-ref"):
        GreedyGenerator(benchmark=tp).plan(derived)


def test_the_papers_greedy_row_says_what_it_is_over(tp: TravelPlanner) -> None:
    """The paper's row is printed beside a run of any size ('on the same 3 problems'): its label must say
    that it is over all 180 queries, with the official reference information (51 of ours are derived)."""
    ((label, figures),) = tp.published_rows("validation", "greedy")
    assert "180 queries" in label and "official reference information" in label
    assert figures["commonsense_micro"] == 0.744 and figures["final_pass_rate"] == 0.0
    assert tp.published_rows("validation-ref", "greedy") == [] and tp.published_rows("validation", "llm") == []


@pytest.mark.slow
def test_the_papers_row_stays_out_of_a_table_of_part_of_the_split(tmp_path: Path) -> None:
    """A greedy run of 2 validation problems printed the paper's 180-query row inside the table titled 'on the
    same 2 problems'; the console now leaves it out and says why, and prints it beside the whole split."""
    from click.testing import CliRunner

    from modulo.cli.main import cli

    def run(name: str, *extra: str) -> str:
        run_dir = tmp_path / name
        args = ["run", "benchmark=travelplanner", "benchmark.split=validation", "generator=greedy", *extra]
        result = CliRunner().invoke(
            cli, [*args, f"run.dir={run_dir}", f"hydra.run.dir={run_dir}", "run.progress=false"]
        )
        assert result.exit_code == 0, result.output
        return result.output

    part = run("part", "benchmark.limit=2", "run.report=false")
    assert "(published)" not in part
    assert "published figures left out: they are over the whole split (180 problems)" in " ".join(part.split())
    whole = run("whole", "run.report=false")
    assert "(published)" in whole and "published figures left out" not in whole
