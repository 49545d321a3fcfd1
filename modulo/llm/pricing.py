"""Dollar prices of common models, in USD per million tokens, and the cost of a call.

The built-in table covers common OpenAI and Anthropic models at their published list prices
(standard tier, no batch discount) as of late 2025, with the provider's prompt-cache prices: the input
tokens the provider reports as read from its prompt cache (OpenAI's ``cached_tokens``, Anthropic's
``cache_read_input_tokens``) cost the cached-input price, those it reports as written to it (Anthropic's
``cache_creation_input_tokens``) the cache-write price. Prices change: set
``llm.price_input_per_mtok`` / ``llm.price_output_per_mtok`` to override them for a run. A model the
table does not know costs nothing and is reported once through :func:`lookup_price`'s caller.

Model names match exactly, or as a known name followed by a snapshot's date or ``-latest``, so dated
snapshots such as ``gpt-4o-2024-08-06``, ``gpt-3.5-turbo-0125`` or ``claude-3-5-sonnet-20241022`` find
their family's price. Any other suffix names another model (``o1-pro``, ``gpt-4-32k``, ``gpt-5-pro``,
often priced many times its family) and has no price.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .base import LLMSettings


@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens; input read from or written to the provider's prompt cache
    at their own prices (None: the input price)."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0, written_tokens: int = 0) -> float:
        """The dollars of a call; ``cached_tokens`` and ``written_tokens`` are parts of ``input_tokens``."""
        usd = input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok
        if cached_tokens > 0 and self.cached_input_per_mtok is not None:
            cached_tokens = min(cached_tokens, input_tokens)
            usd += cached_tokens * (self.cached_input_per_mtok - self.input_per_mtok)
            input_tokens -= cached_tokens
        if written_tokens > 0 and self.cache_write_per_mtok is not None:
            usd += min(written_tokens, input_tokens) * (self.cache_write_per_mtok - self.input_per_mtok)
        return usd / 1_000_000


def _claude(input_per_mtok: float, output_per_mtok: float) -> Price:
    """Anthropic's price: a prompt-cache read costs a tenth of the input price, a (5-minute) write 1.25 times."""
    return Price(input_per_mtok, output_per_mtok, input_per_mtok * 0.1, input_per_mtok * 1.25)


#: list prices, USD per million tokens (input, output, cached input: OpenAI's models with prompt caching)
PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.0, 8.0, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.0, 1.25),
    "gpt-4o-2024-05-13": Price(5.0, 15.0),  # the first snapshot, still served at its own price
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4-turbo": Price(10.0, 30.0),
    "gpt-4": Price(30.0, 60.0),
    "gpt-3.5-turbo": Price(0.50, 1.50),
    "o1": Price(15.0, 60.0, 7.50),
    "o1-mini": Price(1.10, 4.40, 0.55),
    "o3": Price(2.0, 8.0, 0.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Anthropic
    "claude-opus-4-5": _claude(5.0, 25.0),
    "claude-opus-4-1": _claude(15.0, 75.0),
    "claude-opus-4": _claude(15.0, 75.0),
    "claude-sonnet-4-5": _claude(3.0, 15.0),
    "claude-sonnet-4": _claude(3.0, 15.0),
    "claude-haiku-4-5": _claude(1.0, 5.0),
    "claude-3-7-sonnet": _claude(3.0, 15.0),
    "claude-3-5-sonnet": _claude(3.0, 15.0),
    "claude-3-5-haiku": _claude(0.80, 4.0),
    "claude-3-opus": _claude(15.0, 75.0),
    "claude-3-sonnet": _claude(3.0, 15.0),
    "claude-3-haiku": _claude(0.25, 1.25),
}


#: what follows a priced name in a snapshot of that very model: a date (MMDD, YYYYMMDD, YYYY-MM-DD) or latest
_SNAPSHOT = re.compile(r"-(?:\d{4}|\d{8}|\d{4}-\d{2}-\d{2}|latest)")


def lookup_price(
    model: str, settings: LLMSettings | None = None, table: dict[str, Price] | None = None
) -> Price | None:
    """The price of ``model``: the settings' override, else the table (exact, then a snapshot of a known
    name), else None.

    An override of only one side keeps the table's other side (or zero when the table lacks the model); an
    input price given charges prompt-cache tokens at that price too (the table's discount is for its price).
    """
    table = PRICES if table is None else table
    found = table.get(model)
    if found is None:
        prefixes = [name for name in table if model.startswith(name) and _SNAPSHOT.fullmatch(model, len(name))]
        if prefixes:
            found = table[max(prefixes, key=len)]
    if settings is not None and (
        settings.price_input_per_mtok is not None or settings.price_output_per_mtok is not None
    ):
        base = found or Price(0.0, 0.0)
        output = settings.price_output_per_mtok if settings.price_output_per_mtok is not None else base.output_per_mtok
        if settings.price_input_per_mtok is None:
            return replace(base, output_per_mtok=output)
        return Price(settings.price_input_per_mtok, output)
    return found
