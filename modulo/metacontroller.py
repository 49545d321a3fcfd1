"""The metacontroller: generate -> reformulate -> critique -> backprompt, to a budget.

:class:`Metacontroller` holds bound components and solves one problem at a time (many concurrently, through
the runner). It stops as soon as every active critic accepts (``certified``), or when a budget is
spent: iterations (default 10, as in the LLM-Modulo paper), tokens, dollars or wall-clock seconds per
problem, or a run-level dollar budget. It then returns the best plan so far (most accepting verdicts;
ties go to the earliest such plan) as ``exhausted``, or ``failed`` when no plan was ever read. When the
benchmark can prove a problem unsolvable, that is checked before any generator call.

Draws and fixed points: the n-th iteration of a problem that sends the same messages as earlier ones
is draw n of that request (``IterationRecord.draw``, passed to the generator and into the cache key).
At temperature > 0 it is a new sample. At temperature 0 the model would answer as before, so the
request is a *fixed point* and ``on_fixed_point`` decides: ``stop`` (``stop_reason="fixed_point"``,
no further request), ``temperature`` (send it again at the next temperature of
``fixed_point_temperatures``, stop when they are used up) or ``vary`` (append a note asking for a
different plan, at most ``fixed_point_variations`` times, then stop). A generator that keeps its own
state across iterations (``Generator.stateless = False``, the tool agent) is never stopped this way.

Format critics gate the others: when one fails, the rest are not run and only format feedback goes
back. A critic that crashes is recorded as an errored verdict (``on_critic_error="record"``) or ends
the problem with the ``error`` outcome and stops the run (``"stop"``). Every critic call goes through
the critic executor (:mod:`modulo.executor`): the plan and its fingerprint are recorded before any
critic runs, each critic gets its own copy (changing it is a critic error), and each call runs off
the event loop under a deadline (``critic_timeout_s``, per critic ``critic_timeouts``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from dataclasses import dataclass
from itertools import filterfalse
from typing import Any, Literal

from .backprompt import BackpromptContext, BackpromptStrategy
from .benchmark import Benchmark
from .canonical import PromptHasher as PromptHasher  # the loop's prompt hash (tests import it from here)
from .canonical import frozen_object
from .config import LoopSettings as LoopSettings  # the metacontroller config section
from .critic import FORMAT_GROUP, Critic
from .errors import CriticError, LLMError
from .executor import (
    CriticDeadlines,
    CriticExecutor,
    FrozenPlan,
    StopRule,
    ThreadExecutor,
    never_stop,
    stop_at_error,
)
from .executor import Outcome as CriticOutcome
from .generators.base import Generation, GenerationContext, Generator
from .prompts import Template
from .reformulate import Reformulator
from .types import (
    NO_USAGE,
    Abstention,
    IterationRecord,
    Judgement,
    LLMCall,
    Message,
    Outcome,
    PlanJSON,
    Problem,
    ProblemResult,
    ProblemUpdate,
    Usage,
    UsageTally,
    UserAnswer,
    Verdict,
    accepts,
    assign,
    canonical_json,
)
from .users.base import NO_MORE_QUESTIONS, NO_USER_REPLY, DialogueTurn, User, UserContext, in_force

log = logging.getLogger(__name__)

#: who "answered" a question past user.max_questions (the loop itself)
OVER_LIMIT = "loop"
#: the message that carries the user's answer to the planner's question
ANSWER_NOTE = "The user answers: {answer}"
#: put before the next prompt after updates changed the request
UPDATE_NOTE = "The request has changed: {changes} Your earlier plans were written for the request as it was."
#: appended to the request once the planner has asked questions: what it learnt
CLARIFICATIONS_HEADER = "Clarifications from the user:"

#: appended to a repeated prompt under on_fixed_point=vary (n: the variation number)
VARIATION_NOTE = (
    "Note (variation {n}): this request repeats an earlier one word for word, and the same answer "
    "would come back. Propose a plan that differs from the plans above."
)


@dataclass
class RunBudget:
    """A dollar budget shared by all problems of a run; checked before every iteration."""

    max_dollars: float | None = None
    spent: float = 0.0

    @property
    def exhausted(self) -> bool:
        return self.max_dollars is not None and self.spent >= self.max_dollars

    def add(self, usage: Usage) -> None:
        self.spent += usage.cost_usd


class RunAborted(Exception):
    """Raised by the loop when a critic crashed and the run is configured to stop."""

    def __init__(self, result: ProblemResult) -> None:
        super().__init__(result.error)
        self.result = result


def order_critics(critics: list[Critic]) -> list[Critic]:
    """Format critics first, then by priority; ties keep the configured order."""
    indexed = list(enumerate(critics))
    indexed.sort(key=lambda ic: (ic[1].group != FORMAT_GROUP, ic[1].priority, ic[0]))
    return [c for _, c in indexed]


def _settle(rec: IterationRecord, usage: UsageTally, run_budget: RunBudget | None) -> None:
    """Count what an iteration ended by an error spent (its calls so far): in its record, the problem's usage
    and the run's dollar budget."""
    rec.usage = _sum_usage(rec.calls)
    rec.served = _served(rec.calls)
    usage.add(rec.usage)
    if run_budget is not None:
        run_budget.add(rec.usage)


