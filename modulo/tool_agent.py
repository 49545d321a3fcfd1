"""``generator=tool_agent``: a two-stage agent. It gathers information with the benchmark's tools, writes
what it keeps into a notebook, and then a planner call writes the plan from the notebook.

Stage 1 (tool use) runs in one of two modes:

* ``native``: the tools, ``NotebookWrite`` and ``Planner`` are declared to the model by JSON Schema and it
  calls them through the provider's tool-calling API (OpenAI and Anthropic SDKs, the scripted backend);
* ``react``: for models without tool calling, a text scratchpad in the TravelPlanner paper's ReAct
  syntax: the model answers ``Thought n: ...`` and ``Action n: FlightSearch[Sarasota, Chicago, 2022-03-22]``
  and reads ``Observation n: ...``.

The official agent's rules: at most ``max_steps`` steps (official: 30); ``NotebookWrite[description]``
stores the latest tool result; ``Planner[query]`` ends stage 1; an action that is not a known tool is an
invalid action (its observation lists the valid ones), and a call to a tool (or an invalid action) after
``max_retries`` (official: 3) failed ones in a row stops the agent instead of running; the same action
three times in a row stops it; running out of steps stops it.
Those stops are recorded as the iteration's ``tool_use['outcome']`` (``invalid_action``,
``repeated_action``, ``step_limit``); as officially, a stopped agent delivers no plan. A tool that
raises (a locked store, a bug) fails that call only: the step is recorded with state ``Tool error`` and
the exception as the observation the agent reads, and it counts against ``max_retries`` like an
illegal call.

Stage 2 (planning) renders the benchmark's ``direct`` planner prompt with the notebook as its context.

Inside LLM-Modulo, a backprompt either goes straight to the planner with the same notebook
(``on_backprompt=replan``) or sends the agent back to its tools first with the critics' feedback
(``on_backprompt=resume``); ``tool_use['start']`` says which (``fresh`` at the first iteration). Every
step (action, arguments, state, observation, rows, lookup time) is in ``tool_use['steps']``; ``modulo
show`` prints them. The agent's notebook is kept per problem between iterations (at most
``_MAX_STATES`` problems at a time; an evicted problem restarts from an empty notebook, which its
record says).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from .benchmark import Benchmark
from .errors import ConfigError
from .generators.base import Generation, GenerationContext, Generator, keep_calls
from .llm.base import LLMRequest, ToolDecl, ToolTurn
from .prompts import Template, resolve
from .tools import ToolArgumentError, Toolbox, ToolResult, ToolSpec, parse_action
from .types import LLMCall, Message, Problem, ToolCall

Mode = Literal["native", "react"]
OnBackprompt = Literal["replan", "resume"]
NOTEBOOK = "NotebookWrite"
PLANNER = "Planner"
MASK = "Masked due to limited length. Make sure the data has been written in Notebook."
#: characters of an observation kept in the iteration record (the model saw all of it)
RECORD_CHARS = 2000
_MAX_STATES = 256
_ACTION_LINE = re.compile(r"Action\s*\d*\s*:\s*(.*)")
#: the agent's own two tools, made once: a spec's schema validator is cached by the schema's identity
#: (:meth:`modulo.tools.ToolSpec.bind`), so a spec made anew per call would add one at every NotebookWrite
_AGENT_SPECS = (
    ToolSpec.strings(
        NOTEBOOK,
        "Write the latest tool result into the notebook under a short description.",
        description="a short description of what is written",
    ),
    ToolSpec.strings(
        PLANNER,
        "Stop gathering: the planner writes the plan from the notebook for this query.",
        query="the query",
    ),
)


@dataclass
class _State:
    """One problem's agent state between iterations."""

    notebook: list[tuple[str, str]] = field(default_factory=list)
    turns: list[ToolTurn] = field(default_factory=list)
    scratchpad: str = ""
    step: int = 0


