"""Binding registered components: the one path from a critic's name to a ready :class:`Critic`.

:func:`bind_critics` is used by the loop's build, the critic audit, the fuzzers and the benchmarks
that run their own critics, so a critic is bound the same way everywhere: its per-critic arguments
checked against its signature, the run-wide critic options it *declares* (``Critic.options``) filled
in, and the framework's values (``benchmark``) injected when its signature asks for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import components
from .critic import Critic, critic_meta
from .errors import ConfigError, ModuloError, PluginLoadError, UnknownComponentError
from .registry import bind_arguments, suggest

if TYPE_CHECKING:
    from .benchmark import Benchmark


def construct(kind: str, name: str, factory: Any, kwargs: dict[str, Any]) -> Any:
    """``factory(**kwargs)``; a plugin whose constructor fails stops the run here, before any LLM call,
    with a PluginLoadError naming it (never a bare traceback)."""
    try:
        return factory(**kwargs)
    except ModuloError:
        raise
    except Exception as exc:
        raise PluginLoadError(f"{kind} {name!r} could not be set up: {type(exc).__name__}: {exc}") from exc


def bind_benchmark(name: str, args: Mapping[str, Any] | None = None, data_dir: str | Path | None = None) -> Benchmark:
    """The registered benchmark ``name`` built with ``args`` (checked against its signature) and the data
    directory (``data_dir``, else $MODULO_DATA_DIR, else ./data) when its constructor takes one."""
    from .settings import data_dir as resolve_data_dir

    factory = components.benchmarks.get(name)
    kwargs = bind_arguments(
        "benchmark", name, factory, dict(args or {}), inject={"data_dir": resolve_data_dir(data_dir)}
    )
    bench: Benchmark = construct("benchmark", name, factory, kwargs)
    return bench


def bind_critics(
    names: Sequence[str],
    benchmark: Benchmark,
    options: Mapping[str, Any] | None = None,
    args: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Critic]:
    """The critics ``names`` bound for ``benchmark``, in the order given.

    ``options`` are run-wide critic options (``critic_options``: ``mode``, ``hints``, ...): each critic
    receives those it declares in ``options`` and no other. ``args`` maps a critic name to its own
    arguments, which win over the run-wide options. An unknown name fails with a did-you-mean, a critic
    scoped to other benchmarks or an argument for a critic not in ``names`` is a ConfigError, a bad
    argument an ArgumentError, and a constructor that crashes a PluginLoadError.
    """
    known = components.critics.names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnknownComponentError("critic", unknown[0], known, suggest(unknown[0], known))
    per_critic = dict(args or {})
    for n in per_critic:
        if n not in names:
            raise ConfigError(f"critic_args names {n!r}, which is not among the active critics {list(names)}")
    shared = dict(options or {})
    out: list[Critic] = []
    for name in names:
        factory = components.critics.get(name)
        meta = critic_meta(factory)
        if meta["benchmarks"] and benchmark.name not in meta["benchmarks"]:
            raise ConfigError(
                f"critic {name!r} applies to {', '.join(meta['benchmarks'])}, not to benchmark {benchmark.name!r}"
            )
        given = dict(per_critic.get(name, {}))
        for key in meta["options"]:
            if key in shared and key not in given:
                given[key] = shared[key]
        kwargs = bind_arguments("critic", name, factory, given, inject={"benchmark": benchmark})
        out.append(construct("critic", name, factory, kwargs))
    return out
