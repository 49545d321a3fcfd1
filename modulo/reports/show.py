"""``modulo show RUN_DIR PROBLEM_ID``: the story of one problem, iteration by iteration (turn by turn).

A turn that asked the user a question shows the question and the answer (and whether the user called
it unnecessary); an abstention shows its reason and what the benchmark could check of it; updates
applied after a turn are listed with what changed, and the plan's verdicts against the updated problem.

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
from ..types import Abstention, IterationRecord, PlanJSON, ProblemResult, ProblemUpdate, Usage, Verdict
from .budget import best_iteration_at
from .load import RunData
from .tables import iteration_errored

BlockKind = Literal["heading", "text", "verbatim", "diff", "json"]


@dataclass
class Story:
    """What ``modulo show`` prints of one problem: its run, its record, and the blocks made of them."""

    run: RunData
    record: ProblemResult
    blocks: list[Block] = field(default_factory=list)


@dataclass(frozen=True)
class Block:
    kind: BlockKind
    text: str
    title: str = ""


def find_record(run: RunData, problem_id: str) -> ProblemResult:
    """The record of ``problem_id`` (RunError listing close ids when there is none)."""
    rec = run.records.get(problem_id)
    if rec is not None:
        return rec
    known = list(dict.fromkeys([*run.records, *run.problem_ids]))
    close = difflib.get_close_matches(problem_id, [k for k in known if k != problem_id], n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    if problem_id in run.problem_ids:
        # a line the reader skipped may be this problem's record: not finished is then not known
        unread = [n for n in run.notes if n.startswith("records.jsonl: skipped")]  # load.read_records' notes
        if unread:
            raise RunError(
                f"{run.path}: problem {problem_id!r} is part of the run but has no readable record: it has not "
                f"finished, or its record is on a line that could not be read ({'; '.join(unread)})"
            )
        raise RunError(f"{run.path}: problem {problem_id!r} is part of the run but has not finished")
    sample = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
    raise RunError(f"{run.path}: no problem {problem_id!r} in this run.{hint} Its ids: {sample or 'none'}")


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
        f"outcome: {rec.outcome.value} after {n_it} {'turn' if rec.questions or rec.abstention else 'iteration'}(s) "
        f"(stop reason: {rec.stop_reason})",
        f"best iteration: {rec.best_iteration if rec.best_iteration is not None else '-'}",
        f"model: {run.model}; critics: {', '.join(run.critics) or '-'}; critic source: {run.critic_source}",
        f"usage: {usage_text(rec.usage)}; {rec.seconds:.1f} s",
    ]
    unpriced = [str(m) for m in (run.summary or {}).get("unpriced_models") or []]
    if unpriced:  # its calls counted $0: the dollars above are a lower bound
        summary.append(f"cost: at least the dollars above: no price known for {', '.join(unpriced)}")
    if rec.user is not None or rec.questions or rec.updates or rec.pending_updates:
        summary.append(
            f"user: {rec.user or 'none'}; turns {rec.turns}, questions {rec.questions} "
            f"({rec.unnecessary_questions} unnecessary), updates applied {len(rec.updates)}"
            + (f", updates never reached {len(rec.pending_updates)}" if rec.pending_updates else "")
        )
    if rec.solvable is not None:
        summary.append(f"solvable (ground truth): {'yes' if rec.solvable else 'no'}")
    if rec.abstention is not None:
        summary.append(f"abstained at turn {rec.abstention.iteration}: {abstention_text(rec.abstention)}")
    if rec.explanation:
        summary.append(f"explanation: {rec.explanation}")
    if rec.error:
        summary.append(f"error: {rec.error}")
    level = rec.metadata.get("level")
    if level is not None:
        summary.append(f"level: {level}")
    migrated = run.info.migration_note()
    if migrated is not None:
        summary.append(f"note: {migrated}")
    add(Block("text", "\n".join(summary)))
    prev_states: dict[str, str] = {}
    prev_plan: PlanJSON = None
    prev_plan_at: int | None = None
    prev_turn: int | None = None  # the last plan iteration (question turns have no critic states)
    for pos, it in enumerate(rec.iterations):
        label = it.index
        if it.act != "plan":
            add(Block("heading", f"Turn {label}: {'question' if it.act == 'question' else 'abstention'}"))
            add_dialogue_turn(add, it, show_prompt=show_prompt)
            continue
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
        if prev_turn is None:
            failing_now = [n for n, s in now.items() if s in ("FAIL", "error")]
            add(Block("text", ", ".join(failing_now) or "none", title="failing"))
        else:
            changed = flips(prev_states, now)
            text = "\n".join(f"{n}: {old} -> {new}" for n, old, new in changed) or "no critic changed state"
            add(Block("text", text, title=f"flips since iteration {prev_turn}"))
        prev_turn = label
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
        add_updates(add, it)
        if it.backprompt is not None:
            sent = f"sent at iteration {pos + 1}" if pos + 1 < n_it else "not sent: the loop stopped here"
            add(Block("verbatim", it.backprompt, title=f"backprompt built from these verdicts ({sent})"))
        prev_states = now
    if not rec.iterations:
        add(Block("text", "no iterations recorded"))
    return story


def abstention_text(abstention: Abstention) -> str:
    checked = {True: "verified by the benchmark", False: "refuted by the benchmark", None: "not checkable"}
    detail = f" ({abstention.detail})" if abstention.detail else ""
    return f"{abstention.reason!r}; reason {checked[abstention.verified]}{detail}"


def update_lines(updates: list[ProblemUpdate]) -> list[str]:
    """One line per update: where it came from, when it was due, what it changed."""
    lines = []
    for u in updates:
        changed = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)[:80]}" for k, v in u.add.items())
        parts = [f"constraints {changed}" if changed else "", "new query" if u.query is not None else ""]
        parts.append("new context" if u.context is not None else "")
        what = "; ".join(p for p in parts if p) or "text only"
        due = f", due after turn {u.after}" if u.after is not None else ""
        lines.append(f"- [{u.source}{due}] {u.text or '(no text)'} ({what})")
    return lines


def add_updates(add: Any, it: IterationRecord) -> None:
    """The updates applied after ``it`` and the verdicts of its plan against the updated problem."""
    if not it.updates:
        return
    add(Block("verbatim", "\n".join(update_lines(it.updates)), title=f"updates applied after turn {it.index}"))
    if it.rejudged is not None:
        judged = it.rejudged
        verdict = "still certified" if judged.accepts else "no longer certified"
        failing = [f"{v.critic}: {v.feedback}" for v in judged.verdicts if not v.accepts]
        text = f"{judged.passed_count}/{len(judged.verdicts)} critics accept: {verdict}"
        add(Block("text", "\n".join([text, *failing]), title="this plan against the updated problem"))


def add_dialogue_turn(add: Any, it: IterationRecord, *, show_prompt: bool) -> None:
    """A question turn (the question, the answer, who answered) or an abstention turn (the reason)."""
    lines = []
    if it.act == "question":
        lines.append(f"question: {it.question}")
        if it.answer is not None:
            mark = " (the user says this was already in the request)" if it.answer.unnecessary else ""
            lines.append(f"answer ({it.answer.user or 'user'}){mark}: {it.answer.text}")
            if it.answer.revealed:
                lines.append(f"revealed: {', '.join(it.answer.revealed)}")
    else:
        lines.append(f"declined: {it.abstain_reason}")
    lines.append("usage: " + usage_text(it.usage))
    add(Block("text", "\n".join(lines)))
    if show_prompt:
        text = "\n\n".join(f"[{m.role}]\n{m.content}" for m in it.prompt) or "(prompt not recorded)"
        add(Block("verbatim", text, title="prompt sent at this turn"))
    add_updates(add, it)


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
