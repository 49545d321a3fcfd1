"""Secrets: one redaction layer between configuration and every writer.

Three rules, applied in this order:

1. **Secrets are never written in the configuration.** A setting under ``headers``, ``extra_headers``,
   ``default_headers``, ``extra_query`` or ``extra_body``, or named like a credential (a name part
   ``key``, ``token``, ``secret``, ``password``, ``auth``, ``credential``, ``cookie``, ...), is refused
   when its value is a literal string; it must be read from the environment by name, with OmegaConf's
   resolver: ``'llm.args.extra_headers.Authorization="Bearer ${oc.env:HF_TOKEN}"'``. A URL's password
   likewise (``llm.base_url='http://user:${oc.env:PROXY_PASSWORD}@host/v1'``). :func:`check_overrides`
   checks the command line before Hydra saves anything; :func:`check_config` checks the composed
   (unresolved) configuration, so a literal in a config file is refused as well.
2. **Every secret value known to the process is registered** (:func:`register`): the API key read from
   the environment, each resolved value at a secret-bearing path, each URL password. Registration also
   covers the pieces a server may echo: the token of ``Bearer TOKEN`` and the password of
   ``Basic base64(user:password)``.
3. **Every writer redacts** (:func:`redact`, :func:`redact_data`): each registered value is replaced in
   its raw, URL-encoded (``%20`` and ``+`` styles), JSON-escaped and base64 forms; base64 at all three
   byte alignments, so ``base64("user:" + secret)`` and any other base64 text that embeds it is caught
   too. Writers: the run's config.yaml and run.json (:func:`safe_config` also drops URL userinfo),
   records.jsonl, the response cache, log records (a log record factory, installed by
   :func:`register`), and the console (:class:`RedactingStream`). Replies are scrubbed by the LLM
   client before they are cached, recorded or sent back in a backprompt.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any, TextIO
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

from .errors import ConfigError

REDACTED = "[redacted]"

#: config nodes whose every value is sent to a server as-is (headers, extra request fields)
SECRET_CONTAINERS = frozenset({"headers", "extra_headers", "default_headers", "extra_query", "extra_body"})
#: name parts (split on ``_``, ``-``, ``.``) that mark a credential
CREDENTIAL_PARTS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "cookie",
        "signature",
        "bearer",
    }
)
ENV_REFERENCE = "${oc.env:"
#: the shortest secret worth redacting (shorter values would blank out ordinary words)
MIN_SECRET = 6

_WHERE = (
    "secrets are read from the environment by name, never written in the configuration: "
    "KEY='${oc.env:VARIABLE}' (in a header: 'KEY=\"Bearer ${oc.env:VARIABLE}\"'; in a URL: "
    "http://user:${oc.env:VARIABLE}@host); API keys: $OPENAI_API_KEY, $ANTHROPIC_API_KEY or llm.api_key_env"
)


def is_credential_name(name: str) -> bool:
    """True for ``api_key``, ``X-Api-Token``, ``password``, ``Authorization`` and the like (never for
    ``api_key_env``, which names a variable, nor ``max_tokens``)."""
    parts = [p for p in re.split(r"[-_.\s]+", name.lower()) if p]
    if parts and parts[-1] == "env":
        return False
    return any(p in CREDENTIAL_PARTS for p in parts)


def is_secret_path(path: tuple[str, ...]) -> bool:
    """A config path whose value is a secret: under a header/body container, or named like a credential."""
    return any(p.lower() in SECRET_CONTAINERS for p in path[:-1]) or (bool(path) and is_credential_name(path[-1]))


def _is_url_name(name: str) -> bool:
    return "url" in name.lower() or "endpoint" in name.lower()


def url_password(url: str) -> str | None:
    """The password in ``scheme://user:password@host``, or None."""
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def strip_userinfo(url: str) -> str:
    """``url`` without ``user:password@`` (stored URLs never carry credentials)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _literal_problem(path: tuple[str, ...], value: Any) -> str | None:
    """Why the value at ``path`` may not be written in a configuration, or None."""
    if value is None or value == "" or (isinstance(value, (dict, list)) and not value):
        return None
    if path and _is_url_name(path[-1]) and isinstance(value, str):
        pw = url_password(value)
        if pw and ENV_REFERENCE not in pw:
            return "a URL with a password"
        return None
    if not is_secret_path(path):
        return None
    if isinstance(value, str):
        return None if ENV_REFERENCE in value else "a literal value"
    if isinstance(value, (bool, int, float)) and not is_credential_name(path[-1]):
        return None  # a number or flag in extra_body (top_k=5) is no credential
    return "a literal value"


def _leaves(data: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _leaves(v, (*path, str(k)))
    elif isinstance(data, list) and data:
        for i, v in enumerate(data):
            yield from _leaves(v, (*path, str(i)))
    else:
        yield path, data


def check_config(data: Any, *, where: str = "") -> None:
    """ConfigError naming (never showing) every secret written literally in an unresolved config tree."""
    bad = []
    for path, value in _leaves(data):
        problem = _literal_problem(path, value)
        if problem is not None:
            bad.append(f"{'.'.join((where, *path) if where else path)} ({problem})")
    if bad:
        raise ConfigError(f"the configuration holds secrets in clear, not shown: {', '.join(bad)}. {_WHERE}")


def check_overrides(overrides: Iterable[str]) -> None:
    """ConfigError for a command-line override that writes a secret literally (before Hydra saves it)."""
    for item in overrides:
        if item.startswith("-"):
            continue
        name, sep, value = item.lstrip("+~").partition("=")
        if not sep or not name:
            continue
        path = tuple(name.split("."))
        raw: Any = value.strip()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]
        elif ENV_REFERENCE not in raw:
            try:  # as Hydra types it: 5 is a number, {a: b} a dict
                import yaml

                raw = yaml.safe_load(raw)
            except Exception:
                pass
        if isinstance(raw, (dict, list)):  # check its keys as part of the path
            check_config(raw, where=name)
            continue
        problem = _literal_problem(path, raw)
        if problem is not None:
            raise ConfigError(f"the override of {name!r} holds a secret in clear ({problem}, not shown). {_WHERE}")


# -- the registry of known secrets ------------------------------------------------------------------
_lock = threading.Lock()
_known: set[str] = set()
_forms: list[str] = []  # every plain form of every known secret, longest first
_b64: list[re.Pattern[str]] = []  # base64 cores, with the neighbouring characters that carry a few bits


def _b64_cores(value: bytes) -> set[str]:
    """Substrings that any base64 text embedding ``value`` contains, whatever the byte alignment."""
    cores: set[str] = set()
    for shift in range(3):
        enc = base64.b64encode(b"\0" * shift + value).decode()
        # characters that depend on the bytes before (the prefix's group) or after (padding, the next bytes)
        start = 4 if shift else 0
        end = ((shift + len(value)) // 3) * 4
        core = enc[start:end]
        if len(core) >= MIN_SECRET:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))  # the URL-safe alphabet
    return cores


def forms_of(value: str) -> set[str]:
    """Every plain written form of ``value`` that :func:`redact` removes (base64: :func:`_b64_cores`)."""
    out = {value, quote(value, safe=""), quote(value), quote_plus(value)}
    out.add(json.dumps(value)[1:-1])
    out.add(json.dumps(value, ensure_ascii=False)[1:-1])
    return {f for f in out if len(f) >= MIN_SECRET}


def _b64_pattern(core: str) -> re.Pattern[str]:
    pattern = re.compile(r"[A-Za-z0-9+/_-]{0,3}" + re.escape(core) + r"[A-Za-z0-9+/_=-]{0,4}")
    _CORES[pattern] = core
    return pattern


#: a base64 pattern -> the core every match of it holds: a text without the core is not searched (the
#: pattern, starting with a class of characters, is tried at each position: ~270 us for a 20 KB prompt)
_CORES: dict[re.Pattern[str], str] = {}


def _pieces(value: str) -> set[str]:
    """``value`` and the parts a server may echo alone: ``Bearer TOKEN`` -> TOKEN; ``Basic b64`` -> user:pw, pw."""
    pieces = {value.strip()}
    for word in value.split():
        pieces.add(word)
    scheme, _, rest = value.strip().partition(" ")
    if scheme.lower() == "basic" and rest:
        try:
            decoded = base64.b64decode(rest.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            decoded = ""
        if decoded:
            pieces.add(decoded)
            pieces.add(decoded.partition(":")[2])
    return {p for p in pieces if len(p) >= MIN_SECRET and p.lower() not in ("bearer", "basic")}


def register(value: str | None) -> None:
    """Make ``value`` (and its echoable pieces) a known secret: every writer redacts it from now on."""
    if not value:
        return
    new = _pieces(str(value)) - _known
    if not new:
        return
    with _lock:
        _known.update(new)
        forms = set(_forms)
        for piece in new:
            forms |= forms_of(piece)
            _b64.extend(_b64_pattern(core) for core in _b64_cores(piece.encode("utf-8")))
        _forms[:] = sorted(forms, key=len, reverse=True)
    _install_log_factory()


def register_config(data: Any) -> None:
    """Register every secret of a *resolved* config tree: secret-path values and URL passwords."""
    for path, value in _leaves(data):
        if value is None or value == "":
            continue
        if path and _is_url_name(path[-1]) and isinstance(value, str):
            pw = url_password(value)
            if pw:
                register(pw)
                register(unquote(pw))
        elif is_secret_path(path) and isinstance(value, str):
            register(value)


def known() -> bool:
    return bool(_forms)


def redact(text: str, extra: Iterable[str | None] = ()) -> str:
    """``text`` with every known secret (and each of ``extra``), in every form, replaced by a marker."""
    forms, patterns = _forms, list(_b64)
    more = [e for e in extra if e and len(e) >= 4 and e not in _known]
    if more:
        forms = sorted({*forms, *more, *(f for e in more for f in forms_of(e))}, key=len, reverse=True)
        patterns += [_b64_pattern(c) for e in more for c in _b64_cores(e.encode("utf-8"))]
    if not forms:
        return text
    for form in forms:
        if form in text:
            text = text.replace(form, REDACTED)
    for pattern in patterns:
        core = _CORES.get(pattern)
        if core is None or core in text:
            text = pattern.sub(REDACTED, text)
    return text


def generation() -> int:
    """How many secrets are known: a text redacted earlier is redacted alike while this stays the same."""
    return len(_known)


def reach() -> int:
    """At least the length of the longest text one replacement by :func:`redact` can cover (0: no secret is
    known). A text redacted in pieces is redacted as a whole would be where no window of ``2 * reach()``
    characters around a cut between two pieces holds a secret."""
    if not _known:
        return 0
    longest = max(map(len, _forms), default=0)
    # a base64 pattern: a core of at most 4/3 of the secret's bytes, 3 characters before it and 4 after
    return max(longest, *(4 * (len(piece.encode("utf-8")) + 4) // 3 + 8 for piece in _known))


def redact_data(data: Any) -> Any:
    """``data`` (JSON-like) with every string redacted, keys included."""
    if not _forms:
        return data
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {redact(str(k)) if isinstance(k, str) else k: redact_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v) for v in data]
    return data


def safe_config(data: Any, path: tuple[str, ...] = ()) -> Any:
    """A config tree as it may be stored: URLs without userinfo, secret-path strings replaced by the
    marker (unless they are unresolved environment references), every known secret redacted."""
    if isinstance(data, dict):
        return {k: safe_config(v, (*path, str(k))) for k, v in data.items()}
    if isinstance(data, list):
        return [safe_config(v, (*path, str(i))) for i, v in enumerate(data)]
    if isinstance(data, str):
        if path and _is_url_name(path[-1]):
            data = strip_userinfo(data)
        elif is_secret_path(path) and ENV_REFERENCE not in data and data:
            return REDACTED
        return redact(data)
    return data


# -- writers: logs and console ----------------------------------------------------------------------
_factory_installed = False


def _install_log_factory() -> None:
    global _factory_installed
    with _lock:
        if _factory_installed:
            return
        _factory_installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if _forms:
            try:
                message = record.getMessage()
            except Exception:  # a bad format string: leave it to the handler to report
                return record
            record.msg, record.args = redact(message), None
            if record.exc_info and not record.exc_text:
                record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return record

    logging.setLogRecordFactory(factory)


class RedactingStream:
    """A text stream that redacts known secrets from what is written to ``target()`` (the console)."""

    def __init__(self, target: Any) -> None:
        self._target = target

    @property
    def stream(self) -> TextIO:
        stream: TextIO = self._target()
        return stream

    def write(self, text: str) -> int:
        self.stream.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, flush, encoding, ...
        return getattr(self.stream, name)
