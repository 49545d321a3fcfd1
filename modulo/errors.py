"""The exception tree of modulo.

Every error that modulo raises on purpose derives from :class:`ModuloError`::

    ModuloError
    ├── ConfigError                 a setting is wrong; raised before any LLM call
    ├── RegistryError
    │   ├── UnknownComponentError   a name that no registry knows (with a did-you-mean)
    │   ├── PluginLoadError         a requested plugin failed to import or is not what it claims
    │   └── ArgumentError           a component was given an argument it does not take
    ├── DataError                   benchmark data missing or malformed
    ├── PlanFormatError             text could not be turned into a valid plan (becomes a format verdict)
    ├── CriticError                 a critic crashed (a rejection is a Verdict, never an exception)
    ├── PromptError                 a template is missing or does not render
    ├── LLMError                    talking to a model failed
    │   ├── TransientLLMError       worth retrying: 429, 5xx, timeouts, dropped connections
    │   │   └── RateLimitError      a 429, with the server's Retry-After when it sent one
    │   ├── PermanentLLMError       a 4xx that will not change on retry (bad request, auth)
    │   ├── ContextLengthError      the prompt does not fit the model's context window
    │   ├── ReplayMissError         a replay backend was asked for a request it never recorded
    │   └── CacheMissError          a read-only cache was asked for a request it does not hold
    └── RunError                    the run directory is unusable (for example, another config)

Budget exhaustion is not an exception: it is the ``exhausted`` outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .types import LLMCall


class ModuloError(Exception):
    """Base class of every error modulo raises on purpose."""


class ConfigError(ModuloError):
    """A configuration value is wrong. Raised while binding, before any LLM call."""


class UsageError(ConfigError):
    """A command's arguments are wrong (a benchmark command's parser raises it; the CLI prints it)."""


class RegistryError(ModuloError):
    """A component could not be found, loaded or bound."""


class UnknownComponentError(RegistryError, KeyError):
    """A registry was asked for a name it does not know."""

    def __init__(self, kind: str, name: str, known: list[str], suggestions: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = known
        self.suggestions = suggestions
        hint = f" Did you mean {' or '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        listing = ", ".join(known) if known else "(none registered)"
        super().__init__(f"unknown {kind} {name!r}.{hint} Known {kind}s: {listing}")

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class PluginLoadError(RegistryError):
    """A requested plugin could not be imported, or its object is not a valid component."""


class ArgumentError(RegistryError, ConfigError):
    """A component was given arguments it does not accept (or lacks required ones)."""


class DataError(ModuloError):
    """Benchmark data is missing, incomplete or malformed."""


class PlanFormatError(ModuloError):
    """Text could not be turned into a plan that satisfies the benchmark's schema."""


class CriticError(ModuloError):
    """A critic raised while checking a plan. A critic that *rejects* returns a Verdict instead."""

    def __init__(self, critic: str, cause: BaseException) -> None:
        self.critic = critic
        self.cause = cause
        super().__init__(f"critic {critic!r} crashed: {type(cause).__name__}: {cause}")


class PromptError(ModuloError):
    """A prompt template is missing or failed to render."""


class LLMError(ModuloError):
    """Talking to a language model failed."""

    #: short class label recorded in traces ("rate_limit", "server_error", "timeout", ...)
    fault: str = "llm_error"
    #: the failed call (faults, usage of failed attempts), attached by the client before raising
    call: LLMCall | None = None
    #: the calls the same turn made before the failed one, attached by a generator that makes several (a tool
    #: agent's steps, an episode's assistant, user and tool turns: :func:`modulo.generators.base.keep_calls`),
    #: so that the iteration records and counts what they spent; and what its tool use recorded so far
    earlier_calls: tuple[LLMCall, ...] = ()
    tool_use: dict[str, Any] | None = None


class TransientLLMError(LLMError):
    """A failure that may go away on retry: 5xx, timeouts, dropped connections."""

    fault = "transient"

    def __init__(self, message: str, *, fault: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        if fault is not None:
            self.fault = fault
        self.retry_after = retry_after


class RateLimitError(TransientLLMError):
    """HTTP 429. ``retry_after`` holds the server's Retry-After in seconds, when given."""

    fault = "rate_limit"


class PermanentLLMError(LLMError):
    """A 4xx (other than 429) or another failure that retrying will not fix."""

    fault = "permanent"


class ContextLengthError(PermanentLLMError):
    """The prompt is longer than the model's context window."""

    fault = "context_length"


class ReplayMissError(PermanentLLMError):
    """The replay backend has no recorded reply for this request."""

    fault = "replay_miss"


class CacheMissError(PermanentLLMError):
    """A read-only response cache does not hold this request."""

    fault = "cache_miss"


class RunError(ModuloError):
    """The run directory cannot be used (written by a different configuration, corrupt, ...)."""
