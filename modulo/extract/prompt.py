"""The messages of an extraction: the task for one constraint, and the gate's feedback on a candidate."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from ..benchmark import Benchmark, ConstraintInfo, GateCase
from ..types import Message
from .confine import ALLOWED_MODULES, refusal
from .gate import PartResult
from .runtime import FUNCTION

SYSTEM = (
    "You write critics for an LLM-Modulo planner: small, exact Python functions that decide whether a "
    "plan satisfies one constraint of a planning problem. A critic that accepts a plan breaking the "
    "constraint, or rejects a plan that keeps it, is wrong."
)

SHAPE = f'''def {FUNCTION}(problem: dict, plan) -> tuple[bool, str]:
    """(True, "") when the plan satisfies the constraint, else (False, why: quote the plan and the requirement)."""'''


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def task_messages(
    bench: Benchmark, info: ConstraintInfo, examples: list[GateCase], example_view: dict[str, Any]
) -> list[Message]:
    """The first request for ``info``: the constraint, the data shapes, a few labelled plans, the function's shape."""
    schema = bench.plan_json_schema()
    lines = [
        f"Benchmark: {bench.name}. Constraint: {info.name}: {info.description}.",
        "",
        info.notes,
        "",
        f"Write one Python function with exactly this shape:\n\n{SHAPE}\n",
        "`problem` is JSON data (dicts, lists, strings, numbers), for example:",
        _json(example_view),
        "",
        "`plan` follows this JSON Schema:" if schema else "`plan` is JSON data.",
        _json(schema) if schema else "",
        "",
        "Plans reach the function only after they passed the benchmark's format check. When the problem has no "
        'requirement of this kind, return (True, ""). The function may import only '
        f"{', '.join(sorted(m for m in ALLOWED_MODULES if '.' not in m))} and use only its arguments (no files, "
        "no dunder attributes, no introspection): it runs in a sandbox without network, processes, "
        "environment or file writes, under a time limit.",
        "",
        "Labelled plans for the example problem (the oracle's verdict on this constraint):",
    ]
    for case in examples:
        verdict = "satisfies the constraint" if case.valid else f"violates it ({case.oracle})"
        lines.append(f"- {_json(case.plan)}: {verdict}")
    lines += ["", "Answer with the function (and any helpers it needs) in one ```python block."]
    text = "\n".join(line for line in lines if line is not None)
    return [Message(role="system", content=SYSTEM), Message(role="user", content=text)]


def feedback_message(training: PartResult, reason: str) -> Message:
    """What the gate found on the *training* part: its confusion matrix and counterexamples (never the
    held-out part's)."""
    c = training.confusion
    lines = [
        f"Your function was tested on {training.checked} labelled plans and not admitted: {reason}.",
        f"Valid plans: {c.valid - c.false_rejects} accepted, {c.false_rejects} wrongly rejected. "
        f"Invalid plans: {c.caught} rejected, {c.missed} wrongly accepted.",
    ]
    if training.error is not None:
        e = training.error
        lines += [
            "",
            f"It failed on this plan: {e['error']}",
            f"problem: {_json(e.get('problem'))}",
            f"plan: {_json(e['plan'])}",
            f"oracle: {'valid' if e['oracle_valid'] else 'invalid'} ({e['oracle']})",
        ]
    for i, ex in enumerate(training.counterexamples, 1):
        said = f"rejected it: {ex['critic_feedback']!r}" if ex["critic_rejected"] else "accepted it"
        lines += [
            "",
            f"Counterexample {i}:",
            f"problem: {_json(ex.get('problem'))}",
            f"plan: {_json(ex['plan'])}",
            f"your function {said}",
            f"oracle: {'valid' if ex['oracle_valid'] else 'invalid'} ({ex['oracle']})",
        ]
    lines += ["", "Write the corrected function, in the same shape, in one ```python block."]
    return Message(role="user", content="\n".join(lines))


_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def code_of(reply: str) -> tuple[str, str | None]:
    """(the code of a reply, why it is unusable or None). The first fenced block that defines ``check``
    (else the whole reply); it must parse and define ``check(problem, plan)``. Only parsed, never run."""
    blocks = _FENCE.findall(reply or "")
    code = next((b for b in blocks if f"def {FUNCTION}" in b), blocks[0] if blocks else reply or "")
    code = code.strip() + "\n"
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return code, f"the code does not parse: {exc.msg} (line {exc.lineno})"
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION]
    if not fns:
        return code, f"the code defines no top-level function {FUNCTION}(problem, plan)"
    if len(fns[-1].args.args) < 2:
        return code, f"{FUNCTION} must take two arguments (problem, plan)"
    return code, refusal(code)
