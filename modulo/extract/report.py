"""Gate reports (JSON and Markdown) and the extraction's summary, redacted before they are written."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..redact import redact, redact_data
from .gate import PartResult
from .loop import ConstraintResult


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(redact(text), encoding="utf-8")
    return path


def write_json(path: Path, data: Any) -> Path:
    return write_text(path, json.dumps(redact_data(data), indent=1, ensure_ascii=False, default=str) + "\n")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _matrix(part: PartResult | None) -> list[str]:
    if part is None:
        return ["(not checked: the training part failed first)"]
    c = part.confusion
    lines = [
        f"{part.part}: {part.checked} of {part.cases} plans checked",
        "",
        "| oracle \\ critic | accepted | rejected |",
        "|---|---|---|",
        f"| valid ({c.valid}) | {c.valid - c.false_rejects} | **{c.false_rejects}** |",
        f"| invalid ({c.invalid}) | **{c.missed}** | {c.caught} |",
        "",
        f"recall {_rate(c.recall)}; false rejections {c.false_rejects}",
    ]
    if part.error is not None:
        e = part.error
        lines += ["", f"Failed on plan `{json.dumps(e['plan'])}` of {e['problem_id']}: {e['error']}"]
    return lines


def _problems(gate_set: dict[str, Any]) -> int:
    """The problems of a gate set: a benchmark may hold more than were asked for (problems without the
    constraint, problems added to break each kind of it)."""
    return sum(int(gate_set.get(part, {}).get("problems", 0)) for part in ("training", "held_out"))


def render_gate(result: ConstraintResult) -> str:
    """The gate report of one constraint in Markdown."""
    g = result.settings
    status = "ADMITTED" if result.admitted else "REJECTED"
    lines = [
        f"# Gate report: {result.critic} ({status})",
        "",
        f"Benchmark {result.benchmark}, constraint `{result.info.name}`: {result.info.description}.",
        f"Model: {result.model} (backend {result.backend}). Attempts: {len(result.attempts)} of {g.attempts}.",
        f"Decision: {result.reason}.",
        "",
        f"Gate: zero false rejections on valid plans and recall >= {g.min_recall:g} on invalid plans, on the "
        f"training part and on the held-out part ({g.held_out:g} of the problems, never shown to the model); "
        f"any crash, timeout ({g.timeout_s:g} s per plan) or sandbox refusal rejects. Gate set: "
        f"{result.gate_set.get('cases')} plans of {_problems(result.gate_set)} problems ({g.problems} asked for) "
        f"labelled by the benchmark's oracle (seed {g.seed}): training {result.gate_set.get('training')}, "
        f"held-out {result.gate_set.get('held_out')}.",
    ]
    for a in result.attempts:
        lines += ["", f"## Attempt {a.number}: {'admitted' if a.admitted else a.reason}", ""]
        call = a.call
        if call:
            served = "cached" if call.get("cached") else "fresh"
            lines.append(f"Model call: {call.get('model', '?')}, {served}, {call.get('seconds', 0)} s.")
            if call.get("error"):
                lines.append(f"Error: {call['error']}")
        if a.code:
            lines += ["", "```python", a.code.rstrip(), "```"]
        if a.unusable is None and a.code:
            lines += ["", *_matrix(a.training), "", *_matrix(a.held_out)]
        for part in (a.training, a.held_out):
            if part is None or not part.counterexamples:
                continue
            lines += ["", f"Counterexamples ({part.part}):"]
            for ex in part.counterexamples:
                said = f"rejected ({ex['critic_feedback'][:200]!r})" if ex["critic_rejected"] else "accepted"
                lines.append(
                    f"- {ex['problem_id']} ({ex['origin']}): plan `{json.dumps(ex['plan'])}`: the critic {said}; "
                    f"the oracle: {'valid' if ex['oracle_valid'] else 'invalid'} ({ex['oracle']})"
                )
        if a.feedback:
            lines += ["", "Feedback sent to the model:", "", "```text", a.feedback.rstrip(), "```"]
    lines += ["", "## Prompt", ""]
    for m in result.prompt:
        lines += [f"**{m.role}**", "", "```text", m.content.rstrip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def render_summary(benchmark: str, results: Sequence[ConstraintResult], package: Path | None, usage: Any) -> str:
    lines = [
        f"# Extracted critics: {benchmark}",
        "",
        "| constraint | critic | decision | attempts | training recall | held-out recall | false rejections |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        a = r.final
        tr = a.training.confusion if a and a.training else None
        ho = a.held_out.confusion if a and a.held_out else None
        fr = "-" if tr is None else str(tr.false_rejects + (ho.false_rejects if ho else 0))
        lines.append(
            f"| {r.info.name} | {r.critic} | {'admitted' if r.admitted else r.reason} | {len(r.attempts)} | "
            f"{_rate(tr.recall if tr else None)} | {_rate(ho.recall if ho else None)} | {fr} |"
        )
    lines += [
        "",
        f"Model calls: {usage.calls} ({usage.cached_calls} from the cache), {usage.input_tokens} input and "
        f"{usage.output_tokens} output tokens, ${usage.cost_usd:.4f}.",
        "",
        (
            f"Plugin package: {package} (install it with `pip install -e {package}`; its critics are untrusted "
            "and always run in the sandbox)."
            if package is not None
            else "No critic was admitted: no plugin package was written."
        ),
    ]
    return "\n".join(lines) + "\n"


def write_gate_report(result: ConstraintResult, folder: Path) -> tuple[Path, Path]:
    """``folder/<constraint>.json`` and ``.md``."""
    from .loop import identifier

    stem = identifier(result.info.name)
    return (
        write_json(folder / f"{stem}.json", result.to_json()),
        write_text(folder / f"{stem}.md", render_gate(result)),
    )
