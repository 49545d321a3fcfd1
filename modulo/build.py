"""Bind a :class:`~modulo.config.ModuloConfig` into ready components, before any LLM call.

Every name is looked up (unknown names fail with a did-you-mean; a plugin that fails to import stops
here with its own error), every component's arguments are checked against its signature, and the
problems are loaded. Only then does a run start. ``modulo check`` runs just this.
"""

from __future__ import annotations

import inspect
import json
import logging
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from . import components
from .backprompt import BackpromptStrategy
from .benchmark import Benchmark
from .binding import bind_benchmark, bind_critics, construct
from .config import CRITIC_PRESETS, LLMSettings, LoopSettings, ModuloConfig, UserOptions
from .critic import Critic, FeedbackLevel, check_feedback_level, critic_meta
from .errors import ConfigError
from .generators.base import Generator
from .llm.base import capabilities_of
from .metacontroller import Metacontroller
from .problems import ProblemSet
from .redact import register_config, safe_config
from .reformulate import build_reformulator
from .registry import bind_arguments, suggest
from .runinfo import HeavyInfo, RunInfo, SandboxInfo
from .users import User, updates_from

log = logging.getLogger("modulo")


@dataclass(repr=False, kw_only=True)
class BoundRun:
    """A run's parts, bound and checked: what :func:`run_info` describes for run.json."""

    config: ModuloConfig
    benchmark: Benchmark
    split: str
    #: the selected problems; spooled to a temporary file when the benchmark streams them
    problems: ProblemSet
    loop: Metacontroller
    critics: list[Critic]
    llm: Any = None
    #: the feedback level of the run (critic_options.feedback)
    feedback: FeedbackLevel = "explain"


@dataclass(repr=False, kw_only=True)
class Session(BoundRun):
    """Everything a run needs, bound and checked, and what its run.json records (:func:`build_session`)."""

    info: RunInfo

    def __repr__(self) -> str:
        return f"<Session {self.benchmark.name}/{self.split} {len(self.problems)} problems>"

    async def start(self) -> None:
        """Let the model backend check itself before the run spends budget (``llm=local`` starts its
        server and makes one probe completion); a backend that cannot serve stops the run here."""
        for client in (self.llm, self.loop.user_llm if self.loop.user_llm is not self.llm else None):
            start = getattr(client, "start", None)
            if start is not None:
                await start()

    def unknown_cost_models(self) -> list[str]:
        """The models of this run's paid model clients whose dollars are not counted (no price known): a
        cost figure of the run is then a lower bound (see :meth:`LLMClient.unknown_cost_models`)."""
        return unknown_cost_models(self.loop)

    def pays_for(self, run: str) -> None:
        """Mark the replies this run's model clients store as paid by ``run`` (see :meth:`LLMClient.pays_for`)."""
        for client in (self.llm, self.loop.user_llm):
            mark = getattr(client, "pays_for", None)
            if mark is not None:
                mark(run)

    async def aclose(self) -> None:
        self.loop.executor.close()
        await self.loop.generator.aclose()  # model clients a generator opened itself (a judge on another backend)
        if self.llm is not None:
            await self.llm.aclose()
        user_llm = self.loop.user_llm
        if user_llm is not None and user_llm is not self.llm:
            await user_llm.aclose()


def unknown_cost_models(loop: Metacontroller) -> list[str]:
    """The models of ``loop``'s model clients (the planner's, the user's) whose dollars are not counted."""
    found: set[str] = set()
    for client in (loop.llm, loop.user_llm):
        unknown = getattr(client, "unknown_cost_models", None)
        if unknown is not None:
            found.update(unknown())
    return sorted(found)


def check_dollar_budgets(cfg: ModuloConfig, loop: Metacontroller) -> None:
    """A dollar budget (``run.max_dollars``, ``metacontroller.max_dollars``) with a model whose dollars are not
    counted would never stop the run: refused before any call."""
    caps = [
        name
        for name, value in (
            ("run.max_dollars", cfg.run.max_dollars),
            ("metacontroller.max_dollars", cfg.metacontroller.max_dollars),
        )
        if value is not None
    ]
    unknown = unknown_cost_models(loop) if caps else []
    if unknown:
        raise ConfigError(
            f"{' and '.join(caps)} is set, but no price is known for {', '.join(repr(m) for m in unknown)}: its "
            "calls count as $0, so the dollar budget would never stop the run. Set llm.price_input_per_mtok and "
            "llm.price_output_per_mtok (USD per million tokens), or drop the dollar budget"
        )


