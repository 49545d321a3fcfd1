"""Small formatting helpers: Markdown tables and numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table. ``align`` per column: "l", "r" or "c"."""
    marks = {"l": ":---", "r": "---:", "c": ":---:"}
    align = list(align) if align is not None else ["l"] * len(headers)
    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join(marks.get(a, "---") for a in align) + "|",
    ]
    lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)
    return "\n".join(lines)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The same table as aligned plain text (for the terminal)."""
    cells = [[str(h) for h in headers], *[["" if v is None else str(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = ["  ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out.extend("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells[1:])
    return "\n".join(out)


def pct(value: float, digits: int = 1) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{100 * value:.{digits}f}"


def num(value: float, digits: int = 2) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def pvalue(p: float) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text).strip("_") or "x"
