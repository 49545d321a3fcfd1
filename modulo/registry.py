"""One generic registry, used for every kind of component.

A registry is filled from an entry-point group (``modulo.critics``, ``modulo.backprompts``,
``modulo.generators``, ``modulo.llms``, ``modulo.benchmarks``) and from in-process registration
(``registry.register(...)``, handy in notebooks and tests). Built-in components are declared in
modulo's own ``pyproject.toml`` through the very same groups a third-party package uses.

Listing names reads entry-point metadata only and never imports plugin code. Looking a name up
imports just that entry point; an unknown name fails with the known names and a did-you-mean, and a
plugin that fails to import raises :class:`~modulo.errors.PluginLoadError` carrying the plugin's own
error, so a run stops before its first LLM call.
"""

from __future__ import annotations

import difflib
import importlib.metadata as md
import inspect
import os
import sys
import threading
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import ArgumentError, PluginLoadError, UnknownComponentError

T = TypeVar("T")

KINDS = {
    "critic": "modulo.critics",
    "backprompt": "modulo.backprompts",
    "generator": "modulo.generators",
    "llm": "modulo.llms",
    "benchmark": "modulo.benchmarks",
    "tracker": "modulo.trackers",
    "user": "modulo.users",
}


#: the entry points of each group read so far, with their distributions' names, and the state they were read in
_SCANNED: dict[str, tuple[tuple[Any, ...], tuple[tuple[md.EntryPoint, str | None], ...]]] = {}
_SCAN_LOCK = threading.Lock()


def _scan_state() -> tuple[Any, ...]:
    """What entry-point discovery depends on: the finder function, the directories on ``sys.path`` and each
    one's modification time (installing or removing a package adds or removes a ``*.dist-info`` there)."""
    state: list[Any] = [md.entry_points]
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, None))
    return tuple(state)


def group_entry_points(group: str) -> tuple[tuple[md.EntryPoint, str | None], ...]:
    """The entry points of ``group``, each with its distribution's name (None when unknown).

    Reading them scans every installed distribution and parses the metadata of each one named, tens
    of milliseconds that every lookup used to pay again; the result is kept until ``sys.path`` or one
    of its directories changes. Imports nothing.
    """
    state = _scan_state()
    with _SCAN_LOCK:
        hit = _SCANNED.get(group)
        if hit is not None and hit[0] == state:
            return hit[1]
    found = tuple((ep, ep.dist.name if ep.dist is not None else None) for ep in md.entry_points(group=group))
    with _SCAN_LOCK:
        _SCANNED[group] = (state, found)
    return found


@dataclass(frozen=True)
class EntryInfo:
    """What is known about a name without importing it."""

    name: str
    value: str
    distribution: str | None
    builtin: bool


class Registry(Generic[T]):
    """Maps names to components of one kind (factories, classes or callables)."""

    def __init__(self, kind: str, group: str, validate: Callable[[str, Any], None] | None = None) -> None:
        self.kind = kind
        self.group = group
        self._validate = validate
        self._local: dict[str, T] = {}
        self._loaded: dict[str, T] = {}
        self._lock = threading.Lock()

    # -- discovery ------------------------------------------------------------------------------
    def entries(self) -> dict[str, EntryInfo]:
        """Entry-point metadata, keyed by name. Imports nothing."""
        found: dict[str, EntryInfo] = {}
        for ep, dist in group_entry_points(self.group):
            found[ep.name] = EntryInfo(ep.name, ep.value, dist, builtin=dist == "modulo")
        for name in self._local:
            found[name] = EntryInfo(name, "<registered in process>", None, builtin=False)
        return found

    def names(self) -> list[str]:
        """All known names, sorted. Imports no plugin code."""
        return sorted(self.entries())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.entries()

    # -- registration ---------------------------------------------------------------------------
    def register(self, name: str, obj: T, *, replace: bool = False) -> T:
        """Register ``obj`` under ``name`` in this process (tests, notebooks)."""
        with self._lock:
            if not replace and (name in self._local or name in self._loaded):
                raise ValueError(f"{self.kind} {name!r} is already registered")
            if self._validate is not None:
                self._validate(name, obj)
            self._local[name] = obj
            self._loaded.pop(name, None)
        return obj

    def unregister(self, name: str) -> None:
        with self._lock:
            self._local.pop(name, None)
            self._loaded.pop(name, None)

    # -- lookup ---------------------------------------------------------------------------------
    def get(self, name: str) -> T:
        """The component called ``name``; imports its plugin on first use."""
        if name in self._local:
            return self._local[name]
        if name in self._loaded:
            return self._loaded[name]
        eps = [(ep, dist) for ep, dist in group_entry_points(self.group) if ep.name == name]
        if not eps:
            known = self.names()
            raise UnknownComponentError(self.kind, name, known, suggest(name, known))
        claims = sorted({(dist or "unknown distribution", ep.value) for ep, dist in eps})
        if len(claims) > 1:  # which one loads would depend on sys.path order: never pick one silently
            who = "; ".join(f"{value} from {dist}" for dist, value in claims)
            raise PluginLoadError(
                f"{self.kind} {name!r} is registered by more than one package ({who}); "
                "uninstall one of them or rename its entry point"
            )
        ep, dist = eps[0]
        try:
            obj: T = ep.load()
        except (Exception, SystemExit) as exc:  # the plugin's own error, wrapped with where it came from
            # (a module that calls sys.exit("install X") on import would end the process with a code of its
            # own choosing: 0 or 3 read as a finished or a stopped run, with no word of the plugin)
            what = f"its import called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else None
            raise PluginLoadError(
                f"{self.kind} plugin {name!r} ({ep.value}, from {dist or 'unknown distribution'}) "
                f"failed to load: {what or f'{type(exc).__name__}: {exc}'}"
            ) from exc
        if self._validate is not None:
            try:
                self._validate(name, obj)
            except (TypeError, ValueError) as exc:
                raise PluginLoadError(
                    f"{self.kind} plugin {name!r} ({ep.value}, from {dist or 'unknown distribution'}) is invalid: {exc}"
                ) from exc
        with self._lock:
            self._loaded[name] = obj
        return obj