#: ``critics=none``: run with no checks at all (labelled ``none`` in run.json and reports)
NO_CRITICS = "none"


def expand_critics(spec: Any, benchmark: Benchmark) -> list[str]:
    """Critic names from a list of names and presets (``all``, ``common``, ``hard``, ``json``);
    ``none`` for no checks at all. An empty list or null is refused: it would certify every plan."""
    if spec == NO_CRITICS or spec == [NO_CRITICS]:
        return []
    if spec is None or spec == "" or (not isinstance(spec, str) and not list(spec)):
        raise ConfigError(
            "critics is empty: every plan would be certified with no check at all. Name critics or a preset "
            "(all, common, hard, json), or set critics=none to run with no checks on purpose (it is labelled)"
        )
    items = [spec] if isinstance(spec, str) else list(spec)
    own = benchmark.critic_names()
    names: list[str] = []
    for item in items:
        item = str(item).strip()
        if item in CRITIC_PRESETS:
            groups = CRITIC_PRESETS[item]
            for name in own:
                if groups is None or critic_meta(components.critics.get(name))["group"] in groups:
                    names.append(name)
        elif item:
            names.append(item)
    out: list[str] = []
    for n in names:
        if n not in out:
            out.append(n)
    return out


def validate(cfg: ModuloConfig) -> None:
    """InvalidSettings (a ConfigError naming the key) for a value set after the configuration was built
    (``cfg.llm.structured_output = "maybe"`` in a notebook): the whole configuration is checked again."""
    ModuloConfig.from_dict(cfg.model_dump())


def build_benchmark(cfg: ModuloConfig) -> Benchmark:
    return bind_benchmark(cfg.benchmark.name, cfg.benchmark.args, cfg.data_dir)


def build_critics(cfg: ModuloConfig, benchmark: Benchmark, level: FeedbackLevel | None = None) -> list[Critic]:
    """The active critics, bound, each at its feedback level (``level``: default :func:`feedback_level`)."""
    names = expand_critics(cfg.critics, benchmark)
    return bind_critics(names, benchmark, critic_bind_options(cfg, level), cfg.critic_args)


def critic_bind_options(cfg: ModuloConfig, level: FeedbackLevel | None = None) -> dict[str, Any]:
    """The run-wide critic options critics are bound with (the loop's and the sandbox workers')."""
    return {"mode": cfg.critic_options.mode, "feedback": level or feedback_level(cfg)}


def feedback_level(cfg: ModuloConfig) -> FeedbackLevel:
    """``critic_options.feedback``, with the deprecated ``critic_options.hints`` read into it."""
    opts = cfg.critic_options
    level = check_feedback_level(opts.feedback)
    if opts.hints is None:
        return level
    wanted: FeedbackLevel = "hint" if opts.hints else level
    if (opts.hints and level == "binary") or (not opts.hints and level == "hint"):
        raise ConfigError(
            f"critic_options.hints={str(opts.hints).lower()} contradicts critic_options.feedback={level}; "
            "hints is deprecated: set only critic_options.feedback (binary, explain or hint)"
        )
    log.warning(
        "critic_options.hints is deprecated: it is the feedback level now; use critic_options.feedback=%s", wanted
    )
    return wanted


def resolve_prompt(cfg: ModuloConfig) -> str:
    """``generator.prompt``, with ``auto`` resolved from the LLM backend's preference."""
    if cfg.generator.prompt != "auto":
        return cfg.generator.prompt
    backend = components.llms.get(cfg.llm.name) if cfg.llm.name in components.llms else None
    return "json" if backend is not None and capabilities_of(backend).prefers_json else "direct"


