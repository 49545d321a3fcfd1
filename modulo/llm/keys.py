"""API keys: read from the environment, held in a wrapper that never prints them."""

from __future__ import annotations

import os
import re
import ssl
import threading
from collections.abc import Callable, Iterable
from typing import Any, ClassVar
from urllib.parse import urlparse

from ..errors import ConfigError
from ..redact import check_overrides, register, strip_userinfo
from .base import LLMRequest, LLMSettings
from .faults import tag_headers

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


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: what API keys of the common providers look like (OpenAI, Anthropic, Groq, xAI, Google)
_KEY_LIKE = re.compile(r"\b(?:sk|xai)-[A-Za-z0-9_-]{32,}|\bgsk_[A-Za-z0-9]{32,}|\bAIza[A-Za-z0-9_-]{30,}")
_SECRET_WORDS = ("api_key", "apikey", "secret", "password")
_WHERE = (
    "API keys are read from the environment only: put it in the provider's variable ($OPENAI_API_KEY, "
    "$ANTHROPIC_API_KEY) or name another variable with llm.api_key_env=VARIABLE; any other secret "
    "(a header, an extra_body field, a password) as KEY='${oc.env:VARIABLE}'"
)


def check_env_name(name: str) -> None:
    """A ConfigError when ``llm.api_key_env`` is not a variable name (it may be the key itself; never shown)."""
    if not _ENV_NAME.fullmatch(name):
        raise ConfigError(
            "llm.api_key_env must name an environment variable (letters, digits, underscores); the value given "
            f"is not one and is not shown here, as it may be the key itself. {_WHERE}"
        )


def reject_secret_overrides(overrides: Iterable[str]) -> None:
    """A ConfigError, naming the key but never the value, for a command-line override that holds a
    secret: a setting named like one, a value shaped like an API key, or a key given as llm.api_key_env.
    Checked before Hydra saves the overrides into the run directory."""
    overrides = list(overrides)
    for item in overrides:
        name, sep, value = item.lstrip("+~").partition("=")
        if not sep:
            continue
        last = name.rsplit(".", 1)[-1].lower()
        if last == "api_key_env":
            check_env_name(value.strip())
        elif any(word in last for word in _SECRET_WORDS) or _KEY_LIKE.search(value):
            raise ConfigError(f"the override of {name!r} holds what looks like a secret (not shown). {_WHERE}")
    check_overrides(overrides)  # headers, extra_body, credential-named settings, URL passwords


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
    check_env_name(env)
    value = os.environ.get(env, "").strip()
    if value:
        register(value)  # every writer redacts it from now on, in any form
        return Secret(value)
    if is_official(settings.base_url, official_hosts):
        where = settings.base_url or f"the {provider} API"
        raise ConfigError(
            f"no API key for {where}: set the environment variable {env}"
            + (" (or point llm.api_key_env at the variable that holds it)" if not settings.api_key_env else "")
            + ", or set llm.base_url to a compatible local server"
        )
    return Secret(DUMMY_KEY)


_TLS_CONTEXTS: dict[tuple[str | None, str | None], ssl.SSLContext] = {}
_TLS_LOCK = threading.Lock()


def sdk_tls_context() -> ssl.SSLContext:
    """The TLS context of the SDK clients' HTTP transport: the one httpx builds for each client by default
    (``httpcore2.default_ssl_context``: ``$SSL_CERT_FILE``/``$SSL_CERT_DIR``, else the system's CA
    files), built once per process and per value of those variables. Loading the CA certificates takes
    about 25 ms, which every SDK client paid again (a sweep's jobs, TravelBench's roles, the tests)."""
    import httpcore2

    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _TLS_LOCK:
        ctx = _TLS_CONTEXTS.get(key)
        if ctx is None:
            ctx = _TLS_CONTEXTS[key] = httpcore2.default_ssl_context()
        return ctx


class SDKBackend:
    """What the backends over an official SDK share: their settings and key (``<PROVIDER>_API_KEY`` by
    default), the request tags sent as headers (``tag_headers``), extra body fields and headers, the
    HTTP client (the SDK's defaults, with the process's TLS context), and a repr without credentials."""

    #: the provider's name ("OpenAI") and the hosts of its own API (where a key is required)
    provider: ClassVar[str]
    official_hosts: ClassVar[tuple[str, ...]]
    #: the SDK's HTTP client class with its own defaults (``openai.DefaultAsyncHttpxClient``)
    http_client_type: ClassVar[Callable[..., Any]]
    settings: LLMSettings

    def _sdk_options(
        self,
        settings: LLMSettings,
        tag_headers: bool,
        extra_body: dict[str, Any] | None,
        extra_headers: dict[str, str] | None,
    ) -> dict[str, Any]:
        """Keep the shared settings; the SDK client's keyword arguments (the SDK never retries: the client does)."""
        self.settings = settings
        self.tag_headers = tag_headers
        self.extra_body = dict(extra_body or {})
        self.extra_headers = dict(extra_headers or {})
        env, hosts = f"{self.provider.upper()}_API_KEY", self.official_hosts
        self._key = resolve_api_key(settings, default_env=env, provider=self.provider, official_hosts=hosts)
        return {
            "api_key": self._key.reveal(),
            "base_url": settings.base_url,
            "timeout": settings.timeout_s,
            "max_retries": 0,
            "http_client": self.http_client_type(timeout=settings.timeout_s, verify=sdk_tls_context()),
        }

    def extra_body_for(self, request: LLMRequest) -> dict[str, Any]:
        """The extra body fields sent with ``request`` (``extra_body``; a backend may add its own)."""
        return self.extra_body

    def send_options(self, request: LLMRequest) -> dict[str, Any]:
        """The SDK call's ``extra_headers`` (``extra_headers``, and the request's tags when ``tag_headers``)
        and ``extra_body``, each None when empty."""
        headers = dict(self.extra_headers)
        if self.tag_headers:
            headers.update(tag_headers(request.tags))
        return {"extra_headers": headers or None, "extra_body": self.extra_body_for(request) or None}

    def __repr__(self) -> str:
        url = strip_userinfo(self.settings.base_url) if self.settings.base_url else None
        return f"{type(self).__name__}(model={self.settings.model!r}, base_url={url!r})"