def suggest(name: str, known: list[str], n: int = 3) -> list[str]:
    """Close matches for a mistyped name (also matching the part after a ``pkg/`` prefix)."""
    hits = difflib.get_close_matches(name, known, n=n, cutoff=0.6)
    if not hits:
        tails = {k.rsplit("/", 1)[-1]: k for k in known}
        hits = [tails[t] for t in difflib.get_close_matches(name.rsplit("/", 1)[-1], list(tails), n=n, cutoff=0.6)]
    return hits


def bind_arguments(
    kind: str, name: str, factory: Callable[..., Any], args: Mapping[str, Any], inject: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Check ``args`` against ``factory``'s signature and return the keyword arguments to call it with.

    ``inject`` holds values the framework supplies when the factory asks for them by name (for
    example ``benchmark``); they are passed only if the signature has such a parameter. An argument
    the factory does not take, or a required one that is missing, raises :class:`ArgumentError`.
    """
    inject = dict(inject or {})
    try:
        sig = inspect.signature(factory, eval_str=True)
    except (NameError, TypeError):
        try:
            sig = inspect.signature(factory)
        except (TypeError, ValueError):  # builtins without a signature: pass the user's args through
            return dict(args)
    except ValueError:
        return dict(args)
    params = sig.parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = {
        n: p
        for n, p in params.items()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }
    kwargs: dict[str, Any] = {}
    unknown = [k for k in args if k not in named and not accepts_any]
    if unknown:
        takes = sorted(n for n in named if n not in inject)
        hints = {u: suggest(u, takes) for u in unknown}
        detail = "; ".join(f"{u!r}" + (f" (did you mean {hints[u][0]!r}?)" if hints[u] else "") for u in unknown)
        raise ArgumentError(
            f"{kind} {name!r} does not take argument(s) {detail}. It takes: {', '.join(takes) or 'no arguments'}"
        )
    for key, value in args.items():
        if key in named:
            _check_value(kind, name, key, value, named[key].annotation)
    kwargs.update(args)
    for key, value in inject.items():
        if key in named and key not in kwargs:
            kwargs[key] = value
    missing = [
        n for n, p in named.items() if p.default is inspect.Parameter.empty and n not in kwargs and n not in inject
    ]
    if missing:
        raise ArgumentError(f"{kind} {name!r} needs argument(s): {', '.join(missing)}")
    try:
        sig.bind_partial(**kwargs)
    except TypeError as exc:
        raise ArgumentError(f"{kind} {name!r}: {exc}") from exc
    return kwargs


_SIMPLE = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}


def _check_value(kind: str, name: str, key: str, value: Any, annotation: Any) -> None:
    """Check a configured value against a Literal[...] or a plain bool/int/float/str annotation."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        allowed = typing.get_args(annotation)
        if value not in allowed:
            raise ArgumentError(
                f"{kind} {name!r}: {key}={value!r} is not allowed; choose one of {', '.join(map(repr, allowed))}"
            )
        return
    if annotation in _SIMPLE and value is not None:
        ok = isinstance(value, _SIMPLE[annotation]) and not (annotation is not bool and isinstance(value, bool))
        if not ok:
            raise ArgumentError(f"{kind} {name!r}: {key}={value!r} should be {annotation.__name__}")
