"""``modulo show RUN_DIR PROBLEM_ID``: the story of one problem, iteration by iteration.

For each iteration: what happened (plan or format error), each critic's state (pass / FAIL / n/a /
gated / error) and which critics flipped since the previous iteration, the failing critics' feedback,
the backprompt that this iteration's verdicts produced (full text, and at which iteration it was sent),
a unified diff of the plan JSON against the previous plan, and the iteration's LLM usage.

The story is built as a list of :class:`Block` values and rendered as plain text (``--plain``, pipes,
tests) or with rich.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import RunError
from ..terminal import safe_text
from ..types import IterationRecord, PlanJSON, ProblemResult, Usage, Verdict
from .budget import best_iteration_at
from .load import RunData
from .tables import iteration_errored

BlockKind = Literal["heading", "text", "verbatim", "diff", "json"]


@dataclass(frozen=True)
class Block:
    kind: BlockKind
    text: str
    title: str = ""


@dataclass
class Story:
    run: RunData
    record: ProblemResult
    blocks: list[Block] = field(default_factory=list)


def find_record(run: RunData, problem_id: str) -> ProblemResult:
    """The record of ``problem_id`` (RunError listing close ids when there is none)."""
    rec = run.records.get(problem_id)
    if rec is not None:
        return rec
    known = list(run.records)
    close = difflib.get_close_matches(problem_id, known, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    if problem_id in run.problem_ids:
        raise RunError(f"{run.path}: problem {problem_id!r} is part of the run but has not finished.{hint}")
    sample = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
    raise RunError(f"{run.path}: no problem {problem_id!r} in this run.{hint} Recorded ids: {sample or 'none'}")


def critic_state(v: Verdict) -> str:
    if v.error is not None:
        return "error"
    if not v.applicable:
        return "n/a"
    return "pass" if v.passed else "FAIL"


def states(it: IterationRecord) -> dict[str, str]:
    """Critic -> state at one iteration (gated critics included).

    An iteration that errored before the critics ran (no plan, no verdict) has no critic state: it is
    not a format rejection.
    """
    out = {v.critic or f"#{i}": critic_state(v) for i, v in enumerate(it.verdicts)}
    for name in it.gated:
        out.setdefault(name, "gated")
    return out


def flips(before: dict[str, str], after: dict[str, str]) -> list[tuple[str, str, str]]:
    """Critics whose state changed: (critic, old, new); a critic absent on one side reads "-"."""
    names = list(dict.fromkeys([*before, *after]))
    return [(n, before.get(n, "-"), after.get(n, "-")) for n in names if before.get(n, "-") != after.get(n, "-")]


def plan_text(plan: PlanJSON) -> str:
    return json.dumps(plan, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def plan_diff(old: PlanJSON, new: PlanJSON, old_label: str, new_label: str) -> str:
    lines = difflib.unified_diff(
        plan_text(old).splitlines(), plan_text(new).splitlines(), fromfile=old_label, tofile=new_label, lineterm=""
    )
    return "\n".join(lines)


def tool_use_text(tool_use: dict[str, Any]) -> str:
    """A tool-using generator's iteration: how it started, each step (action, state, rows, time, the start
    of the observation), how it ended, and the notebook."""
    lines = [f"mode {tool_use.get('mode')}, start {tool_use.get('start')}, outcome {tool_use.get('outcome')}"]
    if tool_use.get("note"):
        lines.append(str(tool_use["note"]))
    for step in tool_use.get("steps") or []:
        extra = ""
        if "rows" in step:
            extra = f" ({step['rows']} row(s), {step.get('micros', 0):.0f} µs)"
        observation = str(step.get("observation", "")).strip().replace("\n", " ")
        observation = observation[:100] + ("..." if len(observation) > 100 else "")
        lines.append(f"{step.get('step')}. {step.get('action')} -> {step.get('state')}{extra}: {observation}")
    notebook = tool_use.get("notebook") or []
    lines.append("notebook: " + ("; ".join(f"[{e['index']}] {e['description']}" for e in notebook) or "empty"))
    return "\n".join(lines)


def usage_text(u: Usage) -> str:
    text = (
        f"{u.calls} call(s) ({u.cached_calls} cache hit(s), {u.failed_calls} failed), "
        f"{u.input_tokens} tokens in, {u.output_tokens} out, ${u.cost_usd:.4f}"
    )
    if u.cached_calls:
        text += f" (cache hits would have cost ${u.cached_cost_usd:.4f})"
    return text


def build_story(run: RunData, problem_id: str, *, show_prompt: bool = False, show_reply: bool = False) -> Story:
    rec = find_record(run, problem_id)
    story = Story(run, rec)
    add = story.blocks.append
    n_it = len(rec.iterations)
    add(Block("heading", f"Problem {rec.problem_id}  ({run.benchmark_name}/{run.split}, run {run.name})"))
    summary = [
        f"outcome: {rec.outcome.value} after {n_it} iteration(s) (stop reason: {rec.stop_reason})",
        f"best iteration: {rec.best_iteration if rec.best_iteration is not None else '-'}",
        f"model: {run.model}; critics: {', '.join(run.critics) or '-'}; critic source: {run.critic_source}",
        f"usage: {usage_text(rec.usage)}; {rec.seconds:.1f} s",
    ]
    if rec.explanation:
        summary.append(f"explanation: {rec.explanation}")
    if rec.error:
        summary.append(f"error: {rec.error}")
    level = rec.metadata.get("level")
    if level is not None:
        summary.append(f"level: {level}")
    add(Block("text", "\n".join(summary)))
    prev_states: dict[str, str] = {}
    prev_plan: PlanJSON = None
    prev_plan_at: int | None = None
    for pos, it in enumerate(rec.iterations):
        label = it.index
        add(Block("heading", f"Iteration {label}"))
        now = states(it)
        total = len(it.verdicts)
        lines = []
        if iteration_errored(it):
            lines.append(
                "no plan: the iteration errored before the critics ran" + (f" ({rec.error})" if rec.error else "")
            )
        elif it.plan is None:
            lines.append("no plan" + (f": {it.format_error}" if it.format_error else ""))
        else:
            lines.append(
                f"plan {it.plan_sha256 or ''}".rstrip()
                + (f" (same plan as iteration {it.repeat_of})" if it.repeat_of is not None else "")
            )
            if it.format_error:
                lines.append(f"format error: {it.format_error}")
        lines.append(f"critics accepting: {it.passed_count}/{total}" + (" (certified)" if it.all_accept else ""))
        if best_iteration_at(rec, pos + 1) == pos and it.plan is not None:
            lines.append("best plan so far")
        lines.append("usage: " + usage_text(it.usage))
        if it.timings:
            lines.append("timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in it.timings.items()))
        add(Block("text", "\n".join(lines)))
        add(
            Block(
                "text", "  ".join(f"{name}={state}" for name, state in now.items()) or "(no verdicts)", title="critics"
            )
        )
        if pos == 0:
            failing_now = [n for n, s in now.items() if s in ("FAIL", "error")]
            add(Block("text", ", ".join(failing_now) or "none", title="failing"))
        else:
            changed = flips(prev_states, now)
            text = "\n".join(f"{n}: {old} -> {new}" for n, old, new in changed) or "no critic changed state"
            add(Block("text", text, title=f"flips since iteration {rec.iterations[pos - 1].index}"))
        feedback = [
            f"- {v.critic}: {v.feedback}"
            + (f" (hint: {v.hint})" if v.hint else "")
            + (f" [error: {v.error}]" if v.error else "")
            for v in it.verdicts
            if not v.accepts
        ]
        if feedback:
            add(Block("verbatim", "\n".join(feedback), title="feedback of failing critics"))
        if it.tool_use is not None:
            add(Block("verbatim", tool_use_text(it.tool_use), title="tool use"))
        if show_prompt:
            text = "\n\n".join(f"[{m.role}]\n{m.content}" for m in it.prompt) or "(prompt not recorded)"
            add(Block("verbatim", text, title="prompt sent at this iteration"))
        if show_reply:
            add(Block("verbatim", it.raw_reply if it.raw_reply is not None else "(no reply)", title="raw reply"))
        if it.plan is not None:
            if prev_plan is None:
                add(Block("json", plan_text(it.plan), title="plan (first plan of this problem)"))
            elif it.plan == prev_plan:
                add(Block("text", f"identical to the plan of iteration {prev_plan_at}", title="plan diff"))
            else:
                diff = plan_diff(prev_plan, it.plan, f"iteration {prev_plan_at}", f"iteration {label}")
                add(Block("diff", diff, title=f"plan diff against iteration {prev_plan_at}"))
            prev_plan, prev_plan_at = it.plan, label
        if it.backprompt is not None:
            sent = f"sent at iteration {pos + 1}" if pos + 1 < n_it else "not sent: the loop stopped here"
            add(Block("verbatim", it.backprompt, title=f"backprompt built from these verdicts ({sent})"))
        prev_states = now
    if not rec.iterations:
        add(Block("text", "no iterations recorded"))
    return story


def safe_story(story: Story) -> Story:
    """``story`` with every block's text and title escaped for a terminal (see :mod:`modulo.terminal`)."""
    blocks = [Block(b.kind, safe_text(b.text), safe_text(b.title)) for b in story.blocks]
    return Story(run=story.run, record=story.record, blocks=blocks)


