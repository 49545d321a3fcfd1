"""LLM backends behind one async protocol. See :mod:`modulo.llm.base`."""

from .base import LLM, LLMRequest, LLMResponse, LLMSettings

__all__ = ["LLM", "LLMRequest", "LLMResponse", "LLMSettings"]
