"""The configuration model: one set of typed classes for the command line and the library.

Each config group is one pydantic model here. The CLI derives Hydra's structured-config schema from
these models mechanically (:mod:`modulo.cli.schema`) and converts the composed config back with
:meth:`ModuloConfig.from_dict`, the one converter that ``modulo run``, sweeps, ``modulo resume``,
a run directory's ``config.yaml`` (:func:`load_config`) and the Python API all go through. Library
code, notebooks and tests build these classes directly and never see Hydra. The backends take the
``llm`` section as it is (:class:`LLMSettings`), the loop the ``metacontroller`` section
(:class:`LoopSettings`).

A wrong key or value is a :class:`InvalidSettings` (a ConfigError) naming the key, with a
did-you-mean for a misspelled key and the allowed values for a choice.

Components are named by registry name plus arguments: ``benchmark.name``, ``generator.name``,
``backprompt.name``, ``llm.name`` and the ``critics`` list. ``critics`` takes critic names and the
presets ``all`` (the benchmark's critics), ``common`` (format + commonsense), ``hard`` (format +
hard) and ``json`` (format only), the subsets of the LLM-Modulo paper's Table 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError
from .types import ProblemUpdate

CRITIC_PRESETS = {
    "all": None,  # every critic the benchmark declares
    "common": ("format", "commonsense"),
    "hard": ("format", "hard"),
    "json": ("format",),
}

#: seconds a critic call may take before it is a recorded critic error (generous default)
DEFAULT_CRITIC_TIMEOUT_S = 120.0


class InvalidSettings(ConfigError, ValueError):
    """A configuration key or value is wrong (also a ValueError, for code that builds settings directly)."""


def _suggest(word: str, known: list[str]) -> list[str]:
    from .registry import suggest

    return suggest(word, known)


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """The field names of the section at ``loc`` (a path of field names from ``model``), or None."""
    current = model
    for part in loc:
        info = current.model_fields.get(str(part))
        sub = info.annotation if info is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return None
        current = sub
    return sorted(current.model_fields)


def _describe(model: type[BaseModel], prefix: str, exc: ValidationError) -> str:
    """One line per problem: the full key, what is wrong, the allowed values or a did-you-mean.
    A value is repeated only where it is a choice or a number (never a string that may be a secret)."""
    lines: list[str] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = ".".join([prefix, *(str(p) for p in loc)] if prefix else [str(p) for p in loc]) or prefix
        kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
        if kind == "extra_forbidden":
            parent, _, name = key.rpartition(".")
            lines.append(str(_unknown_key(parent, name, _fields_at(model, loc[:-1]) or [])))
        elif kind == "literal_error":
            allowed = [a.strip().strip("'") for a in str(ctx.get("expected", "")).replace(" or ", ", ").split(",")]
            lines.append(f"{key} must be one of {', '.join(allowed)}, not {value!r}")
        elif kind in ("greater_than_equal", "greater_than"):
            relation, bound = (
                ("at least", ctx.get("ge")) if kind == "greater_than_equal" else ("more than", ctx.get("gt"))
            )
            lines.append(f"{key} must be {relation} {bound}, not {value!r}")
        elif kind == "value_error" and isinstance(ctx.get("error"), InvalidSettings):
            lines.append(str(ctx["error"]))  # a section's own message: it names its full keys already
        elif kind == "value_error":
            text = str(ctx.get("error", err["msg"]))
            # a nested section's message already names its key: not "user: user: user.x ..." (nor ": ...")
            named = not key or text.startswith(tuple(key + c for c in ".:= ["))
            lines.append(text if named else f"{key}: {text}")
        else:
            lines.append(f"{key}: {err['msg']}")
    return "; ".join(lines)


def _unknown_key(parent: str, name: str, known: list[str]) -> InvalidSettings:
    """The refusal of key ``name`` under ``parent`` (a dotted section, "" at the top), naming the ``known`` keys."""
    hits = _suggest(name, known)
    hint = f" Did you mean {' or '.join(repr(h) for h in hits)}?" if hits else ""
    full = f"{parent}.{name}" if parent else name
    keys = f"Keys of {parent}: " if parent else "Known keys: "
    return InvalidSettings(f"unknown configuration key {full!r}.{hint} {keys}{', '.join(known)}")


def check_override_key(key: str) -> None:
    """Refuse a dotted override key (``metacontroller.max_iteration``) that names no field of a section
    with a fixed set of keys, as :func:`_describe` refuses it in a config file, before Hydra composes
    anything: Hydra's own message says to add the key with ``+``, which would then be refused too.
    A key below a free-form part (``benchmark.*``, ``llm.args.*``, ``critic_args.*``) is not checked."""
    parts = key.split(".")
    current: type[BaseModel] = ModuloConfig
    for depth, part in enumerate(parts):
        if getattr(current, "folds_extra_keys", False):
            return
        info = current.model_fields.get(part)
        if info is None:
            raise _unknown_key(".".join(parts[:depth]), part, sorted(current.model_fields))
        sub = info.annotation
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return
        current = sub


class Section(BaseModel):
    """A config group: unknown keys are refused; a wrong value is an :class:`InvalidSettings`."""

    model_config = ConfigDict(extra="forbid")

    #: the section's key in the configuration (for messages)
    section: ClassVar[str] = ""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidSettings(_describe(type(self), self.section, exc)) from None

    def __setattr__(self, name: str, value: Any) -> None:
        """A key set in Python that the section does not have is refused like a misspelt override
        (values are checked again by ``build_session``)."""
        if not name.startswith("_") and name not in type(self).model_fields:
            raise _unknown_key(self.section, name, sorted(type(self).model_fields))
        super().__setattr__(name, value)


class BenchmarkConf(Section):
    """``benchmark``: which benchmark, split and problems; every other key is a constructor argument
    of the benchmark (``n``, ``seed``, ``shots``, ...), gathered into ``args``."""

    section: ClassVar[str] = "benchmark"
    #: keys besides the fields are the benchmark's own arguments (a config group file lists them at
    #: the top of the node: ``benchmark.n=20``), folded into ``args``
    folds_extra_keys: ClassVar[bool] = True

    name: str = "travelplanner"
    split: str | None = None
    limit: int | None = Field(default=None, ge=1)
    ids: list[str] | None = None
    #: benchmark-specific constructor arguments (n, seed, shots, ...)
    args: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _fold_arguments(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        own = {k: v for k, v in data.items() if k in cls.model_fields and k != "args"}
        args = {k: v for k, v in data.items() if k not in cls.model_fields}
        args.update(data.get("args") or {})
        if own.get("ids") is not None:
            own["ids"] = [str(i) for i in own["ids"]]
        return {**own, "args": args}


class GeneratorConf(Section):
    section: ClassVar[str] = "generator"

    name: str = "llm"
    #: the planner prompt: direct, cot or json (llm generator); auto: json for backends that prefer
    #: schema-constrained output (the small local model), else direct
    prompt: str = "auto"
    args: dict[str, Any] = Field(default_factory=dict)


class ReformulatorConf(Section):
    section: ClassVar[str] = "reformulator"

    #: llm | parser | none | auto (none when the generator is asked for JSON, else llm)
    mode: str = "auto"


class BackpromptConf(Section):
    section: ClassVar[str] = "backprompt"

    name: str = "all"
    args: dict[str, Any] = Field(default_factory=dict)


class CriticOptions(Section):
    section: ClassVar[str] = "critic_options"

    #: strict | official (passed to critics that declare a ``mode`` option)
    mode: Literal["strict", "official"] = "strict"
    #: what failing critics tell the planner: binary (only which constraint failed) | explain (what
    #: failed and where; the paper's default) | hint (plus concrete suggestions, for critics that offer them)
    feedback: str = "explain"
    #: deprecated: hints=true is feedback=hint (still read, with a warning)
    hints: bool | None = None


class MetacontrollerConf(Section):
    """``metacontroller``: the loop's budgets and policies (the sandbox keys are read by the build,
    which runs the sandboxed critics in worker processes)."""

    section: ClassVar[str] = "metacontroller"

    max_iterations: int = Field(default=10, ge=1)
    max_tokens: int | None = Field(default=None, ge=0)
    max_dollars: float | None = Field(default=None, ge=0)
    max_seconds: float | None = Field(default=None, ge=0)
    #: record a crashed critic as a critic error and go on, or stop the run
    on_critic_error: Literal["record", "stop"] = "record"
    check_unsolvable: bool = True
    #: stop early after this many consecutive repeats of an earlier plan (null: never)
    stop_after_repeats: int | None = Field(default=None, ge=1)
    #: seconds a critic call may take before it is a recorded critic error (generous default)
    critic_timeout_s: float = Field(default=DEFAULT_CRITIC_TIMEOUT_S, gt=0)
    #: replies longer than this (characters) are a format error; null: the benchmark's own bound
    max_reply_chars: int | None = Field(default=None, ge=1)
    #: plans with more JSON values than this are a format error; null: the benchmark's own bound
    max_plan_items: int | None = Field(default=None, ge=1)
    #: end a problem with a recorded error when the process holds more resident memory than this (MB)
    max_rss_mb: float | None = Field(default=None, gt=0)
    #: per-critic deadlines in seconds: {critic_name: seconds}
    critic_timeouts: dict[str, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)
    #: a request at temperature 0 that repeats an earlier one of the same problem: stop | temperature | vary
    on_fixed_point: Literal["stop", "temperature", "vary"] = "stop"
    #: on_fixed_point=temperature: the temperatures of the 1st, 2nd, ... repeat of a request
    fixed_point_temperatures: tuple[float, ...] = (0.7, 1.0)
    #: on_fixed_point=vary: how many varied prompts a repeated request may get before the loop stops
    fixed_point_variations: int = Field(default=2, ge=0)
    #: critics run in sandboxed worker processes: a list of names, plugins (every non-built-in), or none
    sandbox: Any = None
    #: the sandbox's per-worker address-space limit (MiB), CPU seconds per call (null: deadline + 1), workers
    sandbox_memory_mb: int = 2048
    sandbox_cpu_s: float | None = None
    sandbox_workers: int = 2
    #: CPU-heavy critics in worker processes: declared (those that declare it, or whose benchmark does),
    #: none (every critic in-process), or a list of critic names
    heavy: Any = "declared"
    #: worker processes for the CPU-heavy critics
    heavy_workers: int = 2
    #: run the critics that declare themselves quick (``inline``) on the event loop's thread, with no hand-off
    #: to a worker; false: every in-process critic in the worker thread, where a hung one can be abandoned
    inline_critics: bool = True

    @field_validator("fixed_point_temperatures")
    @classmethod
    def _positive_temperatures(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(t <= 0 for t in value):
            raise ValueError("every temperature must be above 0")
        return value


class LLMSettings(Section):
    """``llm``: the settings every backend takes (a backend's own arguments go in ``args``)."""

    section: ClassVar[str] = "llm"

    name: str = "scripted"
    model: str = ""
    base_url: str | None = None
    #: name of the environment variable holding the API key (never the key itself)
    api_key_env: str | None = None
    temperature: float = Field(default=0.0, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=6, ge=0)
    #: first backoff wait (seconds); doubles per failed attempt, plus jitter, unless Retry-After says otherwise
    backoff_base_s: float = Field(default=1.0, ge=0)
    #: upper bound on backoff waits (seconds)
    max_backoff_s: float = 60.0
    concurrency: int = Field(default=16, ge=1)
    requests_per_minute: float | None = Field(default=None, gt=0)
    structured_output: Literal["schema", "json", "off"] = "schema"
    #: USD per million input / output tokens; overrides the built-in price table
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    #: scripted backend: a JSON file with a list of replies
    script: str | None = None
    #: replay backend: a run directory to answer from
    recording: str | None = None
    #: backend-specific arguments, checked against the backend's signature
    args: dict[str, Any] = Field(default_factory=dict)


class CacheConf(Section):
    section: ClassVar[str] = "cache"

    #: off | read-write | read-only
    mode: str = "read-write"
    dir: str | None = None


class RunConf(Section):
    section: ClassVar[str] = "run"

    #: the run directory; empty: Hydra's output directory for this job
    dir: str | None = None
    concurrency: int = Field(default=8, ge=1)
    #: a dollar budget for the whole run; problems not started when it is spent are recorded as skipped
    max_dollars: float | None = Field(default=None, ge=0)
    #: re-run problems whose last record is an error or skipped
    retry_errors: bool = True
    progress: bool = True
    #: draw index for every LLM request (another value = a deliberate fresh sample past the cache)
    sample: int = 0
    #: allow oracle critics on a test split (the benchmark authors forbid evaluation cues at test time)
    allow_test_oracle: bool = False
    #: write report.md, CSV tables and the figures into the run directory when the run ends
    report: bool = True
    #: the Python garbage collector's first threshold while the run goes on, its summary and evaluation
    #: included (container objects allocated, net, between two young collections; Python's own default is
    #: 700), restored when the run returns; null keeps the process's setting. A run allocates millions of
    #: short-lived objects: at 700 the collector runs so often that it took about 0.17 ms of CPU per
    #: TravelPlanner iteration, 0.04 ms at 20,000 (benchmarks/iteration_cpu.py). Cyclic garbage then waits
    #: a little longer to be freed (a few MB)
    gc_threshold: int | None = Field(default=20_000, ge=1)


class TrackerConf(Section):
    section: ClassVar[str] = "tracker"

    #: an experiment tracker from the ``modulo.trackers`` group (mlflow), or none
    name: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)


