"""TravelBench (Cheng et al., 2025): multi-turn, tool-using travel requests, and ones to decline.

Three benchmarks over the three files of ``$MODULO_DATA_DIR/travelbench``:

* ``travelbench/single_turn`` (500) and ``travelbench/multi_turn`` (500, with a simulated user): an
  episode per problem (:mod:`critics.travelbench.episode`) judged by the paper's rubric; the metric
  ``score_simulated_tools`` is the mean of ``(rating - 1) / 4 x (1 - tool-call error rate) x meta / 5``
  over judged trajectories. Its name and label say "simulated tools": the authors' cache of real tool
  responses is not available and an LLM writes them, so the numbers do not compare with the paper's.
* ``travelbench/unsolvable``: split ``all`` (the 100 unsolvable queries), scored offline and exactly by
  the paper's rule: 1 when ``[Unsolved]`` is in the first assistant message (a tool call first scores
  0). The paper never measures declining a solvable query; split ``with_controls`` interleaves the
  first 100 single-turn queries as solvable controls, so ``abstention_recall`` (unsolvable declined)
  and ``wrongful_abstention`` (controls declined) stand side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from modulo.benchmark import Benchmark, DataReport, EvalResult, MetricSpec, PlanTable
from modulo.errors import ConfigError, DataError
from modulo.types import PlanJSON, Problem

from .data import FILES, file_path, read_rows, to_problem, travelbench_dir
from .judge import trajectory_score

SIMULATED = "simulated tools"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallRecord(_Strict):
    name: str
    arguments: Any = None
    error: str | None = None


class Turn(_Strict):
    role: Literal["user", "assistant", "tool"]
    content: str
    name: str | None = None
    error: str | None = None
    tool_calls: list[ToolCallRecord] | None = None


class Judgement(_Strict):
    ratings: dict[str, int] | None
    reasons: dict[str, str] | None = None
    error: str | None = None
    attempts: int = 1
    meta: int | None = None
    meta_status: str = "off"


class Episode(_Strict):
    """A finished TravelBench episode: the plan of one problem."""

    mode: Literal["single", "multi", "abstention"]
    messages: list[Turn]
    first_message: str
    first_called_tools: bool
    declined: bool
    final_answer: str | None
    ended_by: str
    turns: int
    questions: int
    unnecessary_questions: int = 0
    tool_calls: int
    tool_errors: int
    judge: Judgement | None


class TravelBenchBase(Benchmark):
    """What the three TravelBench benchmarks share: files, episodes as plans, the evaluator."""

    kind: ClassVar[str] = ""
    plan_model = Episode
    prompts: ClassVar[dict[str, str]] = {
        role: f"travelbench/{role}" for role in ("agent", "user", "tool", "judge", "meta_judge")
    }
    test_splits: ClassVar[tuple[str, ...]] = ()

    def __init__(self, data_dir: Path | None = None) -> None:
        super().__init__(data_dir)
        self._hidden: dict[str, dict[str, Any]] = {}

    def splits(self) -> list[str]:
        return ["all"]

    def load(self, split: str) -> list[Problem]:
        if split not in self.splits():
            raise ConfigError(f"{self.name} has splits {', '.join(self.splits())}, not {split!r}")
        return self._problems(self.kind)

    def _problems(self, kind: str) -> list[Problem]:
        problems = [to_problem(row, self.name) for row in read_rows(kind, self.data_dir)]
        self._hidden.update({p.id: p.hidden for p in problems})
        return problems

    def with_hidden(self, problem: Problem) -> Problem:
        """``problem`` with what its user knows (intent, profile): the loop hands the generator the planner's
        view, and the episode's user simulator needs the rest. Never rendered into the assistant's prompts."""
        if problem.hidden or problem.id not in self._hidden:
            return problem
        return problem.model_copy(update={"hidden": self._hidden[problem.id]})

    def critic_names(self) -> list[str]:
        return ["format", "travelbench_tool_calls"]

    def prompt_variables(self, problem: Problem) -> dict[str, Any]:
        return {"query": problem.query, "context": problem.context, "time": problem.metadata.get("time", "")}

    def render_plan(self, plan: PlanJSON) -> str:
        from .episode import conversation_text

        if isinstance(plan, dict) and isinstance(plan.get("messages"), list):
            return conversation_text(plan["messages"])
        return super().render_plan(plan)

    def plan_table(self, plan: PlanJSON) -> PlanTable | None:
        if not isinstance(plan, dict) or not isinstance(plan.get("messages"), list):
            return None
        rows = []
        for m in plan["messages"]:
            calls = "; ".join(
                f"{c['name']}{' (invalid: ' + c['error'] + ')' if c.get('error') else ''}"
                for c in m.get("tool_calls") or []
            )
            rows.append([m["role"] + (f" {m['name']}" if m.get("name") else ""), m.get("content", ""), calls])
        return PlanTable(columns=["role", "text", "tool calls"], rows=rows)

    def evaluate(self, problems: Sequence[Problem], plans: Sequence[PlanJSON | None]) -> EvalResult:
        if len(problems) != len(plans):
            raise ConfigError(f"{self.name}: {len(problems)} problems but {len(plans)} plans")
        rows = [_score(p, plan) for p, plan in zip(problems, plans, strict=True)]
        return EvalResult(metrics=_aggregate(rows), per_problem=rows, tables=_tables(rows))

    def data_check(self) -> DataReport:
        where = travelbench_dir(self.data_dir)
        lines = [f"{self.name}: data under {where} (CC BY-NC 4.0; scores use {SIMULATED})"]
        ok = True
        for kind in self.files():
            path = file_path(kind, self.data_dir)
            expected = FILES[kind][1]
            try:
                n = len(read_rows(kind, self.data_dir))
            except DataError as exc:
                ok = False
                lines.append(f"  {path.name}: {exc}")
                continue
            mark = "ok" if n == expected else f"expected {expected}"
            lines.append(f"  {path.name}: {n} rows ({mark})")
            ok = ok and n == expected
        lines.append(
            "  sandbox_cache.zip (the authors' real tool responses): not available; an LLM simulates the tools"
        )
        return DataReport(ok=ok, lines=lines)

    def files(self) -> list[str]:
        return [self.kind]

    def scripted_demo(self) -> Path | None:
        """``llm=scripted`` with no script plays this: a tool round (one valid call, answered by the tool
        simulator, and one invalid), a question and its answer on multi-turn, the answer, the judge's and the
        meta-judge's ratings; the score it makes is the script's, not a model's."""
        path = Path(__file__).with_name("scripts") / f"{self.kind}.json"
        return path if path.is_file() else None


