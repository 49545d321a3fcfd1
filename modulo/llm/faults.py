"""Turning provider failures into modulo's LLM errors, and keeping API keys out of their text.

Every HTTP backend maps its SDK's exceptions through :func:`error_for_status` and
:func:`error_for_transport`, so the retry layer sees the same classes whatever the provider:
429 -> :class:`RateLimitError` (with Retry-After), 408/409/5xx/529 -> :class:`TransientLLMError`,
a context-window 400 -> :class:`ContextLengthError`, any other 4xx -> :class:`PermanentLLMError`.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ContextLengthError, LLMError, PermanentLLMError, RateLimitError, TransientLLMError
from ..redact import REDACTED
from ..redact import redact as redact_text
from ..types import Usage

#: text fragments that providers use when a prompt is longer than the context window
_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "exceeds the context",
)

__all__ = ["REDACTED", "redact"]


class EmptyReplyError(TransientLLMError):
    """The model answered with no text at all. Worth another try; the tokens it billed are kept."""

    fault = "empty_reply"

    def __init__(self, message: str, *, usage: Usage | None = None, model: str = "") -> None:
        super().__init__(message)
        self.usage = usage
        self.model = model


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with ``secrets`` and every secret known to the process (:mod:`modulo.redact`), in any
    form (raw, URL-encoded, JSON-escaped, base64), replaced by a marker."""
    return redact_text(text, secrets)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date); None if absent."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def error_for_status(
    status: int,
    message: str,
    *,
    provider: str,
    headers: Mapping[str, str] | None = None,
    code: str | None = None,
) -> LLMError:
    """The modulo error for an HTTP error status. ``message`` must already be redacted."""
    text = f"{provider} returned HTTP {status}: {message}"
    lowered = f"{code or ''} {message}".lower()
    if status == 429:
        if code == "insufficient_quota" or "insufficient_quota" in lowered:
            return PermanentLLMError(text + " (quota exhausted; retrying will not help)")
        return RateLimitError(text, retry_after=parse_retry_after(headers))
    if status == 408:
        return TransientLLMError(text, fault="timeout", retry_after=parse_retry_after(headers))
    if status == 529:
        return TransientLLMError(text, fault="overloaded", retry_after=parse_retry_after(headers))
    if status >= 500 or status == 409:
        return TransientLLMError(text, fault="server_error", retry_after=parse_retry_after(headers))
    if status in (400, 413) and any(marker in lowered for marker in _CONTEXT_MARKERS):
        return ContextLengthError(text)
    error = PermanentLLMError(text)
    if status in (401, 403):
        error.fault = "auth"
    elif status == 404:
        error.fault = "not_found"
    else:
        error.fault = "bad_request"
    return error


def error_for_transport(kind: str, message: str, *, provider: str) -> TransientLLMError:
    """A dropped connection (``kind="connection"``) or a timeout (``kind="timeout"``)."""
    what = "timed out" if kind == "timeout" else "connection failed"
    return TransientLLMError(f"{provider} request {what}: {message}", fault=kind)


def body_details(body: object, fallback: str) -> tuple[str, str | None]:
    """The (message, code) of a provider's JSON error body (OpenAI and Anthropic shapes)."""
    inner: object = body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        inner = body["error"]
    if isinstance(inner, dict):
        message = inner.get("message")
        code = inner.get("code") or inner.get("type")
        return (str(message) if message else fallback), (str(code) if code else None)
    if isinstance(inner, str) and inner.strip():
        return inner.strip(), None
    return fallback, None


def unreadable_response(server: str, detail: str) -> TransientLLMError:
    """A reply the SDK could not read as the provider's JSON (a proxy's error page, a body cut off): worth
    another try. ``detail`` must already be redacted."""
    return TransientLLMError(f"{server} sent an unreadable response: {detail}", fault="bad_response")


def unreadable_body(
    server: str, exc: Exception | None, body: object, secrets: Iterable[str | None]
) -> TransientLLMError:
    """:func:`unreadable_response` for a 200 whose body the SDK could not parse (``exc``: its JSON error) or
    handed back as text instead of a response object (``body``)."""
    if exc is not None:
        return unreadable_response(server, f"not JSON ({redact(str(exc), secrets)})")
    shown = redact(str(body)[:200], secrets)
    return unreadable_response(server, f"{type(body).__name__} instead of a response object: {shown!r}")


def tag_headers(tags: Mapping[str, str]) -> dict[str, str]:
    """Request tags as ``X-Modulo-<Tag>`` headers (``problem_id`` -> ``X-Modulo-Problem-Id``)."""
    headers: dict[str, str] = {}
    for key, value in tags.items():
        name = "X-Modulo-" + "-".join(part.capitalize() for part in key.replace("-", "_").split("_") if part)
        clean = "".join(ch for ch in str(value) if 32 <= ord(ch) < 127)
        headers[name] = clean[:200]
    return headers


def translate_sdk_error(
    exc: Exception, sdk: Any, *, provider: str, server: str, secrets: Iterable[str | None]
) -> LLMError:
    """An official SDK's exception (``openai`` or ``anthropic``, whose error classes share names) as an
    :class:`LLMError`, with every secret redacted from the message."""
    if isinstance(exc, sdk.APITimeoutError):
        return error_for_transport("timeout", redact(str(exc), secrets), provider=provider)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = str(exc) + (f" ({type(cause).__name__}: {cause})" if cause is not None else "")
        return error_for_transport("connection", redact(detail, secrets), provider=provider)
    if isinstance(exc, sdk.APIStatusError):
        message, code = body_details(exc.body, str(exc))
        return error_for_status(
            exc.status_code,
            redact(message, secrets),
            provider=provider,
            headers=dict(exc.response.headers),
            code=code,
        )
    if isinstance(exc, sdk.APIResponseValidationError):
        return unreadable_response(server, redact(str(exc), secrets))
    return PermanentLLMError(f"{provider} client error: {type(exc).__name__}: {redact(str(exc), secrets)}")