class UserOptions(Section):
    """The user-in-the-loop options the loop itself reads (shared by ``user`` and :class:`LoopSettings`)."""

    #: questions the user answers per problem (later ones get "no more questions"); null: no limit
    max_questions: int | None = Field(default=None, ge=0)
    #: whether a question uses up one of metacontroller.max_iterations (true) or is free (false; then
    #: max_questions bounds them, and a question asked past it costs an iteration)
    question_costs_iteration: bool = True
    #: tell the planner it may decline with a reason (ABSTAIN: ...); replies that decline are read as
    #: abstentions either way
    abstain: bool = False

    @model_validator(mode="after")
    def _free_questions_need_a_limit(self) -> UserOptions:
        if not self.question_costs_iteration and self.max_questions is None:
            raise ValueError(
                "user.question_costs_iteration=false needs user.max_questions: free questions with no limit "
                "could go on forever"
            )
        return self


class UserConf(UserOptions):
    """``user``: the user in the loop (:mod:`modulo.users`): ``user=none`` (default),
    ``user=scripted user.file=F``, ``user=llm`` (a simulator on the run's llm, or on ``user.llm``
    overrides of it)."""

    section: ClassVar[str] = "user"

    #: a user from the ``modulo.users`` group (scripted, llm), or null for none
    name: str | None = None
    #: user=scripted: the YAML/JSON file of answers and updates
    file: str | None = None
    #: further constructor arguments of the user
    args: dict[str, Any] = Field(default_factory=dict)
    #: user=llm: overrides of the run's llm settings for the simulator (name, model, ...); empty: the run's
    llm: dict[str, Any] = Field(default_factory=dict)
    #: changes applied after a turn, whatever the user: [{after: 2, add: {...}, text: ...}]
    updates: list[dict[str, Any]] = Field(default_factory=list)