def _sum_usage(calls: list[LLMCall]) -> Usage:
    if len(calls) == 1:
        return calls[0].usage  # the one call's (usages are frozen: shared, never changed)
    if not calls:
        return NO_USAGE
    total = Usage()
    for c in calls:
        total = total + c.usage
    return total


class Metacontroller:
    """Bound components of the LLM-Modulo loop. Build it in Python or through :mod:`modulo.build`."""

    def __init__(
        self,
        *,
        benchmark: Benchmark,
        generator: Generator,
        reformulator: Reformulator,
        critics: list[Critic],
        strategy: BackpromptStrategy,
        llm: Any = None,
        settings: LoopSettings | None = None,
        executor: CriticExecutor | None = None,
        user: User | None = None,
        user_llm: Any = None,
    ) -> None:
        self.benchmark = benchmark
        self.generator = generator
        self.reformulator = reformulator
        self.critics = order_critics(critics)
        self.strategy = strategy
        self.llm = llm
        self.settings = settings or LoopSettings()
        self._deadlines: tuple[LoopSettings, CriticDeadlines] | None = None
        #: (the critics, how many, all in the order they run, (the format critics, the others))
        self._split: tuple[list[Critic], int, list[Critic], tuple[list[Critic], list[Critic]]] | None = None
        #: id of a list of critics -> (the list, the deadlines object, their timeouts)
        self._timeout_lists: dict[int, tuple[list[Critic], CriticDeadlines, list[float]]] = {}
        self.executor = executor or ThreadExecutor(inline=self.settings.inline_critics)
        self.priorities = {c.name: c.priority for c in self.critics}
        #: the plan's JSON Schema, read-only: every generation request carries this one object, whose
        #: canonical JSON the LLM cache key then encodes once (not once per request)
        self._schema = frozen_object(benchmark.plan_json_schema())
        #: the user who answers questions (None: questions get :data:`NO_USER_REPLY`)
        self.user = user
        #: the model client a simulated user calls (default: the planner's)
        self.user_llm = user_llm if user_llm is not None else llm
        #: the note telling the planner it may ask or decline (None when neither is on)
        self.dialogue: Template | None = (
            benchmark.template("dialogue") if user is not None or self.settings.abstain else None
        )

    def with_generator(self, generator: Generator) -> Metacontroller:
        """This loop with another generator and every other bound part shared (executor, user, settings)."""
        return Metacontroller(
            benchmark=self.benchmark,
            generator=generator,
            reformulator=self.reformulator,
            critics=self.critics,
            strategy=self.strategy,
            llm=self.llm,
            settings=self.settings,
            executor=self.executor,
            user=self.user,
            user_llm=self.user_llm,
        )

    @property
    def deadlines(self) -> CriticDeadlines:
        """Each critic's deadline under the current ``settings`` (made once per settings object)."""
        if self._deadlines is None or self._deadlines[0] is not self.settings:
            s = self.settings
            self._deadlines = (s, CriticDeadlines(s.critic_timeout_s, dict(s.critic_timeouts)))
        return self._deadlines[1]

    @property
    def _stages(self) -> tuple[list[Critic], list[Critic]]:
        """The format critics and the others, in order (made again when ``critics`` is replaced or grows)."""
        return self._staged[1]

    @property
    def _staged(self) -> tuple[list[Critic], tuple[list[Critic], list[Critic]]]:
        """Every critic, the format critics first (the order they run in), and :attr:`_stages`."""
        split = self._split
        if split is None or split[0] is not self.critics or split[1] != len(self.critics):
            formats = [c for c in self.critics if c.group == FORMAT_GROUP]
            others = [c for c in self.critics if c.group != FORMAT_GROUP]
            split = self._split = (self.critics, len(self.critics), [*formats, *others], (formats, others))
        return split[2], split[3]

    def _timeouts(self, critics: list[Critic]) -> list[float]:
        """Each critic's deadline, for a list of critics (made once per list and deadlines object)."""
        deadlines = self.deadlines
        known = self._timeout_lists.get(id(critics))
        if known is not None and known[0] is critics and known[1] is deadlines:
            return known[2]
        timeouts = [deadlines.for_critic(c) for c in critics]
        if len(self._timeout_lists) > 64:
            self._timeout_lists.clear()
        self._timeout_lists[id(critics)] = (critics, deadlines, timeouts)
        return timeouts

    def templates(self) -> dict[str, str]:
        """Labels (id@version#sha) of every template this loop uses."""
        out = {
            **self.generator.templates(),
            **self.reformulator.templates(),
            **self.strategy.templates(self.benchmark),
        }
        if self.dialogue is not None:
            out["dialogue"] = self.dialogue.label
        if self.user is not None:
            out.update(self.user.templates())
        return out

    def first_prompt(self, view: Problem, dialogue: list[DialogueTurn] | None = None) -> list[Message]:
        """The first prompt for the planner's view of the problem: the generator's, with the dialogue note
        (may ask, may decline) and the clarifications learnt so far appended to its last user message."""
        messages = self.generator.first_prompt(view)
        extra: list[str] = []
        if self.dialogue is not None:
            note = self.dialogue.render(
                questions=self.user is not None,
                abstain=self.settings.abstain,
                max_questions=self.settings.max_questions,
            ).strip()
            if note:
                extra.append(note)
        if dialogue:
            lines = [CLARIFICATIONS_HEADER] + [f"- Q: {d.question}\n  A: {d.answer}" for d in dialogue]
            extra.append("\n".join(lines))
        if not extra:
            return messages
        for pos in range(len(messages) - 1, -1, -1):
            if messages[pos].role == "user":
                content = "\n\n".join([messages[pos].content, *extra])
                return [*messages[:pos], Message(role="user", content=content), *messages[pos + 1 :]]
        return [*messages, Message(role="user", content="\n\n".join(extra))]

    # -- one problem ---------------------------------------------------------------------------
    async def solve(self, problem: Problem, run_budget: RunBudget | None = None) -> ProblemResult:
        started = time.perf_counter()
        s = self.settings
        common: dict[str, Any] = {
            "problem_id": problem.id,
            "benchmark": self.benchmark.name,
            "templates": self.templates(),
            "metadata": {k: v for k, v in problem.metadata.items() if _is_small(v)},
        }

        if s.check_unsolvable and self.benchmark.can_prove_unsolvable:
            explanation = await asyncio.to_thread(self.benchmark.prove_unsolvable, problem)
            if explanation:
                return ProblemResult(
                    **common,
                    outcome=Outcome.UNSOLVABLE,
                    stop_reason="unsolvable",
                    explanation=explanation,
                    seconds=time.perf_counter() - started,
                )

        history: list[IterationRecord] = []
        usage = UsageTally()  # the problem's usage so far
        best = _BestSoFar()
        try:
            return await self._iterations(problem, run_budget, started, common, history, usage, best)
        except RunAborted:
            raise
        except Exception as exc:  # a bug outside the model and the critics: a strategy, a generator, a hook
            log.exception("problem %s failed", problem.id)
            last = history[-1] if history else None
            if last is not None and last.usage is NO_USAGE:  # the iteration it broke in: its calls were paid
                _settle(last, usage, run_budget)
            error = f"{type(exc).__name__}: {exc}"
            # the best plan among the iterations whose verdicts were final (not one it broke in)
            return self._result(
                common, history, usage.usage(), started, "error", error, best_position(history, best.counted)
            )

    async def _iterations(
        self,
        problem: Problem,
        run_budget: RunBudget | None,
        started: float,
        common: dict[str, Any],
        history: list[IterationRecord],
        usage: UsageTally,
        best: _BestSoFar,
    ) -> ProblemResult:
        """:meth:`solve`'s turns, adding each to ``history`` and what it spent to ``usage`` as it goes (so
        that a problem that breaks keeps the record of what it did and paid)."""
        s = self.settings
        seen: dict[str, int] = {}
        in_force = problem  # the problem as the updates so far made it (critics judge against its view)
        view = in_force.planner_view()
        dialogue: list[DialogueTurn] = []
        first_prompt = self.first_prompt(view)
        messages = list(first_prompt)
        scheduled = self.user.scheduled(problem) if self.user is not None else []
        pending = sorted([*s.updates, *problem.updates, *scheduled], key=lambda u: u.after or 0)
        version = 0
        questions = 0
        plans = 0  # plan turns (questions do not count when question_costs_iteration is false)
        abstention: Abstention | None = None
        stop_reason = "iterations"
        error: str | None = None
        repeats = 0
        #: sha of the messages built by the loop (before any variation) -> iterations that sent them
        sent: dict[str, list[int]] = {}
        base_temperature = self._temperature()
        hasher = PromptHasher()

        index = -1
        while True:
            index += 1
            if (index if s.question_costs_iteration else plans) >= s.max_iterations:
                break
            if run_budget is not None and run_budget.exhausted:
                stop_reason = "run_budget"
                break
            rss = resident_mb() if s.max_rss_mb is not None else None  # a /proc read: only when guarded
            if s.max_rss_mb is not None and rss is not None and rss > s.max_rss_mb:
                error = (
                    f"MemoryGuard: the process holds {rss:,.0f} MB, over metacontroller.max_rss_mb="
                    f"{s.max_rss_mb:,.0f}; this problem was stopped, the run goes on"
                )
                stop_reason = "memory"
                break
            key = hasher.sha(messages)
            earlier = sent.setdefault(key, [])
            draw, temperature, variation = len(earlier), base_temperature, 0
            if earlier and self.generator.stateless and (base_temperature is None or base_temperature == 0):
                # a fixed point: at temperature 0 this request would get the answer it got before
                history[-1].fixed_point_of = earlier[-1]
                if s.on_fixed_point == "temperature" and draw <= len(s.fixed_point_temperatures):
                    temperature = s.fixed_point_temperatures[draw - 1]
                elif s.on_fixed_point == "vary" and draw <= s.fixed_point_variations:
                    variation = draw
                else:
                    stop_reason = "fixed_point"
                    break
            earlier.append(index)
            sent_messages = messages
            if variation:
                note = VARIATION_NOTE.format(n=variation)
                sent_messages = [*messages, Message(role="user", content=note)]
            rec = IterationRecord(
                index=index,
                prompt=sent_messages,
                prompt_sha256=key if sent_messages is messages else hasher.sha(sent_messages),
                draw=draw,
                temperature=temperature,
                variation=variation,
                version=version,
                usage=NO_USAGE,  # what it spent is set when it ends (no Usage built for the default meanwhile)
            )
            history.append(rec)
            try:
                await self._iterate(view, rec)
                if rec.act == "question":
                    questions += 1
                    await self._ask(
                        in_force, rec, dialogue, over_limit=s.max_questions is not None and questions > s.max_questions
                    )
            except LLMError as exc:
                rec.calls.extend(exc.earlier_calls)  # a multi-call generator's turn: its steps before the failure
                if exc.call is not None:
                    rec.calls.append(exc.call)
                if exc.tool_use is not None and rec.tool_use is None:
                    rec.tool_use = exc.tool_use
                _settle(rec, usage, run_budget)
                error = f"{type(exc).__name__}: {exc}"
                stop_reason = "llm_error"
                break
            except CriticError as exc:
                _settle(rec, usage, run_budget)
                result = self._result(
                    common, history, usage.usage(), started, "critic_error", f"{exc}", best.position(history)
                )
                raise RunAborted(result) from exc
            except MemoryError:  # this problem ends with a recorded error; the process and the run go on
                rec.plan, rec.raw_reply, rec.verdicts = None, None, []
                _settle(rec, usage, run_budget)
                error, stop_reason = "MemoryError: the problem ran out of memory and was stopped", "memory"
                break
            assign(rec, usage=_sum_usage(rec.calls), served=_served(rec.calls))
            usage.add(rec.usage)
            if run_budget is not None:
                run_budget.add(rec.usage)
            all_accept = best.add(rec)  # its verdicts counted once: for the stop, the best plan, the updates

            if rec.act == "abstain":
                reason = rec.abstain_reason or ""
                check = await asyncio.to_thread(self.benchmark.check_abstention, in_force, reason)
                abstention = Abstention(reason=reason, iteration=index, verified=check.verified, detail=check.detail)
                stop_reason = "abstained"
                break
            if rec.act == "plan" or (rec.answer is not None and rec.answer.user == OVER_LIMIT):
                plans += 1  # a question past max_questions costs an iteration even when questions are free
            if rec.plan_sha256 is not None:
                if rec.plan_sha256 in seen:
                    rec.repeat_of = seen[rec.plan_sha256]
                    repeats += 1
                else:
                    seen[rec.plan_sha256] = index
                    repeats = 0

            # updates due after this turn; a certified plan with updates still to come meets the next ones now
            due: list[ProblemUpdate] = []
            if pending:
                due = [u for u in pending if (u.after or 0) <= index]
                if not due and all_accept:
                    due = [u for u in pending if u.after == pending[0].after]
            if self.user is not None:
                due += self.user.updates(in_force, index)
            if rec.answer is not None and rec.answer.update is not None:
                due.append(rec.answer.update)
            if due:
                pending = [u for u in pending if all(u is not d for d in due)]
                try:
                    in_force = await self._apply(in_force, due, rec)
                    # a plan that still meets every constraint meets the next updates now too, until one
                    # rejects it or none is left (certified means certified after the last update)
                    while pending and rec.rejudged is not None and rec.rejudged.accepts:
                        group = [u for u in pending if u.after == pending[0].after]
                        pending = [u for u in pending if all(u is not d for d in group)]
                        so_far = rec.updates
                        in_force = await self._apply(in_force, group, rec)
                        rec.updates = [*so_far, *group]
                except CriticError as exc:
                    result = self._result(
                        common, history, usage.usage(), started, "critic_error", f"{exc}", best.position(history)
                    )
                    raise RunAborted(result) from exc
                version += 1
                view = in_force.planner_view()
                first_prompt = self.first_prompt(view, dialogue)
            elif rec.act == "question":
                first_prompt = self.first_prompt(view, dialogue)

            accepted = rec.rejudged.accepts if rec.rejudged is not None else all_accept
            if accepted:
                stop_reason = "all_passed"
                break
            if s.max_tokens is not None and usage.total_tokens >= s.max_tokens:
                stop_reason = "tokens"
                break
            # the calls' price whether paid now or served from the cache (as max_tokens counts cached tokens):
            # the same configuration run again from the cache stops where it stopped when it paid
            if s.max_dollars is not None and usage.cost_usd + usage.cached_cost_usd >= s.max_dollars:
                stop_reason = "dollars"
                break
            if s.max_seconds is not None and time.perf_counter() - started >= s.max_seconds:
                stop_reason = "seconds"
                break
            if s.stop_after_repeats is not None and repeats >= s.stop_after_repeats:
                stop_reason = "repeats"
                break
            if not self.generator.uses_feedback:
                stop_reason = "generator_ignores_feedback"
                break
            more = index + 1 < s.max_iterations if s.question_costs_iteration else plans < s.max_iterations
            if more:
                t0 = time.perf_counter()
                messages = self._next_messages(view, first_prompt, history, rec, sent_messages)
                rec.backprompt = messages[-1].content
                rec.timings["backprompt"] = time.perf_counter() - t0

        result = self._result(common, history, usage.usage(), started, stop_reason, error, best.position(history))
        result.solvable = in_force.solvable  # ground truth of the request as the updates left it
        result.user = self.user.name if self.user is not None else None
        result.pending_updates = pending
        if abstention is not None and error is None:
            result.abstention = abstention
            result.outcome = Outcome.ABSTAINED
        return result

    async def _ask(
        self, problem: Problem, rec: IterationRecord, dialogue: list[DialogueTurn], *, over_limit: bool
    ) -> None:
        """Have the user answer ``rec.question`` (or the loop's own reply: no user, past max_questions)."""
        question = rec.question or ""
        if over_limit:
            answer = UserAnswer(text=NO_MORE_QUESTIONS, user=OVER_LIMIT)
        elif self.user is None:
            answer = UserAnswer(text=NO_USER_REPLY, user="none")
        else:
            t0 = time.perf_counter()
            ctx = UserContext(turn=rec.index, dialogue=list(dialogue), llm=self.user_llm)
            try:
                reply = await self.user.answer(problem, question, ctx)
            finally:
                rec.timings["user"] = time.perf_counter() - t0
            rec.calls.extend(reply.calls)
            answer = reply.answer
        rec.answer = answer
        dialogue.append(DialogueTurn(turn=rec.index, question=question, answer=answer.text))

    async def _apply(self, problem: Problem, updates: list[ProblemUpdate], rec: IterationRecord) -> Problem:
        """``problem`` with ``updates`` applied (recorded on ``rec``); a plan ``rec`` holds is judged again
        against the new problem (``rec.rejudged``): what was certified may no longer be."""
        problem = in_force(self.benchmark, problem, updates)
        rec.updates = list(updates)
        if rec.act == "plan" and rec.plan is not None:
            t0 = time.perf_counter()
            verdicts, gated = await self._critique(problem.planner_view(), FrozenPlan.of(rec.plan), None)
            rec.rejudged = Judgement(verdicts=verdicts, gated=gated)
            rec.timings["rejudge"] = time.perf_counter() - t0
        return problem

    def _next_messages(
        self,
        view: Problem,
        first_prompt: list[Message],
        history: list[IterationRecord],
        rec: IterationRecord,
        sent_messages: list[Message],
    ) -> list[Message]:
        """The next turn's messages: the answer after a question, else the strategy's backprompt over the
        plan turns (the last one judged against the problem now in force); an update's text goes first."""
        note = ""
        if rec.updates:
            changes = " ".join(u.text.strip() for u in rec.updates if u.text.strip()) or "the constraints were updated."
            note = UPDATE_NOTE.format(changes=changes)
        if rec.act == "question":
            answer = rec.answer.text if rec.answer is not None else ""
            text = ANSWER_NOTE.format(answer=answer) + (f"\n\n{note}" if note else "")
            return [
                *sent_messages,
                Message(role="assistant", content=rec.raw_reply or ""),
                Message(role="user", content=text),
            ]
        plan_turns = [h for h in history if h.act == "plan"]
        if rec.rejudged is not None:
            plan_turns[-1] = rec.model_copy(update={"verdicts": rec.rejudged.verdicts, "gated": rec.rejudged.gated})
        bp = self.strategy.build(
            BackpromptContext(
                problem=view,
                benchmark=self.benchmark,
                first_prompt=first_prompt,
                history=plan_turns,
                priorities=self.priorities,
            )
        )
        if not note:
            return bp.messages
        last = bp.messages[-1]
        return [*bp.messages[:-1], Message(role=last.role, content=f"{note}\n\n{last.content}")]

    def _temperature(self) -> float | None:
        """The generator's sampling temperature (None: no model, a deterministic generator)."""
        settings = getattr(self.llm, "settings", None) if self.generator.needs_llm else None
        return float(settings.temperature) if settings is not None else None

    async def _iterate(self, problem: Problem, rec: IterationRecord) -> None:
        """Generate, reformulate and critique once, filling ``rec`` in place."""
        t0 = time.perf_counter()
        ctx = GenerationContext(
            iteration=rec.index,
            llm=self.llm,
            response_schema=self._schema,
            temperature=rec.temperature,
            draw=rec.draw,
        )
        gen = await self.generator.generate(problem, list(rec.prompt), ctx)
        rec.calls.extend(gen.calls)
        assign(rec, raw_reply=gen.text, tool_use=gen.tool_use)
        t1 = time.perf_counter()
        rec.timings["generate"] = t1 - t0
        if self._dialogue_act(rec, gen):
            _clip_replies(rec)
            return

        plan: PlanJSON = gen.plan
        canonical: str | None = None  # the plan's canonical JSON, when validation made it
        max_reply = self.settings.max_reply_chars or self.benchmark.max_reply_chars
        text = gen.text or ""
        if plan is None and len(text) > max_reply:  # a hostile or runaway reply: never parsed
            rec.format_error = (
                f"the reply is {len(text):,} characters long, over this benchmark's limit of {max_reply:,} "
                "(metacontroller.max_reply_chars); it was not read"
            )
        elif plan is None:
            tags = {"problem_id": problem.id, "iteration": str(rec.index)}
            ref = await self.reformulator.reformulate(
                problem, gen.text or "", truncated=gen.finish_reason == "length", tags=tags
            )
            if ref.calls:
                rec.calls.extend(ref.calls)
            plan, rec.format_error, canonical = ref.plan, ref.error, ref.canonical
        else:
            try:
                plan, canonical = self.benchmark.checked_plan(plan)
            except Exception as exc:  # a search generator produced an invalid plan: a format failure
                plan, rec.format_error = None, str(exc)
        max_items = self.settings.max_plan_items or self.benchmark.max_plan_items
        # the plan's one encoding, fixed here (made by the validation when it could)
        frozen = None if plan is None else FrozenPlan(canonical) if canonical is not None else FrozenPlan.of(plan)
        # every JSON value takes at least one character of the text: a short text needs no count
        if frozen is not None and len(frozen.text) > max_items and count_values(plan, max_items) > max_items:
            plan, frozen, rec.format_error = (
                None,
                None,
                (
                    f"the plan holds more than {max_items:,} values, over this benchmark's limit "
                    "(metacontroller.max_plan_items); it was not checked"
                ),
            )
        _clip_replies(rec)  # the record keeps the head of an oversized reply, not all of it
        t2 = time.perf_counter()
        rec.timings["reformulate"] = t2 - t1
        assign(rec, plan=plan, plan_sha256=frozen.fingerprint if frozen is not None else None)
        # :meth:`_critique`'s body, written out: a plan judged on this thread costs no coroutine
        judged = self._judge_here(problem, frozen, rec.format_error) or await self._in_stages(problem, frozen)
        assign(rec, verdicts=judged[0], gated=judged[1])
        rec.timings["critique"] = time.perf_counter() - t2

    @staticmethod
    def _dialogue_act(rec: IterationRecord, gen: Generation) -> bool:
        """Record a question or an abstention instead of a plan; True when the turn is one of those."""
        if gen.plan is not None:
            return False
        if gen.abstain is not None:
            rec.act, rec.abstain_reason = "abstain", gen.abstain
            return True
        if gen.question is not None:
            rec.act, rec.question = "question", gen.question
            return True
        return False

    async def _critique(
        self, problem: Problem, frozen: FrozenPlan | None, format_error: str | None
    ) -> tuple[list[Verdict], list[str]]:
        """The critics' verdicts on the plan (a format failure's when there is none) and the critics the
        format critics gated."""
        return self._judge_here(problem, frozen, format_error) or await self._in_stages(problem, frozen)

    async def _in_stages(self, problem: Problem, frozen: FrozenPlan | None) -> tuple[list[Verdict], list[str]]:
        """The verdicts of the critics that do not all run on this thread: the format critics' batch, then
        (when they all accept) the others'."""
        assert frozen is not None  # no plan is judged here (:meth:`_judge_here`)
        formats, others = self._stages
        verdicts = await self._run_critics(formats, problem, frozen)
        if not all(map(accepts, verdicts)):  # format critics gate the others
            return verdicts, [c.name for c in others]
        return [*verdicts, *await self._run_critics(others, problem, frozen)], []

    def _judge_here(
        self, problem: Problem, frozen: FrozenPlan | None, format_error: str | None
    ) -> tuple[list[Verdict], list[str]] | None:
        """:meth:`_critique`'s answer where it needs no await: no plan, or every critic on this thread (the
        usual batch of quick critics: one pass, the format critics gating the others in it, no coroutine and no
        second batch); None otherwise."""
        if frozen is None:
            reason = format_error or "no plan could be read from the answer"
            failed = Verdict(
                critic="format",
                group=FORMAT_GROUP,
                passed=False,
                feedback=f"Your answer could not be read as a plan: {reason}.",
                details={"reformulation_error": reason},
            )
            return [failed], [c.name for c in self.critics if c.name != "format"]
        critics, (formats, _) = self._staged
        stop_on_error, stop = self._stop_rule()
        outcomes = self.executor.run_here(critics, problem, frozen, self._timeouts(critics), stop, gate=len(formats))
        if outcomes is None:
            return None
        verdicts = self._verdicts(critics, outcomes, stop_on_error)
        if len(verdicts) == len(critics):
            return verdicts, []
        return verdicts, [c.name for c in critics[len(verdicts) :]]  # those the format critics gated

    async def _run_critics(self, critics: list[Critic], problem: Problem, frozen: FrozenPlan) -> list[Verdict]:
        """Verdicts of ``critics`` in order (through the executor, in one batch); a crash is an errored
        verdict, or stops the run (``on_critic_error=stop``: raised at the first crash, in order)."""
        if not critics:
            return []
        stop_on_error, stop = self._stop_rule()
        timeouts = self._timeouts(critics)
        outcomes = self.executor.run_here(critics, problem, frozen, timeouts, stop)
        if outcomes is None:
            outcomes = await self.executor.run_all(critics, problem, frozen, timeouts, stop=stop)
        return self._verdicts(critics, outcomes, stop_on_error)

    def _stop_rule(self) -> tuple[bool, StopRule]:
        """Whether a crash stops the run (``on_critic_error=stop``), and the batch's stop rule that says so."""
        stop_on_error = self.settings.on_critic_error == "stop"
        return stop_on_error, stop_at_error if stop_on_error else never_stop

    @staticmethod
    def _verdicts(critics: list[Critic], outcomes: list[CriticOutcome], stop_on_error: bool) -> list[Verdict]:
        """The verdicts of a batch's outcomes, in order (a stopped batch is shorter): a crash is an errored
        verdict, or raised (``on_critic_error=stop``)."""
        if not any(map(_is_error, outcomes)):  # verdicts all (the usual batch): no second list
            return outcomes  # type: ignore[return-value]
        verdicts: list[Verdict] = []
        for critic, outcome in zip(critics, outcomes, strict=False):
            if isinstance(outcome, CriticError):
                if stop_on_error:
                    raise outcome
                outcome = Verdict(critic=critic.name, group=critic.group, passed=False, error=str(outcome))
            verdicts.append(outcome)
        return verdicts

    def _result(
        self,
        common: dict[str, Any],
        history: list[IterationRecord],
        usage: Usage,
        started: float,
        stop_reason: str,
        error: str | None,
        pos: int | None,
    ) -> ProblemResult:
        """The problem's record; ``pos``: the best plan's position in ``history`` (:meth:`_BestSoFar.position`)."""
        best = history[pos] if pos is not None else None
        final = history[-1].version_after if history else 0
        judged = best.judged_at(final) if best is not None else None
        rejected_by = [v.critic for v in filterfalse(accepts, judged.verdicts)] if judged is not None else []
        last = history[-1].judged_at(final) if history else None
        if error is not None:
            outcome = Outcome.ERROR
        elif last is not None and last.accepts:
            outcome = Outcome.CERTIFIED
        elif best is not None:
            outcome = Outcome.EXHAUSTED
        elif not history and stop_reason == "run_budget":
            outcome = Outcome.SKIPPED  # the run's money ran out before this problem's first iteration
        else:
            outcome = Outcome.FAILED
        return ProblemResult(
            **common,
            outcome=outcome,
            stop_reason=stop_reason,
            best_plan=best.plan if best is not None else None,
            best_iteration=best.index if best is not None else None,
            best_certified=judged is not None and judged.accepts,
            best_rejected_by=rejected_by,
            iterations=history,
            usage=usage,
            error=error,
            seconds=time.perf_counter() - started,
        )