class TravelBenchSingleTurn(TravelBenchBase):
    name = "travelbench/single_turn"
    description = "TravelBench single-turn: 500 solvable travel requests, tools simulated by an LLM, LLM-judged"
    kind = "single_turn"
    metrics: ClassVar[tuple[MetricSpec, ...]] = (
        MetricSpec(
            "score_simulated_tools",
            f"score ({SIMULATED})",
            description="mean (rating-1)/4 x (1 - tool errors/calls) x meta/5 over judged episodes",
        ),
        MetricSpec(
            "tool_error_rate",
            "tool-call error rate",
            description="invalid tool calls / tool calls",
            higher_is_better=False,
        ),
        MetricSpec(
            "wrongful_abstention",
            "wrongful abstention",
            description="solvable queries declined at once",
            higher_is_better=False,
        ),
        MetricSpec("unjudged", "unjudged episodes", kind="count", description="no parsable judge rating"),
        MetricSpec(
            "meta_unparsed",
            "meta-judge unread",
            kind="count",
            description="judged episodes scored without the meta weight: no parsable meta-judge rating",
        ),
    )
    primary_metric = "score_simulated_tools"


class TravelBenchMultiTurn(TravelBenchSingleTurn):
    name = "travelbench/multi_turn"
    description = "TravelBench multi-turn: 500 requests with a simulated user, tools simulated by an LLM, LLM-judged"
    kind = "multi_turn"
    metrics: ClassVar[tuple[MetricSpec, ...]] = (
        *TravelBenchSingleTurn.metrics,
        MetricSpec("questions", "questions per episode", kind="value", description="texts the user had to answer"),
    )


class TravelBenchUnsolvable(TravelBenchBase):
    name = "travelbench/unsolvable"
    description = "TravelBench unsolvable: 100 requests to decline with [Unsolved] (first message), offline and exact"
    kind = "unsolvable"
    metrics = (
        MetricSpec(
            "abstention_recall",
            "abstention recall",
            description="unsolvable queries with [Unsolved] in the first assistant message",
        ),
        MetricSpec(
            "wrongful_abstention",
            "wrongful abstention",
            description="solvable controls with [Unsolved] in the first assistant message",
            higher_is_better=False,
        ),
        MetricSpec("success", "success", description="unsolvable declined or control not declined"),
    )
    primary_metric = "abstention_recall"

    def splits(self) -> list[str]:
        return ["all", "with_controls"]

    def files(self) -> list[str]:
        return ["unsolvable", "single_turn"]

    def critic_names(self) -> list[str]:
        return [*super().critic_names(), "travelbench_unsolved"]

    def load(self, split: str) -> list[Problem]:
        unsolvable = super().load("all")
        if split == "all":
            return unsolvable
        controls = self._problems("single_turn")[: len(unsolvable)]
        mixed: list[Problem] = []
        for bad, good in zip(unsolvable, controls, strict=False):
            control = good.model_copy(update={"metadata": {**good.metadata, "control": True}})
            mixed += [bad, control]
        return mixed