@dataclass
class _Run:
    """One stage-1 run: its steps, its failure counters and the latest tool result."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    calls: list[LLMCall] = field(default_factory=list)
    last_actions: list[str] = field(default_factory=list)
    #: failed calls in a row, per tool ("invalidAction" for unknown actions); a success resets them all
    retries: dict[str, int] = field(default_factory=dict)
    current: str | None = None
    outcome: str | None = None


class ToolAgentGenerator(Generator):
    """Gather with tools, then plan from the notebook (see the module doc)."""

    needs_llm: ClassVar[bool] = True
    #: the notebook and tool turns persist across iterations: a repeated backprompt is not a fixed point
    stateless: ClassVar[bool] = False
    prompt_role = "direct"

    def __init__(
        self,
        *,
        benchmark: Benchmark,
        mode: Mode = "native",
        max_steps: int = 30,
        max_retries: int = 3,
        on_backprompt: OnBackprompt = "replan",
        sample_index: int = 0,
    ) -> None:
        if mode not in ("native", "react"):
            raise ConfigError(f"generator.mode must be native or react, not {mode!r}")
        if on_backprompt not in ("replan", "resume"):
            raise ConfigError(f"generator.on_backprompt must be replan or resume, not {on_backprompt!r}")
        if max_steps < 1 or max_retries < 1:
            raise ConfigError("generator.max_steps and generator.max_retries must be positive")
        toolbox = benchmark.tools()
        if toolbox is None:
            raise ConfigError(f"generator=tool_agent needs a benchmark with tools; {benchmark.name!r} offers none")
        self.benchmark = benchmark
        self.toolbox: Toolbox = toolbox
        self.mode: Mode = mode
        self.max_steps = max_steps
        self.max_retries = max_retries
        self.on_backprompt: OnBackprompt = on_backprompt
        self.sample_index = sample_index
        template_id = benchmark.prompts.get("direct")
        if template_id:
            from .prompts import load_template

            self.template: Template = load_template(template_id)
        else:
            self.template = resolve(benchmark.name, "direct")
        self._states: OrderedDict[str, _State] = OrderedDict()

    def templates(self) -> dict[str, str]:
        return {"direct": self.template.label, "tool_agent": f"tool_agent/{self.mode}/v1"}

    # -- prompts ---------------------------------------------------------------------------------
    def specs(self) -> list[ToolSpec]:
        """The benchmark's tools plus NotebookWrite and Planner."""
        return [*self.toolbox.specs(), *_AGENT_SPECS]

    def valid_actions(self) -> str:
        return " / ".join(s.signature() for s in self.specs())

    def agent_prompt(self, problem: Problem) -> str:
        lines = [
            "Collect the information needed to plan for the query below with the tools, write every piece you "
            "will need into the notebook with NotebookWrite (it stores the latest tool result), and call "
            "Planner when the notebook holds everything. The tools:",
            *(f"- {s.signature()}: {s.description}" for s in self.specs()),
        ]
        if self.mode == "react":
            lines += [
                "Answer each step with one line 'Thought n: ...' and one line 'Action n: Name[arg1, arg2]'.",
            ]
        lines += ["", f"Query: {problem.query}"]
        return "\n".join(lines)

    def planner_messages(self, problem: Problem, state: _State, messages: list[Message]) -> list[Message]:
        """The planner prompt with the notebook as the context, then the backprompt conversation if any."""
        notebook = str([{"index": i, "Short Description": d, "Content": c} for i, (d, c) in enumerate(state.notebook)])
        variables: dict[str, Any] = {
            **self.benchmark.prompt_variables(problem.model_copy(update={"context": notebook})),
            "context": notebook,
            "problem": problem,
        }
        return [Message(role="user", content=self.template.render(**variables)), *messages[1:]]

    # -- the loop --------------------------------------------------------------------------------
    async def generate(self, problem: Problem, messages: list[Message], ctx: GenerationContext) -> Generation:
        if ctx.llm is None:
            raise ConfigError("generator=tool_agent needs an llm backend")
        state = self._states.get(problem.id)
        evicted = False
        if ctx.iteration == 0 or state is None:
            evicted = ctx.iteration > 0
            state = _State()
            self._states[problem.id] = state
            while len(self._states) > _MAX_STATES:
                self._states.popitem(last=False)
        self._states.move_to_end(problem.id)
        start = "fresh" if ctx.iteration == 0 or evicted else self.on_backprompt
        run = _Run()

        def record(outcome: str | None) -> dict[str, Any]:
            out: dict[str, Any] = {
                "mode": self.mode,
                "start": start,
                "steps": run.steps,
                "outcome": outcome,
                "notebook": [
                    {"index": i, "description": d, "chars": len(c)} for i, (d, c) in enumerate(state.notebook)
                ],
            }
            if evicted:
                out["note"] = "the agent state of earlier iterations was evicted: started from an empty notebook"
            return out

        # a model call that fails for good ends the turn: its steps so far are recorded and counted with it
        with keep_calls(run.calls, lambda: record("llm_error")):
            if start in ("fresh", "resume"):
                feedback = messages[-1].content if start == "resume" and len(messages) > 1 else None
                await self._gather(problem, state, run, ctx, feedback)
            done = record(run.outcome if start != "replan" else "replanned")
            if run.outcome not in (None, "planner"):
                return Generation(text="", calls=run.calls, tool_use=done)  # officially: no plan
            request = self._request(problem, ctx, self.planner_messages(problem, state, messages), "plan")
            call = await ctx.llm.call(request, "generate")
            run.calls.append(call)
        return Generation(text=call.reply, calls=run.calls, finish_reason=call.finish_reason, tool_use=done)

    def _request(
        self,
        problem: Problem,
        ctx: GenerationContext,
        messages: list[Message],
        stage: str,
        *,
        tools: tuple[ToolDecl, ...] = (),
        turns: tuple[ToolTurn, ...] = (),
    ) -> LLMRequest:
        assert ctx.llm is not None
        settings = ctx.llm.settings
        return LLMRequest(
            messages=tuple(messages),
            model=settings.model,
            temperature=settings.temperature if ctx.temperature is None else ctx.temperature,
            max_tokens=settings.max_tokens,
            seed=settings.seed + ctx.draw if settings.seed is not None else None,
            sample_index=self.sample_index,
            draw=ctx.draw,
            tools=tools,
            turns=turns,
            tags={"problem_id": problem.id, "iteration": str(ctx.iteration), "stage": "generate", "agent": stage},
        )

    async def _gather(
        self, problem: Problem, state: _State, run: _Run, ctx: GenerationContext, feedback: str | None
    ) -> None:
        assert ctx.llm is not None
        first = self.agent_prompt(problem)
        decls = tuple(ToolDecl(name=s.name, description=s.description, parameters=s.schema()) for s in self.specs())
        if feedback:
            note = (
                f"The plan written from the notebook was rejected:\n{feedback}\n"
                "Gather what is missing, then call Planner."
            )
            if self.mode == "native":
                state.turns.append(ToolTurn(feedback=note))
            else:
                state.scratchpad += f"\n{note}"
        for _ in range(self.max_steps):
            state.step += 1
            n = state.step
            if self.mode == "native":
                request = self._request(
                    problem, ctx, [Message(role="user", content=first)], "tools", tools=decls, turns=tuple(state.turns)
                )
                call = await ctx.llm.call(request, "generate")
                run.calls.append(call)
                if not call.tool_calls:
                    text = (call.reply or "").strip()
                    if self._out_of_retries(run, n, text, "invalidAction"):
                        return
                    observation = self._invalid(run)
                    state.turns.append(ToolTurn(text=text, feedback=observation))
                    self._step(run, n, text, None, "invalidAction", observation)
                else:
                    results: list[str] = []
                    for tool_call in call.tool_calls:
                        results.append(self._act(state, run, n, tool_call.name, tool_call, None))
                        if run.outcome is not None:
                            break
                    calls = tuple(call.tool_calls[: len(results)])
                    state.turns.append(ToolTurn(text=(call.reply or ""), calls=calls, results=tuple(results)))
            else:
                prompt = f"{first}\n{state.scratchpad}\nThought {n}:"
                request = self._request(problem, ctx, [Message(role="user", content=prompt)], "tools")
                call = await ctx.llm.call(request, "generate")
                run.calls.append(call)
                reply = (call.reply or "").strip()
                thought, action = _split_react(reply)
                state.scratchpad += f"\nThought {n}: {thought}\nAction {n}: {action}"
                observation = self._act(state, run, n, None, None, action)
                state.scratchpad += f"\nObservation {n}: {observation}"
            if run.outcome is not None:
                return
        run.outcome = "step_limit"
        if run.steps:
            run.steps[-1]["state"] += "; step limit reached"

    def _invalid(self, run: _Run, key: str = "invalidAction") -> str:
        run.retries[key] = run.retries.get(key, 0) + 1
        return f"Invalid Action. Valid Actions are {self.valid_actions()}."

    def _out_of_retries(self, run: _Run, n: int, action: str, key: str) -> bool:
        """Officially, a call whose tool (or the invalid actions) already failed ``max_retries`` times in a
        row is not carried out: the agent stops."""
        if run.retries.get(key, 0) + 1 <= self.max_retries:
            return False
        run.outcome = "invalid_action"
        self._step(run, n, action, None, f"{key} early stop due to {self.max_retries} max retries.", "")
        return True

    def _step(self, run: _Run, n: int, action: str, result: ToolResult | None, state: str, observation: str) -> None:
        step: dict[str, Any] = {"step": n, "action": action, "state": state}
        if result is not None:
            step.update(tool=result.tool, arguments=result.arguments, rows=len(result.rows or []))
            step["micros"] = round(result.micros, 1)
        step["observation"] = observation[:RECORD_CHARS]
        if len(observation) > RECORD_CHARS:
            step["observation_chars"] = len(observation)
        run.steps.append(step)

    def _act(self, state: _State, run: _Run, n: int, name: str | None, call: ToolCall | None, text: str | None) -> str:
        """Carry out one action (a native call, or a ReAct action text); returns the observation."""
        if call is not None:
            action = f"{call.name}[{', '.join(str(v) for v in call.arguments.values())}]"
            arguments: dict[str, Any] | list[str] | None = call.arguments if call.raw_arguments is None else None
        else:
            action = text or ""
            parsed = parse_action(action)
            name, arguments = (parsed[0], None) if parsed else (None, None)
            if parsed is not None:
                spec = next((s for s in self.specs() if parsed[0] == s.name or parsed[0] in s.aliases), None)
                arguments = spec.split_text(parsed[1]) if spec is not None else None
        # the same action three times in a row ends the run (as officially)
        if run.last_actions and run.last_actions[-1] != action:
            run.last_actions.clear()
        run.last_actions.append(action)
        if len(run.last_actions) >= 3:
            run.outcome = "repeated_action"
            observation = "The same action has been repeated 3 times consecutively. So we stop here."
            self._step(run, n, action, None, "same action 3 times repeated", observation)
            return observation
        known = {s.name for s in self.specs()} | {a for s in self.specs() for a in s.aliases}
        key = name if name is not None and name in known and arguments is not None else "invalidAction"
        if name != PLANNER and self._out_of_retries(run, n, action, key):
            return ""
        if key == "invalidAction":
            observation = self._invalid(run)
            self._step(run, n, action, None, "invalidAction", observation)
            return observation
        assert name is not None and arguments is not None
        if name == PLANNER:
            run.retries.clear()
            run.outcome = "planner"
            self._step(run, n, action, None, "Successful", "the planner writes the plan from the notebook")
            return "The planner is writing the plan."
        if name == NOTEBOOK:
            try:
                description = _AGENT_SPECS[0].bind(arguments)["description"]
            except ToolArgumentError as exc:
                observation = str(exc)
                self._invalid(run, key)
                self._step(run, n, action, None, "Illegal args", observation)
                return observation
            state.notebook.append((str(description), run.current if run.current is not None else "None"))
            run.retries.clear()
            observation = f"The information has been recorded in Notebook, and its index is {len(state.notebook) - 1}."
            self._step(run, n, action, None, "Successful", observation)
            return observation
        try:
            result = self.toolbox.call(name, arguments)
        except ToolArgumentError as exc:
            observation = f"Illegal {name}. Please try again. ({exc})"
            self._invalid(run, key)
            self._step(run, n, action, None, "Illegal args", observation)
            return observation
        except MemoryError:
            raise  # the loop stops this problem with a recorded error, as it does for any stage
        except Exception as exc:  # a tool that breaks fails this call, not the problem: recorded, read by the agent
            observation = f"{name} failed: {type(exc).__name__}: {exc}. Please try again."
            self._invalid(run, key)
            failed = ToolResult(name, self.toolbox.spec(name).bind(arguments), ok=False, message=observation)
            self._step(run, n, action, failed, "Tool error", observation)
            return observation
        observation = result.text
        if not result.ok:
            self._invalid(run, key)
            self._step(run, n, action, result, "Illegal args", observation)
            return observation
        if self.mode == "react" and run.current:
            state.scratchpad = state.scratchpad.replace(run.current, MASK)
        run.current = observation
        run.retries.clear()
        self._step(run, n, action, result, "Successful", observation)
        return observation


def _split_react(reply: str) -> tuple[str, str]:
    """(thought, action) of a ReAct reply: the first 'Action n:' line, else a line that is an action."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        m = _ACTION_LINE.match(line)
        if m:
            return " ".join(lines[:i]).removeprefix("Thought").strip(" :0123456789"), m.group(1).strip()
    for i, line in enumerate(lines):
        if parse_action(line) is not None:
            return " ".join(lines[:i]), line
    return " ".join(lines), ""
