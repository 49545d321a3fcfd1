"""Critics: pure checks ``(problem, plan) -> Verdict``.

Write a critic as a decorated function::

    from modulo import Verdict, critic

    @critic("budget", group="hard", benchmarks=("travelplanner",), options=("mode", "hints"))
    def budget(problem, plan, *, benchmark, mode: str = "strict", hints: bool = False) -> Verdict:
        ...
        return Verdict.fail("Day 2 ...", hint="A cheaper room: ..." if hints else None) if over else Verdict.ok()

or as a :class:`Critic` subclass. Either way the registered object is a *factory*: the loop calls it
with the user's arguments (checked against its signature) and, when the signature asks for them,
the framework's own values (``benchmark``: the bound benchmark instance). Register it under the
``modulo.critics`` entry-point group, with the same key as the critic's ``name`` (the registry refuses
an entry whose key and declared name differ).

Run-wide critic options (``critic_options.mode``, the ``hints`` that the feedback level sets, ...) reach only the
critics that declare them: ``@critic(..., options=("mode", "hints"))`` or ``options = (...)`` on a
subclass. Each declared option must be a keyword parameter of the critic; an option it does not
declare is never passed, whatever its parameters are called. :func:`modulo.binding.bind_critics` is
the one place critics are bound (the loop, the audit, the fuzzers and the benchmarks use it).

A critic that rejects a plan returns a failing Verdict; a critic that raises is an error
(:class:`~modulo.errors.CriticError`), handled per run settings. Every call goes through
:mod:`modulo.executor`: the critic gets its own copy of the plan (changing it is an error), runs off
the event loop (unless it declares itself quick: ``inline``), and has a deadline.

Groups: ``format`` critics gate the others (when one fails, the rest are not run); ``commonsense``
and ``hard`` follow the LLM-Modulo paper; any other group name is allowed.

Feedback levels (``critic_options.feedback``, recorded in run.json), applied to every critic's verdicts
by :meth:`Critic.__call__`:

- ``binary``: only that the plan fails the critic's constraint (its static ``description``);
- ``explain`` (the default, the paper's setting): what failed and where, in the critic's ``feedback``.
  It never names a value the plan did not already contain that would solve the problem (a free slot,
  a restaurant, a cheaper room): such values belong in the ``hint``, which is dropped at this level;
- ``hint``: the explanation plus the critic's constructive ``hint``.

A critic that can write hints declares the option ``hints`` and takes a keyword ``hints: bool``,
which the binding sets from the level (True only at ``hint``), so a costly suggestion is computed only
when it will be used.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, get_args

from .errors import ConfigError, CriticError
from .types import PlanJSON, Problem, Verdict

#: where a critic's knowledge comes from; printed next to results (see the reports)
CriticSource = Literal["oracle", "reimplemented", "llm-extracted", "derived"]

#: how a CPU-heavy critic runs: False (light), True or "process" (a worker process), "thread" (its own thread)
HeavyKind = bool | Literal["process", "thread"]

#: how much a failing verdict tells the planner (see the module docstring)
FeedbackLevel = Literal["binary", "explain", "hint"]
FEEDBACK_LEVELS: tuple[str, ...] = get_args(FeedbackLevel)
DEFAULT_FEEDBACK: FeedbackLevel = "explain"

FORMAT_GROUP = "format"

_SANDBOX = {"inside": False}


def in_sandbox() -> bool:
    """Whether this process is a sandbox worker (:mod:`modulo.sandbox`), where untrusted critics may run."""
    return _SANDBOX["inside"]


def enter_sandbox() -> None:
    """Mark this process as a sandbox worker (called by the worker itself, once its guards are up)."""
    _SANDBOX["inside"] = True


def check_feedback_level(level: object, where: str = "critic_options.feedback") -> FeedbackLevel:
    """``level`` if it is a feedback level, else a ConfigError naming the levels."""
    if level not in FEEDBACK_LEVELS:
        raise ConfigError(f"{where} must be one of {', '.join(FEEDBACK_LEVELS)}, not {level!r}")
    return level  # type: ignore[return-value]


def binary_feedback(description: str, name: str) -> str:
    """The whole feedback of a failing verdict at level ``binary``: which constraint, nothing more."""
    what = description.strip().rstrip(".") or name
    return f"The plan violates a constraint: {what}."


def feedback_update(verdict: Verdict, level: FeedbackLevel, description: str, name: str) -> dict[str, Any]:
    """The fields :func:`apply_feedback_level` changes in ``verdict`` (empty when none)."""
    update: dict[str, Any] = {}
    if level != "hint" and verdict.hint is not None:
        update["hint"] = None
    if level == "binary" and not verdict.passed and verdict.error is None:
        update["feedback"] = binary_feedback(description, name)
    return update


def apply_feedback_level(verdict: Verdict, level: FeedbackLevel, description: str, name: str) -> Verdict:
    """``verdict`` as the planner may see it at ``level``: the hint only at ``hint``; at ``binary`` the
    feedback of a failing verdict is replaced by :func:`binary_feedback`. Details stay (for records)."""
    update = feedback_update(verdict, level, description, name)
    return verdict.model_copy(update=update) if update else verdict


class Critic(ABC):
    """A bound critic, ready to check plans. Subclass it, or use :func:`critic` on a function."""

    name: ClassVar[str] = ""
    group: ClassVar[str] = "hard"
    description: ClassVar[str] = ""
    #: benchmarks this critic applies to; empty means any
    benchmarks: ClassVar[tuple[str, ...]] = ()
    #: lower runs (and is reported) first; used by the ``first`` backprompt strategy
    priority: ClassVar[int] = 100
    source: ClassVar[CriticSource] = "reimplemented"
    #: this critic's own deadline in seconds (None: the run's ``metacontroller.critic_timeout_s``)
    timeout_s: ClassVar[float | None] = None
    #: CPU-heavy: True (or "process") runs it in a worker process, "thread" (its work releases the GIL)
    #: in a thread of its own beside the other critics (see :mod:`modulo.executor`)
    heavy: ClassVar[HeavyKind] = False
    #: quick (well under a millisecond a plan) and never blocking: runs on the event loop's thread, with no
    #: hand-off to a worker (see :mod:`modulo.executor`); a call past its deadline is then a recorded
    #: timeout, and the critic runs in the worker thread from then on
    inline: ClassVar[bool] = False
    #: the run-wide critic options (``critic_options.*``) this critic takes, each a keyword parameter
    options: ClassVar[tuple[str, ...]] = ()
    #: untrusted code (an LLM-extracted critic, or a plugin that says so): it always runs in the sandbox
    #: (:mod:`modulo.sandbox`), whatever ``metacontroller.sandbox`` says, and refuses to run in-process
    untrusted: ClassVar[bool] = False
    #: where the critic came from, recorded in run.json (an extracted critic: the constraint it stands
    #: for, the benchmark, the model and its gate report); empty for hand-written critics
    provenance: ClassVar[Mapping[str, Any]] = {}
    #: the feedback level of this bound critic; set by the binding (:meth:`at_level`)
    feedback: FeedbackLevel = DEFAULT_FEEDBACK

    def at_level(self, level: str) -> Critic:
        """Set this critic's feedback level (binary, explain or hint) and return it."""
        self.feedback = check_feedback_level(level)
        return self

    @abstractmethod
    def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
        """Judge ``plan``. Return a Verdict; raise only on a genuine bug or broken input data."""

    def __call__(self, problem: Problem, plan: PlanJSON) -> Verdict:
        """Run :meth:`check`, label the verdict, and wrap a crash in :class:`CriticError`."""
        if self.untrusted and not in_sandbox():
            raise CriticError(
                self.name,
                PermissionError("an untrusted critic runs only in the modulo sandbox (metacontroller.sandbox)"),
            )
        try:
            verdict = self.check(problem, plan)
        except CriticError:
            raise
        except Exception as exc:
            raise CriticError(self.name, exc) from exc
        if not isinstance(verdict, Verdict):
            raise CriticError(self.name, TypeError(f"returned {type(verdict).__name__}, not a Verdict"))
        level = self.feedback
        if (verdict.hint is None or level == "hint") and (
            level != "binary" or verdict.passed or verdict.error is not None
        ):
            update: dict[str, Any] = {}  # what feedback_update says without a call: the level changes nothing
        else:
            update = feedback_update(verdict, level, self.description, self.name)
        if not update and verdict.critic == self.name and verdict.group == self.group:
            return verdict  # labelled by the critic itself and nothing to change: no copy (verdicts are frozen)
        return verdict.model_copy(update={**update, "critic": self.name, "group": self.group})  # one copy

    def __repr__(self) -> str:
        return f"<critic {self.name} ({self.group})>"


