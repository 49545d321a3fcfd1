"""The configuration schema, as plain dataclasses.

The CLI registers these in Hydra's ConfigStore (so a typo or a wrong type fails at start with the
key's name) and converts the composed config back to these dataclasses; library code, notebooks and
tests use them directly and never see Hydra.

Components are named by registry name plus arguments: ``benchmark.name``, ``generator.name``,
``backprompt.name``, ``llm.name`` and the ``critics`` list. ``critics`` takes critic names and the
presets ``all`` (the benchmark's critics), ``common`` (format + commonsense), ``hard`` (format +
hard) and ``json`` (format only), the subsets of the LLM-Modulo paper's Table 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional  # noqa: UP035 - OmegaConf needs typing generics

CRITIC_PRESETS = {
    "all": None,  # every critic the benchmark declares
    "common": ("format", "commonsense"),
    "hard": ("format", "hard"),
    "json": ("format",),
}


@dataclass
class BenchmarkConf:
    name: str = "travelplanner"
    split: Optional[str] = None  # noqa: UP045
    limit: Optional[int] = None  # noqa: UP045
    ids: Optional[List[str]] = None  # noqa: UP006, UP045
    #: benchmark-specific constructor arguments (n, seed, shots, ...)
    args: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006


@dataclass
class GeneratorConf:
    name: str = "llm"
    #: the planner prompt: direct, cot or json (llm generator); auto: json for backends that prefer
    #: schema-constrained output (the small local model), else direct
    prompt: str = "auto"
    args: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006


@dataclass
class ReformulatorConf:
    #: llm | parser | none | auto (none when the generator is asked for JSON, else llm)
    mode: str = "auto"


@dataclass
class BackpromptConf:
    name: str = "all"
    args: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006


@dataclass
class CriticOptions:
    #: strict | official (passed to critics that take a ``mode`` option)
    mode: str = "strict"
    #: what failing critics tell the planner: binary (only which constraint failed) | explain (what
    #: failed and where; the paper's default) | hint (plus concrete suggestions, for critics that offer them)
    feedback: str = "explain"
    #: deprecated: hints=true is feedback=hint (still read, with a warning)
    hints: Optional[bool] = None  # noqa: UP045


@dataclass
class MetacontrollerConf:
    max_iterations: int = 10
    max_tokens: Optional[int] = None  # noqa: UP045
    max_dollars: Optional[float] = None  # noqa: UP045
    max_seconds: Optional[float] = None  # noqa: UP045
    #: record | stop
    on_critic_error: str = "record"
    check_unsolvable: bool = True
    stop_after_repeats: Optional[int] = None  # noqa: UP045
    #: seconds a critic call may take before it is a recorded critic error (generous default)
    critic_timeout_s: float = 120.0
    #: replies longer than this (characters) are a format error; null: the benchmark's own bound
    max_reply_chars: Optional[int] = None  # noqa: UP045
    #: plans with more JSON values than this are a format error; null: the benchmark's own bound
    max_plan_items: Optional[int] = None  # noqa: UP045
    #: end a problem with a recorded error when the process holds more resident memory than this (MB)
    max_rss_mb: Optional[float] = None  # noqa: UP045
    #: per-critic deadlines in seconds: {critic_name: seconds}
    critic_timeouts: Dict[str, float] = field(default_factory=dict)  # noqa: UP006
    #: a request at temperature 0 that repeats an earlier one of the same problem: stop | temperature | vary
    on_fixed_point: str = "stop"
    #: on_fixed_point=temperature: the temperatures of the 1st, 2nd, ... repeat of a request
    fixed_point_temperatures: List[float] = field(default_factory=lambda: [0.7, 1.0])  # noqa: UP006
    #: on_fixed_point=vary: how many varied prompts a repeated request may get before the loop stops
    fixed_point_variations: int = 2
    #: critics run in sandboxed worker processes: a list of names, plugins (every non-built-in), or none
    sandbox: Any = None
    #: the sandbox's per-worker address-space limit (MiB), CPU seconds per call (null: deadline + 1), workers
    sandbox_memory_mb: int = 2048
    sandbox_cpu_s: Optional[float] = None  # noqa: UP045
    sandbox_workers: int = 2
    #: CPU-heavy critics in worker processes: declared (those that declare it, or whose benchmark does),
    #: none (every critic in-process), or a list of critic names
    heavy: Any = "declared"
    #: worker processes for the CPU-heavy critics
    heavy_workers: int = 2


@dataclass
class LLMConf:
    name: str = "scripted"
    model: str = ""
    base_url: Optional[str] = None  # noqa: UP045
    api_key_env: Optional[str] = None  # noqa: UP045
    temperature: float = 0.0
    max_tokens: Optional[int] = None  # noqa: UP045
    seed: Optional[int] = None  # noqa: UP045
    timeout_s: float = 120.0
    max_retries: int = 6
    backoff_base_s: float = 1.0
    max_backoff_s: float = 60.0
    concurrency: int = 16
    requests_per_minute: Optional[float] = None  # noqa: UP045
    #: schema | json | off
    structured_output: str = "schema"
    price_input_per_mtok: Optional[float] = None  # noqa: UP045
    price_output_per_mtok: Optional[float] = None  # noqa: UP045
    script: Optional[str] = None  # noqa: UP045
    recording: Optional[str] = None  # noqa: UP045
    args: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006


@dataclass
class CacheConf:
    #: off | read-write | read-only
    mode: str = "read-write"
    dir: Optional[str] = None  # noqa: UP045


@dataclass
class RunConf:
    #: the run directory; empty: Hydra's output directory for this job
    dir: Optional[str] = None  # noqa: UP045
    concurrency: int = 8
    #: a dollar budget for the whole run; problems not started when it is spent are recorded as skipped
    max_dollars: Optional[float] = None  # noqa: UP045
    #: re-run problems whose last record is an error or skipped
    retry_errors: bool = True
    progress: bool = True
    #: draw index for every LLM request (another value = a deliberate fresh sample past the cache)
    sample: int = 0
    #: allow oracle critics on a test split (the benchmark authors forbid evaluation cues at test time)
    allow_test_oracle: bool = False
    #: write report.md, CSV tables and the figures into the run directory when the run ends
    report: bool = True


@dataclass
class TrackerConf:
    #: an experiment tracker from the ``modulo.trackers`` group (mlflow), or none
    name: Optional[str] = None  # noqa: UP045
    args: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006


@dataclass
class UserConf:
    """The user in the loop (:mod:`modulo.users`): ``user=none`` (default), ``user=scripted user.file=F``,
    ``user=llm`` (a simulator on the run's llm, or on ``user.llm`` overrides of it)."""

    #: a user from the ``modulo.users`` group (scripted, llm), or null for none
    name: Optional[str] = None  # noqa: UP045
    #: user=scripted: the YAML/JSON file of answers and updates
    file: Optional[str] = None  # noqa: UP045
    #: further constructor arguments of the user
    args: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006
    #: user=llm: overrides of the run's llm settings for the simulator (name, model, ...); empty: the run's
    llm: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006
    #: changes applied after a turn, whatever the user: [{after: 2, add: {...}, text: ...}]
    updates: List[Dict[str, Any]] = field(default_factory=list)  # noqa: UP006
    #: questions the user answers per problem (later ones get "no more questions"); null: no limit
    max_questions: Optional[int] = None  # noqa: UP045
    #: whether a question uses up one of metacontroller.max_iterations (true) or is free (false; then
    #: max_questions bounds them, and a question asked past it costs an iteration)
    question_costs_iteration: bool = True
    #: tell the planner it may decline with a reason (ABSTAIN: ...); replies that decline are read as
    #: abstentions either way
    abstain: bool = False


@dataclass
class ModuloConfig:
    benchmark: BenchmarkConf = field(default_factory=BenchmarkConf)
    generator: GeneratorConf = field(default_factory=GeneratorConf)
    reformulator: ReformulatorConf = field(default_factory=ReformulatorConf)
    critics: Any = "all"
    critic_options: CriticOptions = field(default_factory=CriticOptions)
    #: per-critic arguments: {critic_name: {arg: value}}
    critic_args: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # noqa: UP006
    backprompt: BackpromptConf = field(default_factory=BackpromptConf)
    metacontroller: MetacontrollerConf = field(default_factory=MetacontrollerConf)
    llm: LLMConf = field(default_factory=LLMConf)
    cache: CacheConf = field(default_factory=CacheConf)
    run: RunConf = field(default_factory=RunConf)
    #: the benchmark data directory (default: $MODULO_DATA_DIR, else ./data)
    data_dir: Optional[str] = None  # noqa: UP045
    #: free-form labels recorded with the run and printed by reports (method, experiment, ...)
    labels: Dict[str, str] = field(default_factory=dict)  # noqa: UP006
    #: log the finished run (each sweep job) to an experiment tracker: tracker=mlflow
    tracker: TrackerConf = field(default_factory=TrackerConf)
    #: the user in the loop (questions, answers, updates): user=none | scripted | llm
    user: UserConf = field(default_factory=UserConf)


def config_from_dict(data: dict[str, Any]) -> ModuloConfig:
    """A ModuloConfig from its ``dataclasses.asdict`` form (as written to a run's ``config.yaml``).

    Unknown keys are an error (a config written by another version or edited by hand)."""
    import dataclasses

    def build(cls: Any, values: dict[str, Any], where: str) -> Any:
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(names))
        if unknown:
            from .errors import ConfigError

            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            ftype = names[key].type
            sub = _NESTED.get(ftype) if isinstance(ftype, str) else None
            kwargs[key] = build(sub, value or {}, f"{where}.{key}") if sub is not None else value
        return cls(**kwargs)

    return build(ModuloConfig, dict(data), "config")  # type: ignore[no-any-return]


def load_config(path: Any) -> ModuloConfig:
    """The ModuloConfig of a run directory (its ``config.yaml``) or of a YAML file."""
    from pathlib import Path

    import yaml

    file = Path(path)
    if file.is_dir():
        file = file / "config.yaml"
    data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    return config_from_dict(data)


_NESTED: dict[str, Any] = {
    "BenchmarkConf": BenchmarkConf,
    "GeneratorConf": GeneratorConf,
    "ReformulatorConf": ReformulatorConf,
    "CriticOptions": CriticOptions,
    "BackpromptConf": BackpromptConf,
    "MetacontrollerConf": MetacontrollerConf,
    "LLMConf": LLMConf,
    "CacheConf": CacheConf,
    "RunConf": RunConf,
    "TrackerConf": TrackerConf,
    "UserConf": UserConf,
}