def resolve_reformulator(cfg: ModuloConfig, prompt: str) -> str:
    """``reformulator.mode``, with ``auto`` resolved: none after a json prompt, else llm."""
    if cfg.reformulator.mode != "auto":
        return cfg.reformulator.mode
    return "none" if prompt == "json" else "llm"


def build_generator(cfg: ModuloConfig, benchmark: Benchmark) -> Generator:
    factory = components.generators.get(cfg.generator.name)
    serves: tuple[str, ...] = tuple(getattr(factory, "benchmarks", ()) or ())
    if serves and benchmark.name not in serves:
        raise ConfigError(
            f"generator {cfg.generator.name!r} plans only for {', '.join(serves)}, not for benchmark "
            f"{benchmark.name!r}; pick generator=llm, or benchmark={serves[0]}"
        )
    args = dict(cfg.generator.args)
    if "prompt" in inspect.signature(factory).parameters and "prompt" not in args:
        args["prompt"] = resolve_prompt(cfg)
    if "sample_index" in inspect.signature(factory).parameters and "sample_index" not in args:
        args["sample_index"] = cfg.run.sample
    kwargs = bind_arguments("generator", cfg.generator.name, factory, args, inject={"benchmark": benchmark})
    gen: Generator = construct("generator", cfg.generator.name, factory, kwargs)
    return gen


def build_llm(cfg: ModuloConfig) -> Any:
    from .llm.client import build_client

    return build_client(
        cfg.llm,
        cache_mode=cfg.cache.mode,  # type: ignore[arg-type]
        cache_dir=Path(cfg.cache.dir) if cfg.cache.dir else None,
    )


def build_strategy(cfg: ModuloConfig) -> BackpromptStrategy:
    factory = components.backprompts.get(cfg.backprompt.name)
    kwargs = bind_arguments("backprompt strategy", cfg.backprompt.name, factory, dict(cfg.backprompt.args))
    try:
        strategy: BackpromptStrategy = factory(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"backprompt {cfg.backprompt.name!r}: {exc}") from exc
    return strategy


def build_session(cfg: ModuloConfig, *, load_problems: bool = True) -> Session:
    """Bind every component of ``cfg``; raises a ModuloError subclass on any problem, before any LLM call."""
    register_config(cfg.model_dump())  # secrets in headers, extra_body, URLs: redacted by every writer
    validate(cfg)
    if cfg.cache.mode not in ("off", "read-write", "read-only"):  # a typo fails even when no model is needed
        raise ConfigError(f"cache.mode must be off, read-write or read-only, not {cfg.cache.mode!r}")
    benchmark = build_benchmark(cfg)
    splits = benchmark.splits()
    split = cfg.benchmark.split or splits[0]
    if split not in splits:
        raise ConfigError(
            f"benchmark.split={split!r} is not a split of {benchmark.name!r}; "
            f"splits: {', '.join(splits)}"
            + (f" (did you mean {suggest(split, splits)[0]!r}?)" if suggest(split, splits) else "")
        )
    demo = benchmark.scripted_demo() if cfg.llm.name == "scripted" and cfg.llm.script is None else None
    if demo is not None:  # llm=scripted with no script: the benchmark's demo script, recorded as llm.script
        cfg = cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"script": str(demo)})})
    level = feedback_level(cfg)
    critics = build_critics(cfg, benchmark, level)
    sources: list[str] = sorted({str(c.source) for c in critics if c.group != "format"}) or ["none"]
    if split in benchmark.test_splits and "oracle" in sources and not cfg.run.allow_test_oracle:
        raise ConfigError(
            f"split {split!r} of {benchmark.name!r} is a test split and the critics are the benchmark's own "
            "evaluation checks (oracle); writing evaluation cues into test-time prompts is not allowed by the "
            "benchmark's authors. Set run.allow_test_oracle=true to do it anyway (it is recorded)."
        )
    from .sandbox import named_critics

    # a per-critic deadline for a critic that does not run (a typo) would silently leave the default in force
    named_critics(list(cfg.metacontroller.critic_timeouts), [c.name for c in critics], "critic_timeouts", None)
    sandboxed, heavy, executor = build_sandbox(cfg, benchmark, critics, level)
    loop = build_loop(cfg, benchmark, critics, level, executor)
    check_dollar_budgets(cfg, loop)
    llm = loop.llm
    problems = (
        benchmark.problem_set(
            split, limit=cfg.benchmark.limit, ids=[str(i) for i in cfg.benchmark.ids] if cfg.benchmark.ids else None
        )
        if load_problems
        else ProblemSet()
    )
    if load_problems and not problems:  # a run of nothing would end "complete" with an empty table
        raise ConfigError(f"benchmark {benchmark.name!r}, split {split!r}: no problems selected, nothing to run")
    if problems:
        benchmark.check_plannable(problems)
    bound = BoundRun(
        config=cfg,
        benchmark=benchmark,
        split=split,
        problems=problems,
        loop=loop,
        critics=loop.critics,
        llm=llm,
        feedback=level,
    )
    sandbox = heavy_info = None
    if sandboxed:
        mc = cfg.metacontroller
        sandbox = SandboxInfo(
            critics=sandboxed, memory_mb=mc.sandbox_memory_mb, cpu_s=mc.sandbox_cpu_s, workers=mc.sandbox_workers
        )
    if heavy:
        heavy_info = HeavyInfo(critics=heavy, workers=cfg.metacontroller.heavy_workers)
    info = run_info(bound, sources, sandbox, heavy_info)
    return Session(**{f.name: getattr(bound, f.name) for f in fields(BoundRun)}, info=info)


