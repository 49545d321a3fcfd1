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
from .critic import DEFAULT_FEEDBACK, Critic, check_feedback_level, critic_meta
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

    ``options`` are run-wide critic options (``critic_options``: ``mode``, ``feedback``, ...): each critic
    receives those it declares in ``options`` and no other. ``feedback`` is the feedback level
    (binary, explain, hint; ``critic_args.NAME.feedback`` sets one critic apart): every critic is bound
    at its level, and a critic that declares ``hints`` gets ``hints=True`` exactly at level ``hint``.
    ``args`` maps a critic name to its own arguments, which win over the run-wide options. An unknown
    name fails with a did-you-mean, a critic scoped to other benchmarks or an argument for a critic not
    in ``names`` is a ConfigError, a bad argument an ArgumentError, and a constructor that crashes a
    PluginLoadError.
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
    level = check_feedback_level(shared.pop("feedback", DEFAULT_FEEDBACK))
    if shared.pop("hints", None):  # the run-wide hints of earlier versions: the level hint
        level = "hint"
    out: list[Critic] = []
    for name in names:
        factory = components.critics.get(name)
        meta = critic_meta(factory)
        if meta["benchmarks"] and benchmark.name not in meta["benchmarks"]:
            raise ConfigError(
                f"critic {name!r} applies to {', '.join(meta['benchmarks'])}, not to benchmark {benchmark.name!r}"
            )
        given = dict(per_critic.get(name, {}))
        if "hints" in given and "hints" in meta["options"]:
            raise ConfigError(
                f"critic_args.{name}.hints: hints are a feedback level now; use critic_options.feedback=hint "
                f"(every critic) or +critic_args.{name}.feedback=hint (this critic alone)"
            )
        own = check_feedback_level(given.pop("feedback", level), f"critic_args.{name}.feedback")
        for key in meta["options"]:
            if key == "hints":  # set by the feedback level, never by a run-wide option of that name
                given["hints"] = own == "hint"
            elif key in shared and key not in given:
                given[key] = shared[key]
        kwargs = bind_arguments("critic", name, factory, given, inject={"benchmark": benchmark})
        bound: Critic = construct("critic", name, factory, kwargs)
        whole = benchmark.heavy_critics
        if whole and not bound.heavy and name in meta_own(benchmark):  # the benchmark declares its critics heavy
            setattr(bound, "heavy", "process" if whole is True else whole)  # noqa: B010 - an instance's own value
        if name == "format" and benchmark.quick_format and not bound.heavy:  # it runs the benchmark's own checks
            setattr(bound, "inline", True)  # noqa: B010 - an instance's own value
        out.append(bound.at_level(own))
    return out


def meta_own(benchmark: Benchmark) -> set[str]:
    """The critics a benchmark names as its own (``critic_names()``), the shared ``format`` critic aside."""
    return set(benchmark.critic_names()) - {"format"}
