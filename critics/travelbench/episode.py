"""One TravelBench episode: the assistant, the simulated tools, the simulated user and the judge.

``generator=travelbench`` (the default of the ``travelbench/*`` benchmarks) runs a whole episode as
one loop iteration and returns it as the plan (a trajectory, see :class:`~critics.travelbench.benchmark.Episode`):

1. **assistant rounds**: the model (stage ``generate``) answers with tool calls written as
   ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (or native tool calls), or with text
   to the user. At most ``max_tool_steps`` tool rounds per turn and ``max_turns`` turns (the paper: 20
   and 10).
2. **tools**: every call is validated against the tool's schema and TravelBench's rules
   (:func:`critics.travelbench.tools.validate_call`); an invalid one is a tool-call error and gets the
   error text back; a valid one is answered by the **tool simulator**, an LLM call of stage ``tool``
   through the same client as every call (cached, accounted and recorded like any other), standing in
   for the authors' unavailable response cache.
3. **user**: on the multi-turn split each text to the user goes to the **user simulator** (stage
   ``user``), which holds the row's hidden intent and profile, answers only what is asked, and ends
   the conversation with ``[Finish Conversation]``. On the single-turn split the first text is the
   final answer.
4. **abstention**: on an unsolvable problem (and on the solvable controls of the ``with_controls``
   split) the paper scores only the first assistant message (``[Unsolved]`` in it), so the episode
   stops there: no tool is simulated and no judge is asked.
5. **judge** (stage ``judge``): the trajectory is rated 1-5 per dimension and the meta-judge rates
   the rating (see :mod:`critics.travelbench.judge`); the ratings are stored in the plan and the
   benchmark's evaluator computes the score from them.

The generator ignores backprompts (one episode per problem, as in the paper).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from modulo import components
from modulo.benchmark import Benchmark
from modulo.errors import ConfigError
from modulo.generators import Generation, GenerationContext, Generator, keep_calls
from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.client import LLMClient, build_client
from modulo.registry import bind_arguments
from modulo.tools import ToolArgumentError
from modulo.types import LLMCall, Message, Problem, Stage, ToolCall
from modulo.users import DialogueTurn, User, UserContext

from .judge import dimensions, evaluation_text, parse_meta, parse_ratings
from .tools import tool_spec, tools_text, validate_call

UNSOLVED = "[Unsolved]"
FINISH = "[Finish Conversation]"
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
ROLE_NAMES = {"user": "用户", "assistant": "助手", "tool": "工具返回"}


class TravelBenchAgent(Generator):
    """The TravelBench protocol as a generator: a whole episode per problem, judged at the end."""

    needs_llm = True
    uses_feedback = False
    benchmarks = ("travelbench/single_turn", "travelbench/multi_turn", "travelbench/unsolvable")

    def __init__(
        self,
        *,
        benchmark: Benchmark,
        max_turns: int = 10,
        max_tool_steps: int = 20,
        judge: bool = True,
        meta_judge: bool = True,
        judge_retries: int = 2,
        judge_llm: dict[str, Any] | None = None,
        tool_llm: dict[str, Any] | None = None,
        user_llm: dict[str, Any] | None = None,
        user: str = "llm",
        user_args: dict[str, Any] | None = None,
        sample_index: int = 0,
    ) -> None:
        for key, value, low in (("max_turns", max_turns, 1), ("max_tool_steps", max_tool_steps, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"generator.args.{key} must be an integer >= {low}, not {value!r}")
        if isinstance(judge_retries, bool) or not isinstance(judge_retries, int) or judge_retries < 0:
            raise ConfigError(f"generator.args.judge_retries must be an integer >= 0, not {judge_retries!r}")
        from .benchmark import TravelBenchBase

        if not isinstance(benchmark, TravelBenchBase):
            raise ConfigError(f"generator=travelbench runs TravelBench episodes, not {benchmark.name!r} problems")
        self.benchmark = benchmark
        self.max_turns = max_turns
        self.max_tool_steps = max_tool_steps
        self.judge = judge
        self.meta_judge = meta_judge
        self.judge_retries = judge_retries
        # the judge's and the tool simulator's model: the run's client, or a client of their own built from
        # the run's llm settings with these overriding them (another model, another registered backend)
        self.role_llm = {
            "judge": _llm_overrides("judge_llm", judge_llm),
            "tool": _llm_overrides("tool_llm", tool_llm),
            "user": _llm_overrides("user_llm", user_llm),
        }
        self._clients: dict[str, LLMClient] = {}
        self.sample_index = sample_index
        self._templates = {role: benchmark.template(role) for role in ("agent", "tool", "judge", "meta_judge")}
        # the multi-turn user: a registered user (modulo.users; `llm` is the simulator holding the hidden
        # intent and profile, rendering this benchmark's `user` template)
        factory = components.users.get(user)
        kwargs = bind_arguments("user", user, factory, dict(user_args or {}), inject={"benchmark": benchmark})
        self.user: User = factory(**kwargs)

    def client(self, stage: str, run_llm: LLMClient) -> LLMClient:
        """The client a stage's calls go through (same cache as the run's)."""
        overrides = self.role_llm.get(stage)
        if not overrides:
            return run_llm
        if stage not in self._clients:  # no await before the assignment: one client per role, even concurrently
            settings = run_llm.settings.model_copy(update=overrides)
            cache_dir = run_llm.cache.path if run_llm.cache is not None else None
            self._clients[stage] = build_client(settings, cache_mode=run_llm.cache_mode, cache_dir=cache_dir)
        return self._clients[stage]

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()

    def templates(self) -> dict[str, str]:
        return {**{role: t.label for role, t in self._templates.items()}, **self.user.templates()}

    def first_prompt(self, problem: Problem) -> list[Message]:
        mode = "multi" if problem.metadata.get("mode") == "multi" else "single"
        system = self._templates["agent"].render(
            time=problem.metadata.get("time", ""), context=problem.context, tools=tools_text(), mode=mode
        )
        return [Message(role="system", content=system), Message(role="user", content=problem.query)]

    async def generate(self, problem: Problem, messages: list[Message], ctx: GenerationContext) -> Generation:
        if ctx.llm is None:
            raise ConfigError("generator=travelbench needs an llm backend")
        run = _Episode(self, problem, ctx, ctx.llm)
        with keep_calls(run.calls):  # a call that fails for good: the episode's earlier calls are counted with it
            plan = await run.play(list(messages))
        if plan["declined"]:  # [Unsolved] in the first message: the loop records an abstention, no plan
            return Generation(text=plan["first_message"], abstain=plan["first_message"], calls=run.calls)
        return Generation(plan=plan, calls=run.calls)


class _Episode:
    """The state of one episode (its calls are returned for the iteration record)."""

    def __init__(self, agent: TravelBenchAgent, problem: Problem, ctx: GenerationContext, llm: LLMClient) -> None:
        self.agent = agent
        self.problem = problem
        self.ctx = ctx
        self.llm = llm
        self.calls: list[LLMCall] = []
        self.trajectory: list[dict[str, Any]] = []
        self.tool_calls = 0
        self.tool_errors = 0
        self.mode = "multi" if problem.metadata.get("mode") == "multi" else "single"
        self.abstention_only = problem.solvable is False or bool(problem.metadata.get("control"))
        self.time = str(problem.metadata.get("time", "2025-01-01 00:00"))

    async def ask(
        self,
        stage: Stage,
        messages: list[Message],
        *,
        temperature: float | None = None,
        draw: int = 0,
        what: str = "",
    ) -> LLMCall:
        client = self.agent.client(stage, self.llm)
        settings = client.settings
        request = LLMRequest(
            messages=tuple(messages),
            model=settings.model,
            temperature=settings.temperature if temperature is None else temperature,
            max_tokens=settings.max_tokens,
            sample_index=self.agent.sample_index,
            draw=draw,
            structured_output="off",
            tags={"problem_id": self.problem.id, "iteration": str(self.ctx.iteration), "stage": stage, "what": what},
        )
        call = await client.call(request, stage)
        self.calls.append(call)
        return call

    async def play(self, messages: list[Message]) -> dict[str, Any]:
        self.trajectory.append({"role": "user", "content": self.problem.query})
        first_message: str | None = None
        first_called_tools = False
        final: str | None = None
        ended_by = "turn_cap"
        turns = questions = unnecessary = 0
        dialogue: list[DialogueTurn] = []
        while turns < self.agent.max_turns:
            steps = 0
            text = ""
            while True:
                call = await self.ask(
                    "generate", messages, temperature=self.ctx.temperature, draw=self.ctx.draw, what="assistant"
                )
                text = call.reply or ""
                requested = _requested_calls(text, call.tool_calls)
                if first_message is None:
                    first_message, first_called_tools = text, bool(requested)
                messages.append(Message(role="assistant", content=text or _calls_text(requested)))
                if not requested:
                    break
                entry: dict[str, Any] = {"role": "assistant", "content": text, "tool_calls": []}
                self.trajectory.append(entry)
                if self.abstention_only:
                    ended_by = "first_message"
                    break
                steps += 1
                if steps > self.agent.max_tool_steps:
                    ended_by = "tool_step_cap"
                    break
                responses = []
                for name, arguments, parse_error in requested:
                    result, error = await self.run_tool(name, arguments, parse_error)
                    entry["tool_calls"].append({"name": name, "arguments": arguments, "error": error})
                    self.trajectory.append({"role": "tool", "name": name, "content": result, "error": error})
                    responses.append(f"<tool_response>\n{result}\n</tool_response>")
                messages.append(Message(role="user", content="\n".join(responses)))
            if ended_by in ("first_message", "tool_step_cap"):
                break
            self.trajectory.append({"role": "assistant", "content": text})
            turns += 1
            final = text
            if self.abstention_only:
                ended_by = "first_message"
                break
            if UNSOLVED in text:
                ended_by = "declined"  # the first message: an abstention (nothing judged); later: judged
                break
            if self.mode == "single":
                ended_by = "answer"
                break
            context = UserContext(turn=turns - 1, dialogue=list(dialogue), llm=self.agent.client("user", self.llm))
            answered = await self.agent.user.answer(self.agent.benchmark.with_hidden(self.problem), text, context)
            self.calls.extend(answered.calls)
            reply = answered.answer.text
            dialogue.append(DialogueTurn(turn=turns - 1, question=text, answer=reply))
            self.trajectory.append({"role": "user", "content": reply})
            if FINISH in reply:
                ended_by = "user_finished"
                break
            questions += 1
            unnecessary += bool(answered.answer.unnecessary)
            messages.append(Message(role="user", content=reply))
        plan: dict[str, Any] = {
            "mode": "abstention" if self.abstention_only else self.mode,
            "messages": self.trajectory,
            "first_message": first_message or "",
            "first_called_tools": first_called_tools,
            "declined": bool(first_message and UNSOLVED in first_message and not first_called_tools),
            "final_answer": final,
            "ended_by": ended_by,
            "turns": turns,
            "questions": questions,
            "unnecessary_questions": unnecessary,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "judge": None,
        }
        if self.agent.judge and not self.abstention_only and not plan["declined"]:
            plan["judge"] = await self.judge(plan)
        return plan

    async def run_tool(self, name: str, arguments: Any, parse_error: str | None) -> tuple[str, str | None]:
        """(the response text, the error or None). An invalid call is an error and is never simulated."""
        self.tool_calls += 1
        error = parse_error
        if error is None:
            try:
                if not isinstance(arguments, dict):
                    raise ToolArgumentError(f"{name}: arguments must be a JSON object")
                validate_call(name, arguments, self.time)
            except ToolArgumentError as exc:
                error = str(exc)
        if error is not None:
            self.tool_errors += 1
            return json.dumps({"error": error}, ensure_ascii=False), error
        spec = tool_spec(name)
        system = self.agent._templates["tool"].render(
            name=name,
            description=spec.description,
            parameters=json.dumps(spec.parameters, ensure_ascii=False),
            time=self.time,
            context=self.problem.context,
        )
        request = json.dumps({"tool": name, "arguments": arguments}, ensure_ascii=False, sort_keys=True)
        call = await self.ask(
            "tool",
            [Message(role="system", content=system), Message(role="user", content=request)],
            temperature=0.0,
            what=name,
        )
        return (call.reply or "").strip() or '{"result": []}', None

    async def ask_until(self, prompt: str, what: str, parse: Callable[[str], T | None]) -> tuple[T | None, int]:
        """Ask the judge model ``prompt`` until ``parse`` reads its reply: at temperature 0, then at most
        ``judge_retries`` more times at 0.7 as new draws (the paper's retries). (parsed or None, attempts)."""
        attempts = 0
        for attempt in range(self.agent.judge_retries + 1):
            attempts += 1
            call = await self.ask(
                "judge",
                [Message(role="user", content=prompt)],
                temperature=0.0 if attempt == 0 else 0.7,
                draw=attempt,
                what=what,
            )
            parsed = parse(call.reply or "")
            if parsed is not None:
                return parsed, attempts
        return None, attempts

    async def judge(self, plan: dict[str, Any]) -> dict[str, Any]:
        dims = dimensions(self.mode)
        variables = {
            "context": self.problem.context,
            "query": self.problem.query,
            "tools": tools_text(),
            "conversation": conversation_text(plan["messages"]),
        }
        prompt = self.agent._templates["judge"].render(dimensions=dims, **variables)
        judged, attempts = await self.ask_until(prompt, "judge", lambda reply: parse_ratings(reply, dims))
        if judged is None:
            return {
                "ratings": None,
                "error": f"no rating for every dimension in {attempts} judge replies",
                "attempts": attempts,
                "meta": None,
                "meta_status": "not asked",
            }
        ratings, reasons = judged
        result: dict[str, Any] = {"ratings": ratings, "reasons": reasons, "attempts": attempts, "meta": None}
        if not self.agent.meta_judge:
            result["meta_status"] = "off"
            return result
        meta_prompt = self.agent._templates["meta_judge"].render(
            evaluation=evaluation_text(ratings, reasons), **variables
        )
        meta, _ = await self.ask_until(meta_prompt, "meta_judge", parse_meta)
        if meta is not None:
            result.update(meta=meta, meta_status="ok")
            return result
        result["meta_status"] = "unparsed"
        return result


T = TypeVar("T")


def _llm_overrides(key: str, values: dict[str, Any] | None) -> dict[str, Any]:
    """``generator.args.KEY`` checked: llm settings by name (``name`` a registered backend); {} for none."""
    values = dict(values or {})
    unknown = sorted(set(values) - set(LLMSettings.model_fields))
    if unknown:
        known = ", ".join(sorted(LLMSettings.model_fields))
        raise ConfigError(f"generator.args.{key}: unknown llm setting(s) {', '.join(unknown)}; settings: {known}")
    if "name" in values and values["name"] not in components.llms:
        raise ConfigError(f"generator.args.{key}.name: no llm backend {values['name']!r} (modulo list llms)")
    try:
        LLMSettings(**values)
    except ValueError as exc:
        raise ConfigError(f"generator.args.{key}: {exc}") from None
    return values


def _requested_calls(text: str, native: list[ToolCall]) -> list[tuple[str, Any, str | None]]:
    """(name, arguments, parse error) of every tool call in a reply: native ones, then ``<tool_call>`` blocks."""
    found: list[tuple[str, Any, str | None]] = []
    for call in native:
        error = None if call.raw_arguments is None else f"{call.name}: arguments are not a JSON object"
        found.append((call.name, call.arguments, error))
    for block in _TOOL_CALL.findall(text):
        try:
            data = json.loads(block)
        except json.JSONDecodeError as exc:
            found.append(("?", None, f"a tool call that is not JSON ({exc.msg})"))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            found.append(("?", None, "a tool call without a 'name'"))
            continue
        name = data["name"]
        error = None
        try:
            tool_spec(name)
        except ToolArgumentError as exc:
            error = str(exc)
        found.append((name, data.get("arguments", {}), error))
    return found


def _calls_text(requested: list[tuple[str, Any, str | None]]) -> str:
    return "\n".join(
        "<tool_call>" + json.dumps({"name": n, "arguments": a}, ensure_ascii=False) + "</tool_call>"
        for n, a, _ in requested
    )


def conversation_text(messages: list[dict[str, Any]]) -> str:
    """A trajectory as the judge and a person read it (Chinese role names, JSON without escapes)."""
    lines = []
    for m in messages:
        role = ROLE_NAMES.get(m["role"], m["role"])
        if m["role"] == "tool":
            role = f"{role}（{m.get('name', '')}）"
        lines.append(f"【{role}】{m.get('content', '')}")
        for call in m.get("tool_calls") or []:
            args = json.dumps(call.get("arguments"), ensure_ascii=False)
            mark = f"（无效调用：{call['error']}）" if call.get("error") else ""
            lines.append(f"【工具调用】{call['name']} {args}{mark}")
    return "\n".join(lines)