def _score(problem: Problem, plan: PlanJSON | None) -> dict[str, Any]:
    solvable = problem.solvable is not False
    row: dict[str, Any] = {
        "problem_id": problem.id,
        "solvable": solvable,
        "category": problem.metadata.get("category"),
        "cause": problem.metadata.get("cause"),
        "delivered": plan is not None,
    }
    episode = plan if isinstance(plan, dict) else None
    # the episode generator delivers no plan only when the first message declined (an abstention); problems
    # that errored never reach the evaluator
    declined = episode is None or bool(episode.get("declined"))
    row["abstention_recall"] = None if solvable else declined
    row["wrongful_abstention"] = declined if solvable else None
    row["success"] = (not declined) if solvable else declined
    row["travelbench_unsolved"] = None if solvable else declined
    calls = int(episode.get("tool_calls", 0)) if episode else 0
    errors = int(episode.get("tool_errors", 0)) if episode else 0
    row["tool_error_rate"] = [errors, calls]
    row["travelbench_tool_calls"] = None if calls == 0 else errors == 0
    row["questions"] = episode.get("questions") if episode else None
    score = None
    judged = False
    if episode and solvable and episode.get("mode") != "abstention":
        judgement = episode.get("judge")
        score = trajectory_score(judgement, calls, errors)
        judged = score is not None
        if score is None and plan is not None:
            row["unjudged"] = 1
        elif judgement and judgement.get("meta_status") == "unparsed":
            row["meta_unparsed"] = 1  # scored without the meta weight, as the authors' script does: counted
    elif solvable and episode is None and problem.metadata.get("control") is not True:
        score = 0.0  # declined a solvable request: the lowest score, never left out
        judged = True
    row["score_simulated_tools"] = score
    row["_judged"] = judged
    row["passed"] = (
        bool(row["success"]) if not solvable or problem.metadata.get("control") else (score is not None and score > 0)
    )
    return row


def _aggregate(rows: list[dict[str, Any]]) -> dict[str, float]:
    metrics: dict[str, float] = {}
    solv = [r for r in rows if r["solvable"]]
    unsolv = [r for r in rows if not r["solvable"]]
    scored = [r["score_simulated_tools"] for r in rows if r["score_simulated_tools"] is not None]
    if scored:
        metrics["score_simulated_tools"] = sum(scored) / len(scored)
    calls = sum(r["tool_error_rate"][1] for r in rows)
    if calls:
        metrics["tool_error_rate"] = sum(r["tool_error_rate"][0] for r in rows) / calls
    if solv:
        metrics["wrongful_abstention"] = sum(bool(r["wrongful_abstention"]) for r in solv) / len(solv)
    if unsolv:
        metrics["abstention_recall"] = sum(bool(r["abstention_recall"]) for r in unsolv) / len(unsolv)
    if rows:
        metrics["success"] = sum(bool(r["success"]) for r in rows) / len(rows)
    for count in ("unjudged", "meta_unparsed"):
        metrics[count] = float(sum(r.get(count, 0) for r in rows))
    asked = [r["questions"] for r in rows if isinstance(r.get("questions"), int)]
    if asked:
        metrics["questions"] = sum(asked) / len(asked)
    return metrics


def _tables(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_cause: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        key = r["cause"] or ("control" if r["solvable"] else "?")
        by_cause.setdefault(key, []).append(r)
    causes = [
        {"cause": k, "n": len(g), "declined": sum(bool(r["abstention_recall"] or r["wrongful_abstention"]) for r in g)}
        for k, g in sorted(by_cause.items())
    ]
    by_cat: dict[str, list[float]] = {}
    for r in rows:
        if r["score_simulated_tools"] is not None:
            by_cat.setdefault(str(r["category"]), []).append(r["score_simulated_tools"])
    categories = [
        {"category": k, "n": len(v), f"score ({SIMULATED})": sum(v) / len(v)} for k, v in sorted(by_cat.items())
    ]
    per_constraint = [{"constraint": "travelbench_tool_calls", "name": "travelbench_tool_calls"}]
    if any(r["travelbench_unsolved"] is not None for r in rows):
        per_constraint.append({"constraint": "travelbench_unsolved", "name": "travelbench_unsolved"})
    return {"by_cause": causes, "by_category": categories, "per_constraint": per_constraint}
