"""Terminal safety: text from a model (or any record) is escaped before it reaches a terminal.

A reply may carry escape sequences that set the window title, clear the screen, move the cursor or
hide text; printed raw by ``modulo show --replies`` they would act on the user's terminal. Every
control character except newline and tab (C0, DEL, C1) and the Unicode bidirectional overrides is
shown as a visible escape (``\\x1b``, ``\\u202e``) instead.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """``text`` with every terminal control character shown as an escape (newlines and tabs kept)."""
    return _UNSAFE.sub(_escape, text)