#: ``isinstance(outcome, CriticError)`` as a function, for ``map`` (a batch's outcomes checked in C)
_is_error = CriticError.__instancecheck__


class _BestSoFar:
    """:func:`best_position` of a problem's iterations, kept as each ends while no update has come (the
    common case: every plan judged against one request), each plan's accepting verdicts counted once."""

    __slots__ = ("at", "count", "counted")

    def __init__(self) -> None:
        self.counted = 0  # iterations counted, from the first
        self.count = -1  # the most accepting verdicts of a plan so far
        self.at: int | None = None  # where the earliest plan with that many is

    def add(self, rec: IterationRecord) -> bool:
        """Count ``rec``, the next iteration, its verdicts final: whether every critic accepted its plan
        (:attr:`IterationRecord.all_accept`)."""
        self.counted += 1
        if rec.plan is None:
            return False
        passed = rec.passed_count
        if passed > self.count:
            self.count, self.at = passed, self.counted - 1
        return passed == len(rec.verdicts) and not rec.gated

    def position(self, history: list[IterationRecord]) -> int | None:
        """``best_position(history)``: the one kept, when it counted every iteration and none brought an
        update; else worked out afresh."""
        if self.counted == len(history) and (not history or history[-1].version_after == 0):
            return self.at
        return best_position(history)


