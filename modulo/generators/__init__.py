"""Generators: what proposes a plan at each iteration.

``base`` holds the interface (:class:`Generator`, :class:`GenerationContext`, :class:`Generation`, and
:func:`keep_calls` for a generator that makes several calls a turn);
``llm`` the LLM generator registered as ``llm``. Other generators live with what they need:
``modulo.tool_agent`` (an agent calling the benchmark's tools) and the benchmarks' search baselines.
"""

from __future__ import annotations

from .base import Generation, GenerationContext, Generator, keep_calls
from .llm import PROMPT_ROLES, LLMGenerator

__all__ = ["PROMPT_ROLES", "Generation", "GenerationContext", "Generator", "LLMGenerator", "keep_calls"]
