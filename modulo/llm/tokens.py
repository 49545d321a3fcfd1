"""A rough token count for backends and fakes that have no tokenizer (about four characters a token)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..types import Message


def approx_tokens(text: str) -> int:
    """Roughly how many tokens ``text`` holds: ``ceil(len / 4)``, zero for empty text."""
    return math.ceil(len(text) / 4) if text else 0


def approx_prompt_tokens(messages: Iterable[Message]) -> int:
    """The rough token count of a prompt: the sum over its messages' contents."""
    return sum(approx_tokens(m.content) for m in messages)
