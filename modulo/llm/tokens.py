"""A rough token count for backends and fakes that have no tokenizer (about four characters a token)."""

from __future__ import annotations

from collections.abc import Iterable

from ..types import Message


def approx_tokens(text: str) -> int:
    """Roughly how many tokens ``text`` holds: ``ceil(len / 4)``, zero for empty text."""
    return (len(text) + 3) // 4  # ceil(len / 4) in integers


def approx_prompt_tokens(messages: Iterable[Message]) -> int:
    """The rough token count of a prompt: the sum over its messages' contents (:func:`approx_tokens` each)."""
    return sum([(len(m.content) + 3) // 4 for m in messages])
