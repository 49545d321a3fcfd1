"""The registries, one per kind of component, all instances of :class:`modulo.registry.Registry`."""

from __future__ import annotations

from typing import Any

from .critic import validate_critic_factory
from .registry import KINDS, Registry


def _validate_benchmark(name: str, obj: Any) -> None:
    from .benchmark import Benchmark

    if not (isinstance(obj, type) and issubclass(obj, Benchmark)):
        raise TypeError(f"{name!r} is {obj!r}, expected a Benchmark subclass")
    missing = sorted(getattr(obj, "__abstractmethods__", ()))
    if missing:
        raise TypeError(f"{name!r} ({obj.__name__}) does not implement the required hook(s) {', '.join(missing)}")


def _validate_callable(name: str, obj: Any) -> None:
    if not callable(obj):
        raise TypeError(f"{name!r} is {type(obj).__name__}, expected a class or factory function")


critics: Registry[Any] = Registry("critic", KINDS["critic"], validate_critic_factory)
backprompts: Registry[Any] = Registry("backprompt strategy", KINDS["backprompt"], _validate_callable)
generators: Registry[Any] = Registry("generator", KINDS["generator"], _validate_callable)
llms: Registry[Any] = Registry("llm backend", KINDS["llm"], _validate_callable)
benchmarks: Registry[Any] = Registry("benchmark", KINDS["benchmark"], _validate_benchmark)
trackers: Registry[Any] = Registry("tracker", KINDS["tracker"], _validate_callable)
#: users in the loop (:mod:`modulo.users`): scripted, llm
users: Registry[Any] = Registry("user", KINDS["user"], _validate_callable)

REGISTRIES: dict[str, Registry[Any]] = {
    "critics": critics,
    "backprompts": backprompts,
    "generators": generators,
    "llms": llms,
    "benchmarks": benchmarks,
    "trackers": trackers,
    "users": users,
}