class LoopSettings(MetacontrollerConf, UserOptions):
    """What the loop (:class:`~modulo.metacontroller.Metacontroller`) reads: the ``metacontroller``
    section and the user options, with the configured updates parsed (built from a configuration by
    :func:`modulo.build.loop_settings`)."""

    #: updates applied after a configured turn to every problem (``user.updates``; each has ``after`` set)
    updates: tuple[ProblemUpdate, ...] = ()

    @field_validator("updates")
    @classmethod
    def _updates_say_when(cls, value: tuple[ProblemUpdate, ...]) -> tuple[ProblemUpdate, ...]:
        missing = [i for i, u in enumerate(value) if u.after is None]
        if missing:
            raise ValueError(f"user.updates[{missing[0]}] needs 'after' (the turn it follows)")
        return value


class ModuloConfig(Section):
    """The whole run configuration."""

    benchmark: BenchmarkConf = Field(default_factory=BenchmarkConf)
    generator: GeneratorConf = Field(default_factory=GeneratorConf)
    reformulator: ReformulatorConf = Field(default_factory=ReformulatorConf)
    critics: Any = "all"
    critic_options: CriticOptions = Field(default_factory=CriticOptions)
    #: per-critic arguments: {critic_name: {arg: value}}
    critic_args: dict[str, dict[str, Any]] = Field(default_factory=dict)
    backprompt: BackpromptConf = Field(default_factory=BackpromptConf)
    metacontroller: MetacontrollerConf = Field(default_factory=MetacontrollerConf)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    cache: CacheConf = Field(default_factory=CacheConf)
    run: RunConf = Field(default_factory=RunConf)
    #: the benchmark data directory (default: $MODULO_DATA_DIR, else ./data)
    data_dir: str | None = None
    #: free-form labels recorded with the run and printed by reports (method, experiment, ...)
    labels: dict[str, str] = Field(default_factory=dict)
    #: log the finished run (each sweep job) to an experiment tracker: tracker=mlflow
    tracker: TrackerConf = Field(default_factory=TrackerConf)
    #: the user in the loop (questions, answers, updates): user=none | scripted | llm
    user: UserConf = Field(default_factory=UserConf)

    @field_validator("labels", mode="before")
    @classmethod
    def _labels_as_text(cls, value: Any) -> Any:
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else value

    @field_validator("critic_args", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModuloConfig:
        """The configuration from plain data: a composed Hydra config (as a container), a run's
        ``config.yaml``, or a dict written by hand. Null sections take their defaults."""
        values = {k: v for k, v in dict(data).items() if not (v is None and k in _SECTIONS)}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise InvalidSettings(_describe(cls, "", exc)) from None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (what ``config.yaml`` holds; :meth:`from_dict` reads it back)."""
        return self.model_dump(mode="json")


_SECTIONS = {
    name
    for name, info in ModuloConfig.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
}


def config_from_dict(data: dict[str, Any]) -> ModuloConfig:
    """A ModuloConfig from plain data (see :meth:`ModuloConfig.from_dict`)."""
    return ModuloConfig.from_dict(data)


def load_config(path: str | Path) -> ModuloConfig:
    """The ModuloConfig of a run directory (its ``config.yaml``) or of a YAML file."""
    import yaml

    file = Path(path)
    if file.is_dir():
        file = file / "config.yaml"
    data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    return ModuloConfig.from_dict(data)