CheckFn = Callable[..., Verdict]


class FunctionCritic(Critic):
    """A critic made from a function by :func:`critic`; holds the bound keyword arguments."""

    def __init__(self, fn: CheckFn, kwargs: dict[str, Any]) -> None:
        self._fn = fn
        self._kwargs = kwargs

    def check(self, problem: Problem, plan: PlanJSON) -> Verdict:
        return self._fn(problem, plan, **self._kwargs)

    def at_level(self, level: str) -> Critic:
        """Set the level; a function that takes ``hints`` gets ``hints=True`` exactly at ``hint``."""
        super().at_level(level)
        if "hints" in self.options:
            self._kwargs = {**self._kwargs, "hints": self.feedback == "hint"}
        return self


class CriticFactory:
    """What :func:`critic` returns: call it with arguments to get a bound :class:`Critic`."""

    def __init__(
        self,
        fn: CheckFn,
        *,
        name: str,
        group: str,
        description: str,
        benchmarks: tuple[str, ...],
        priority: int,
        source: CriticSource,
        timeout_s: float | None = None,
        heavy: HeavyKind = False,
        options: tuple[str, ...] = (),
        untrusted: bool = False,
        provenance: Mapping[str, Any] | None = None,
        inline: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name
        self.group = group
        self.description = description
        self.benchmarks = benchmarks
        self.priority = priority
        self.source = source
        self.timeout_s = timeout_s
        self.heavy = heavy
        self.inline = bool(inline)
        self.options = tuple(options)
        self.untrusted = bool(untrusted)
        self.provenance = dict(provenance or {})
        functools.update_wrapper(self, fn)
        takes = set(self.__signature__.parameters)
        missing = [o for o in self.options if o not in takes]
        if missing:
            raise TypeError(f"critic {name!r} declares option(s) {missing} that {fn.__name__}() does not take")
        attrs = {
            "name": name,
            "group": group,
            "description": description,
            "benchmarks": benchmarks,
            "priority": priority,
            "source": source,
            "timeout_s": timeout_s,
            "heavy": heavy,
            "inline": self.inline,
            "options": self.options,
            "untrusted": self.untrusted,
            "provenance": self.provenance,
        }
        self._cls: type[FunctionCritic] = type(f"Critic_{name.replace('/', '_')}", (FunctionCritic,), attrs)

    @property
    def __signature__(self) -> Any:  # the arguments the factory takes: fn's, minus (problem, plan)
        import inspect

        try:
            sig = inspect.signature(self.fn, eval_str=True)
        except (NameError, TypeError):
            sig = inspect.signature(self.fn)
        params = list(sig.parameters.values())[2:]
        return sig.replace(parameters=params)

    def __call__(self, *, feedback: str = DEFAULT_FEEDBACK, **kwargs: Any) -> Critic:
        """A bound critic with arguments ``kwargs`` at feedback level ``feedback``. A critic that offers
        hints gets ``hints=True`` at level ``hint``; ``hints=True`` given directly means level ``hint``."""
        if "hints" in self.options:
            if kwargs.get("hints"):
                feedback = "hint"
            kwargs["hints"] = check_feedback_level(feedback, f"critic {self.name!r}: feedback") == "hint"
        return self._cls(self.fn, kwargs).at_level(feedback)

    def __repr__(self) -> str:
        return f"<critic factory {self.name} ({self.group})>"


def critic(
    name: str,
    *,
    group: str = "hard",
    description: str = "",
    benchmarks: tuple[str, ...] = (),
    priority: int = 100,
    source: CriticSource = "reimplemented",
    timeout_s: float | None = None,
    heavy: HeavyKind = False,
    options: tuple[str, ...] = (),
    untrusted: bool = False,
    provenance: Mapping[str, Any] | None = None,
    inline: bool = False,
) -> Callable[[CheckFn], CriticFactory]:
    """Turn ``fn(problem, plan, **options) -> Verdict`` into a registrable critic factory.

    ``timeout_s``: this critic's deadline (default: the run's); ``heavy``: CPU-bound, so the run sends
    it to a worker process (``True`` or ``"process"``) or, when its work releases the GIL (``"thread"``),
    to a thread of its own (see :mod:`modulo.executor`, ``metacontroller.heavy``); ``inline``: quick and
    never blocking, so it runs on the event loop's thread (``metacontroller.inline_critics``); ``options`` names
    the run-wide critic options (``critic_options.*``) the critic takes; ``untrusted``: always run it
    in the sandbox (LLM-extracted critics are); ``provenance``: where it came from (recorded in run.json).
    """

    def wrap(fn: CheckFn) -> CriticFactory:
        desc = description or (fn.__doc__ or "").strip().splitlines()[0] if (description or fn.__doc__) else ""
        return CriticFactory(
            fn,
            name=name,
            group=group,
            description=desc,
            benchmarks=benchmarks,
            priority=priority,
            source=source,
            timeout_s=timeout_s,
            heavy=heavy,
            options=options,
            untrusted=untrusted,
            provenance=provenance,
            inline=inline,
        )

    return wrap


def critic_meta(obj: Any) -> dict[str, Any]:
    """Name, group, description, benchmarks, priority, source and options of a critic factory or class."""
    return {
        "name": getattr(obj, "name", ""),
        "group": getattr(obj, "group", ""),
        "description": getattr(obj, "description", ""),
        "benchmarks": tuple(getattr(obj, "benchmarks", ())),
        "priority": int(getattr(obj, "priority", 100)),
        "source": getattr(obj, "source", "reimplemented"),
        "options": tuple(getattr(obj, "options", ())),
        "untrusted": bool(getattr(obj, "untrusted", False)),
        "provenance": dict(getattr(obj, "provenance", None) or {}),
    }


def validate_critic_factory(name: str, obj: Any) -> None:
    """Registry hook: a critic entry must be a CriticFactory or a Critic subclass."""
    if isinstance(obj, CriticFactory) or (isinstance(obj, type) and issubclass(obj, Critic)):
        declared = getattr(obj, "name", "")
        if declared != name:
            raise ValueError(
                f"it is registered as {name!r} but declares the name {declared!r}; "
                "the entry-point key must be the critic's name"
            )
        return
    raise TypeError(f"{name!r} is {type(obj).__name__}, expected a @critic function or a Critic subclass")