def render_plain(story: Story) -> str:
    out: list[str] = []
    for block in safe_story(story).blocks:
        if block.kind == "heading":
            out += ["", f"=== {block.text} ==="]
        elif block.kind == "text" and block.title:
            if "\n" in block.text:
                out.append(f"{block.title}:\n  " + block.text.replace("\n", "\n  "))
            else:
                out.append(f"{block.title}: {block.text}")
        elif block.kind == "text":
            out.append(block.text)
        else:
            out.append(f"--- {block.title} ---" if block.title else "---")
            out.append(block.text)
            out.append("--- end ---")
    return "\n".join(out).lstrip("\n") + "\n"


def render_rich(story: Story, *, width: int | None = None) -> None:
    """Print the story with rich (panels, diff highlighting); model text escaped (see :mod:`modulo.terminal`)."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.rule import Rule
    from rich.syntax import Syntax
    from rich.text import Text

    console = Console(width=width)
    for block in safe_story(story).blocks:
        if block.kind == "heading":
            console.print(Rule(Text(block.text, style="bold")))
        elif block.kind == "text":
            text = Text()
            if block.title:
                text.append(f"{block.title}: ", style="bold")
            for i, line in enumerate(block.text.split("\n")):
                if i:
                    text.append("\n  " if block.title else "\n")
                text.append(line, style=_line_style(line))
            console.print(text)
        elif block.kind == "diff":
            console.print(Panel(Syntax(block.text, "diff", word_wrap=True), title=block.title, title_align="left"))
        elif block.kind == "json":
            console.print(Panel(Syntax(block.text, "json", word_wrap=True), title=block.title, title_align="left"))
        else:
            console.print(Panel(Text(block.text), title=block.title, title_align="left"))


def _line_style(line: str) -> str:
    if "-> FAIL" in line or "-> error" in line:
        return "red"
    if "-> pass" in line:
        return "green"
    return ""
