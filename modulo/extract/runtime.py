"""What an extracted critic is at run time: the model's ``check`` function behind a ``@critic`` factory.

A generated plugin package (see :mod:`modulo.extract.package`) names its critics with
:func:`extracted_critic`; the extraction gate tests candidates through the very same function, so what
was admitted is what runs. Importing a plugin's ``critics`` module (as ``modulo critics list`` does)
never executes the model's code: the code file is loaded on the first check, and an extracted critic
is ``untrusted``, so that first check happens only inside a sandbox worker (:mod:`modulo.sandbox`).

The model writes one function of a fixed shape::

    def check(problem: dict, plan) -> tuple[bool, str]:
        ...

``problem`` is the benchmark's view of the problem (:meth:`~modulo.benchmark.Benchmark.critic_view`:
the query and structured constraints, never an answer), ``plan`` the plan's JSON. It returns
``(True, "")`` when the plan satisfies the constraint, else ``(False, why)``; a bare bool is read the
same way. Anything else is a critic error, never a pass.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..critic import CriticFactory, CriticSource, critic
from ..types import PlanJSON, Problem, Verdict
from .confine import load_confined

#: the name of the function a candidate must define
FUNCTION = "check"
#: where an extracted critic's knowledge comes from (``Critic.source``)
SOURCE: CriticSource = "llm-extracted"

_loaded: dict[str, Callable[..., Any]] = {}
_lock = threading.Lock()


def load_check(path: str | Path, sha256: str | None = None) -> Callable[..., Any]:
    """The ``check`` function of the code file ``path`` (loaded once per process, confined: see
    :mod:`.confine`; refused unless its hash is ``sha256``, when given)."""
    key = str(path)
    with _lock:
        if key in _loaded:
            return _loaded[key]
        module = load_confined(key, f"modulo_extracted_code_{len(_loaded)}", sha256)
        fn = getattr(module, FUNCTION, None)
        if not callable(fn):
            raise TypeError(f"{key} defines no function {FUNCTION}(problem, plan)")
        check: Callable[..., Any] = fn
        _loaded[key] = check
        return check


def as_verdict(result: Any, description: str) -> Verdict:
    """The Verdict of a ``check`` result: ``(passed, feedback)`` or a bool; anything else is a TypeError."""
    feedback: Any = ""
    if isinstance(result, tuple) and len(result) == 2:
        result, feedback = result
    if not isinstance(result, bool):
        raise TypeError(f"{FUNCTION}() returned {type(result).__name__}, expected (bool, str) or bool")
    if not isinstance(feedback, str):
        raise TypeError(f"{FUNCTION}() returned feedback of type {type(feedback).__name__}, expected str")
    if result:
        return Verdict.ok(feedback)
    return Verdict.fail(feedback.strip() or f"The plan violates a constraint: {description}.")


def extracted_critic(
    name: str,
    *,
    constraint: str,
    benchmark: str,
    description: str,
    code: str | Path,
    provenance: Mapping[str, Any] | None = None,
    group: str = "hard",
) -> CriticFactory:
    """A registrable critic factory running the model's ``check`` from the file ``code``: source
    ``llm-extracted``, untrusted (always sandboxed), scoped to ``benchmark``."""
    path = str(code)
    sha256 = (provenance or {}).get("code_sha256")  # (the generated package records it; the gate loads its own file)

    def fn(problem: Problem, plan: PlanJSON, *, benchmark: Any) -> Verdict:
        check = load_check(path, sha256)
        return as_verdict(check(benchmark.critic_view(problem), plan), description)

    fn.__name__ = name.replace("/", "_").replace("-", "_")
    fn.__doc__ = description
    info = {"constraint": constraint, "benchmark": benchmark, **dict(provenance or {})}
    return critic(
        name,
        group=group,
        description=description,
        benchmarks=(benchmark,),
        source=SOURCE,
        untrusted=True,
        provenance=info,
    )(fn)
