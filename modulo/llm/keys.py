"""API keys: read from the environment, held in a wrapper that never prints them."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from ..errors import ConfigError
from .base import LLMSettings

#: sent to servers that need no key (local vLLM, llama.cpp, Ollama, the fake provider)
DUMMY_KEY = "not-needed"


class Secret:
    """A string that shows as ``'***'`` in repr, str and format; ``.reveal()`` gives it back."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __reduce__(self) -> tuple[object, ...]:  # never pickled into a trace or a worker's payload
        raise TypeError("a Secret cannot be pickled")


def is_official(base_url: str | None, official_hosts: tuple[str, ...]) -> bool:
    """True when ``base_url`` is unset or points at one of the provider's own hosts."""
    if not base_url:
        return True
    host = (urlparse(base_url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in official_hosts)


def resolve_api_key(
    settings: LLMSettings, *, default_env: str, provider: str, official_hosts: tuple[str, ...]
) -> Secret:
    """The key named by ``settings.api_key_env`` (else ``default_env``).

    A missing key is a :class:`ConfigError` for the provider's own API; a custom ``base_url``
    (a local server, a proxy, the fake provider) gets a dummy key instead.
    """
    env = settings.api_key_env or default_env
    value = os.environ.get(env, "").strip()
    if value:
        return Secret(value)
    if is_official(settings.base_url, official_hosts):
        where = settings.base_url or f"the {provider} API"
        raise ConfigError(
            f"no API key for {where}: set the environment variable {env}"
            + (" (or point llm.api_key_env at the variable that holds it)" if not settings.api_key_env else "")
            + ", or set llm.base_url to a compatible local server"
        )
    return Secret(DUMMY_KEY)