def best_position(history: list[IterationRecord], upto: int | None = None) -> int | None:
    """Position in ``history`` of the best plan among the first ``upto`` iterations: the most accepting
    verdicts, ties to the earliest such plan (a later repeat of it is no better).

    Only plans judged against the problem in force at the end of that window count (after an update,
    the plans judged against the earlier request are out, except the one judged again after it)."""
    window = history[:upto]
    if not window:
        return None
    final = window[-1].version_after
    best: int | None = None
    best_count = -1
    for pos, it in enumerate(window):
        if it.plan is None:
            continue
        if final == 0:  # no update: the plan's own verdicts (the common case, no copies made)
            count = it.passed_count
        else:
            judged = it.judged_at(final)
            if judged is None:
                continue
            count = judged.passed_count
        if count > best_count:
            best, best_count = pos, count
    return best


def resident_mb() -> float | None:
    """The process's current resident memory in MB (Linux /proc), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


#: characters of an oversized reply kept in the record (the rest is counted, not stored)
RECORDED_REPLY_CHARS = 20_000


def _clip(text: str) -> str:
    if len(text) <= RECORDED_REPLY_CHARS:
        return text
    return text[:RECORDED_REPLY_CHARS] + f"\n[... clipped by modulo: {len(text):,} characters in all]"


def _clip_replies(rec: IterationRecord) -> None:
    """Keep records bounded: a reply past :data:`RECORDED_REPLY_CHARS` is stored clipped, and says so."""
    if rec.raw_reply is not None and len(rec.raw_reply) > RECORDED_REPLY_CHARS:
        rec.raw_reply = _clip(rec.raw_reply)
    for call in rec.calls:  # a loop, not any(): no generator made for the usual short replies
        if call.reply and len(call.reply) > RECORDED_REPLY_CHARS:
            rec.calls = [
                c.model_copy(update={"reply": _clip(c.reply)}) if c.reply and len(c.reply) > RECORDED_REPLY_CHARS else c
                for c in rec.calls
            ]
            return


def count_values(data: Any, limit: int) -> int:
    """The number of JSON values in ``data`` (containers and scalars), counting stops past ``limit``."""
    count, stack = 0, [data]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return count


def best_iteration(history: list[IterationRecord], upto: int | None = None) -> IterationRecord | None:
    """The best-so-far iteration among the first ``upto`` (see :func:`best_position`)."""
    pos = best_position(history, upto)
    return history[pos] if pos is not None else None


def _served(calls: list[LLMCall]) -> Literal["fresh", "cache", "mixed", "none"]:
    """How an iteration's model calls were served (failed calls count as fresh: they reached the model)."""
    if len(calls) == 1:  # the usual iteration: one model call
        return "cache" if calls[0].cached else "fresh"
    cached = sum(1 for c in calls if c.cached)
    if not calls:
        return "none"
    if cached == len(calls):
        return "cache"
    return "fresh" if cached == 0 else "mixed"


def _sha(messages: list[Message]) -> str:
    """SHA-256 of the canonical JSON of the messages (what :class:`PromptHasher` computes by parts)."""
    return hashlib.sha256(canonical_json([m.model_dump() for m in messages]).encode()).hexdigest()


#: a metadata value whose JSON is longer than this is left out of the record
SMALL_CHARS = 2000
#: a string this long is small whatever it holds (JSON writes a character as at most six)
_SURELY_SMALL_STR = (SMALL_CHARS - 2) // 6


def _is_small(value: Any) -> bool:
    """Whether ``value``'s canonical JSON is at most :data:`SMALL_CHARS` long (False when it is no JSON);
    a number or a short string is known to be without writing it."""
    kind = type(value)
    if value is None or kind is bool or kind is float or (kind is str and len(value) <= _SURELY_SMALL_STR):
        return True
    if kind is int and -(10**100) < value < 10**100:
        return True
    try:
        return len(canonical_json(value)) <= SMALL_CHARS
    except (TypeError, ValueError):
        return False