def build_loop(
    cfg: ModuloConfig, benchmark: Benchmark, critics: list[Critic], level: FeedbackLevel, executor: Any = None
) -> Metacontroller:
    """The loop of ``cfg`` around the bound ``critics``: the generator, the backprompt strategy, the
    reformulator and the model client (only when the generator or the reformulator calls one), the user,
    and ``executor`` for the critics that run in worker processes (see :func:`build_sandbox`)."""
    generator = build_generator(cfg, benchmark)
    strategy = build_strategy(cfg)
    if level == "hint" and getattr(strategy, "hints", True) is False:
        raise ConfigError(
            "critic_options.feedback=hint asks the critics for hints, but the backprompt strategy drops them "
            "(backprompt.args.hints=false): set backprompt.args.hints=true, or critic_options.feedback=explain"
        )
    # search generators produce plans: no model is needed and no reformulation call is ever made
    mode = resolve_reformulator(cfg, generator.prompt_role) if generator.needs_llm else "none"
    llm = build_llm(cfg) if generator.needs_llm or mode == "llm" else None
    reformulator = build_reformulator(mode, benchmark, llm, cfg.llm if llm is not None else None)
    user, user_llm = build_user(cfg, benchmark, llm)
    return Metacontroller(
        benchmark=benchmark,
        generator=generator,
        reformulator=reformulator,
        critics=critics,
        strategy=strategy,
        llm=llm,
        settings=loop_settings(cfg),
        executor=executor,
        user=user,
        user_llm=user_llm,
    )


def loop_settings(cfg: ModuloConfig) -> LoopSettings:
    """The loop's settings: the ``metacontroller`` section, the user options and the parsed ``user.updates``."""
    user = cfg.user.model_dump(include=set(UserOptions.model_fields))
    updates = tuple(updates_from(cfg.user.updates, "user.updates"))
    return LoopSettings(**cfg.metacontroller.model_dump(), **user, updates=updates)


def build_user(cfg: ModuloConfig, benchmark: Benchmark, llm: Any) -> tuple[User | None, Any]:
    """The user in the loop (``user.name``) and the model client it calls: the run's own (``llm``), or a
    second client built from the run's llm settings with ``user.llm`` overriding them (same cache)."""
    conf = cfg.user
    if conf.name is None or conf.name == "none":
        if conf.file is not None or conf.args or conf.llm:
            raise ConfigError("user.file, user.args and user.llm need a user: set user=scripted or user=llm")
        return None, None
    factory = components.users.get(conf.name)
    args = dict(conf.args)
    if conf.file is not None:
        args["file"] = conf.file
    kwargs = bind_arguments("user", conf.name, factory, args, inject={"benchmark": benchmark})
    user: User = construct("user", conf.name, factory, kwargs)
    if not getattr(user, "needs_llm", False):
        if conf.llm:
            raise ConfigError(f"user.llm is set, but user={conf.name} calls no model")
        return user, None
    if not conf.llm and llm is not None:
        return user, llm
    llm_settings = LLMSettings(**{**cfg.llm.model_dump(), **_llm_overrides(conf.llm)})
    return user, build_llm(cfg.model_copy(update={"llm": llm_settings}))


def _llm_overrides(values: dict[str, Any]) -> dict[str, Any]:
    known = set(LLMSettings.model_fields)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"user.llm: unknown key(s) {', '.join(unknown)}; keys: {', '.join(sorted(known))}")
    return dict(values)


def build_sandbox(
    cfg: ModuloConfig, benchmark: Benchmark, critics: list[Critic], level: FeedbackLevel
) -> tuple[list[str], list[str], Any]:
    """The critics ``metacontroller.sandbox`` names, the CPU-heavy critics ``metacontroller.heavy``
    selects (a sandboxed critic stays sandboxed), and the executor that runs them in worker processes
    (None when there are neither: every critic then runs in-process)."""
    from .executor import ThreadExecutor
    from .sandbox import (
        HeavyExecutor,
        SandboxExecutor,
        SandboxLimits,
        SandboxSpec,
        heavy_names,
        in_process_modules,
        sandboxed_names,
    )
    from .settings import data_dir as resolve_data_dir

    mc = cfg.metacontroller
    names = sandboxed_names(mc.sandbox, critics)
    heavy = [n for n in heavy_names(mc.heavy, critics) if n not in names]
    limits = SandboxLimits(memory_mb=mc.sandbox_memory_mb, cpu_s=mc.sandbox_cpu_s, workers=mc.sandbox_workers)
    if mc.heavy_workers < 1:
        raise ConfigError(f"metacontroller.heavy_workers must be at least 1, not {mc.heavy_workers}")
    if not names and not heavy:
        return [], [], None
    spec = SandboxSpec(
        benchmark=cfg.benchmark.name,
        benchmark_args=dict(cfg.benchmark.args),
        data_dir=str(resolve_data_dir(cfg.data_dir)),
        options=critic_bind_options(cfg, level),
        critic_args={k: dict(v) for k, v in cfg.critic_args.items()},
        imports=in_process_modules([*names, *heavy]),
    )
    executor: Any = ThreadExecutor(inline=mc.inline_critics)  # the in-process critics
    if names:
        executor = SandboxExecutor(names, spec, limits, inner=executor)
    if heavy:
        executor = HeavyExecutor(heavy, spec, workers=mc.heavy_workers, inner=executor)
    return names, heavy, executor


def _critics_request(spec: Any) -> list[str]:
    if spec is None:
        return []
    return [str(spec)] if isinstance(spec, str) else [str(x) for x in spec]


def run_info(
    session: BoundRun, sources: list[str], sandbox: SandboxInfo | None = None, heavy: HeavyInfo | None = None
) -> RunInfo:
    """The ``run.json`` content (see :mod:`modulo.runinfo`), secrets redacted.

    ``derived_problems`` lists the problems whose data the benchmark derived itself
    (``metadata['derived']``) rather than read from the official data.
    """
    info = _run_info(session, sources)
    info["derived_problems"] = list(session.problems.derived)
    info["sandbox"] = sandbox.model_dump() if sandbox is not None else None
    info["heavy"] = heavy.model_dump() if heavy is not None else None
    # held exactly as written: JSON data only (a scripted backend's function becomes its text), no
    # secret, no URL userinfo
    stored = RunInfo.model_validate(json.loads(json.dumps(safe_config(info), default=str)))
    return stored.with_arg_defaults(benchmark_arg_defaults(session.benchmark))


def benchmark_arg_defaults(benchmark: Benchmark) -> dict[str, Any]:
    """The keyword arguments of the benchmark's constructor that have defaults, with those defaults."""
    params = inspect.signature(type(benchmark)).parameters.values()  # a class may declare its own __signature__
    return {
        p.name: p.default
        for p in params
        if p.default is not inspect.Parameter.empty and p.name != "data_dir" and p.kind is not p.VAR_KEYWORD
    }


def _user_info(cfg: ModuloConfig, session: BoundRun) -> dict[str, Any]:
    """run.json's ``user``: who answers questions, the updates configured, how questions are budgeted."""
    conf = cfg.user
    user_llm = session.loop.user_llm if session.loop.user is not None else None
    return {
        "name": conf.name if conf.name not in (None, "none") else None,
        "file": conf.file,
        "args": dict(conf.args),
        "llm": safe_config(dict(conf.llm), ("user", "llm")) if conf.llm else None,
        "llm_model": getattr(getattr(user_llm, "settings", None), "model", None),
        "updates": [dict(u) for u in conf.updates],
        "max_questions": conf.max_questions,
        "question_costs_iteration": conf.question_costs_iteration,
        "abstain": conf.abstain,
    }


def _run_info(session: BoundRun, sources: list[str]) -> dict[str, Any]:
    from . import __version__
    from .runs import git_revision, now_iso

    cfg = session.config
    llm = None
    if session.llm is not None:
        llm = safe_config(cfg.llm.model_dump(), ("llm",))
    info = {
        "created": now_iso(),
        "modulo_version": __version__,
        "git_revision": git_revision(),
        "benchmark": {
            "name": session.benchmark.name,
            "split": session.split,
            "args": dict(cfg.benchmark.args),
            "data_dir": str(session.benchmark.data_dir) if session.benchmark.data_dir else None,
        },
        "generator": {
            "name": cfg.generator.name,
            "args": dict(cfg.generator.args),
            "prompt_role": session.loop.generator.prompt_role,
        },
        "reformulator": session.loop.reformulator.mode,
        "llm": llm,
        "critics": [c.name for c in session.critics],
        #: the ``critics`` request as given (presets and names), so that reports name a run by what was asked
        "critics_requested": _critics_request(cfg.critics),
        "critic_options": cfg.critic_options.model_dump(),
        # the feedback level that ran (critic_options.feedback, the deprecated hints read into it), and
        # each critic's own level (critic_args.NAME.feedback may set one apart)
        "feedback": session.feedback,
        "critic_feedback": {c.name: c.feedback for c in session.critics},
        "critic_args": {k: dict(v) for k, v in cfg.critic_args.items()},
        "critic_source": "+".join(sources),
        # where critics that are not hand-written came from (an LLM-extracted critic: the constraint it
        # stands for, the built-in it may be compared with, the model, its gate report); untrusted ones
        "critic_provenance": {c.name: dict(c.provenance) for c in session.critics if c.provenance},
        "untrusted_critics": [c.name for c in session.critics if c.untrusted],
        "backprompt": {"name": cfg.backprompt.name, "args": dict(cfg.backprompt.args)},
        "budget": {
            "max_iterations": cfg.metacontroller.max_iterations,
            "max_tokens": cfg.metacontroller.max_tokens,
            "max_dollars": cfg.metacontroller.max_dollars,
            "max_seconds": cfg.metacontroller.max_seconds,
        },
        "fixed_point": {
            "on_fixed_point": cfg.metacontroller.on_fixed_point,
            "temperatures": list(cfg.metacontroller.fixed_point_temperatures),
            "variations": cfg.metacontroller.fixed_point_variations,
        },
        "loop": {
            "check_unsolvable": cfg.metacontroller.check_unsolvable,
            "stop_after_repeats": cfg.metacontroller.stop_after_repeats,
            "max_reply_chars": cfg.metacontroller.max_reply_chars,
            "max_plan_items": cfg.metacontroller.max_plan_items,
        },
        "user": _user_info(cfg, session),
        "sample": cfg.run.sample,
        "allow_test_oracle": cfg.run.allow_test_oracle,
        "labels": dict(cfg.labels),
        "templates": session.loop.templates(),
        "problem_ids": list(session.problems.ids),
        "execution": {"concurrency": cfg.run.concurrency, "run_max_dollars": cfg.run.max_dollars},
    }
    return info
