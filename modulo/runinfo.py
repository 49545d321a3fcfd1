"""``run.json``: what a run was asked, what it resolved to, and where it came from, as a typed model.

Written in one place (:meth:`modulo.runs.RunDir.prepare`, from :func:`modulo.build.run_info`) and
read in one place (:func:`read_run_info`): reports, ``show``, ``view``, ``resume``, the analysis
frames and the trackers all take a :class:`RunInfo`. The file carries a ``version``:

* version 2 (this one): every section typed; ``version`` names the format.
* format 1 (written before run.json had a version: ``"format": 1`` and no ``version``): read
  through :func:`migrate`, which fills each section that old runs did not record with what the code
  of the time did implicitly (no user in the loop, the ``stop`` fixed-point policy, no sandbox), so
  an old run reports, shows, views and resumes like a new one. Keys that format 1 had and version 2
  does not know are kept under ``legacy``.

A run.json of a newer version than this modulo reads is a RunError saying so (upgrade modulo),
never a guess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from .errors import RunError

#: the run.json version this modulo writes
RUN_INFO_VERSION = 2
RUN_INFO_FILE = "run.json"

#: keys that may change between a run and its resumption without invalidating its records
#: (``critics_requested`` is a label: ``critics=hard`` and ``critics=[format,h_max]`` may run the same
#: critics; ``heavy``, the critics run in the worker pool, changes where critics run, not what they say)
RESUMABLE_KEYS = frozenset(
    {
        "version",
        "created",
        "run_id",
        "git_revision",
        "modulo_version",
        "execution",
        "heavy",
        "critics_requested",
        "legacy",
    }
)


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BenchmarkInfo(_Part):
    name: str
    split: str = ""
    #: the benchmark's constructor arguments (``benchmark.*`` besides name, split, limit, ids)
    args: dict[str, Any] = Field(default_factory=dict)
    #: the data directory the run read (None: the benchmark needs none)
    data_dir: str | None = None


class GeneratorInfo(_Part):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    #: the template role it planned with (direct, cot, json, ...)
    prompt_role: str | None = None


class ComponentInfo(_Part):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class LLMInfo(BaseModel):
    """The run's ``llm`` settings (secrets redacted); the backend's name and model typed, the rest kept."""

    model_config = ConfigDict(extra="allow")

    name: str
    model: str = ""
    temperature: float | None = None


class CriticOptionsInfo(_Part):
    mode: str = "strict"
    #: None in runs from before feedback levels (their ``hints`` says hint or explain)
    feedback: str | None = None
    hints: bool | None = None


class BudgetInfo(_Part):
    max_iterations: int
    max_tokens: int | None = None
    max_dollars: float | None = None
    max_seconds: float | None = None


class LoopInfo(_Part):
    """The loop's settings besides the budget that decide a problem's outcome: whether a proof of
    unsolvability ends it, the stop after repeated plans, and the bounds past which a reply or a plan
    is a format error."""

    check_unsolvable: bool = True
    stop_after_repeats: int | None = None
    max_reply_chars: int | None = None
    max_plan_items: int | None = None


class FixedPointInfo(_Part):
    on_fixed_point: str = "stop"
    temperatures: list[float] = Field(default_factory=lambda: [0.7, 1.0])
    variations: int = 2


class UserInfo(_Part):
    """Who answered the planner's questions and which updates were configured (no user: the defaults)."""

    name: str | None = None
    file: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    llm: dict[str, Any] | None = None
    llm_model: str | None = None
    updates: list[dict[str, Any]] = Field(default_factory=list)
    max_questions: int | None = None
    question_costs_iteration: bool = True
    abstain: bool = False


class SandboxInfo(_Part):
    critics: list[str] = Field(default_factory=list)
    memory_mb: int = 2048
    cpu_s: float | None = None
    workers: int = 2


class HeavyInfo(_Part):
    """CPU-heavy critics run in a pool of worker processes, and the pool's size."""

    critics: list[str] = Field(default_factory=list)
    workers: int = 1


class ExecutionInfo(_Part):
    concurrency: int = 8
    run_max_dollars: float | None = None


class RunInfo(_Part):
    """The content of ``run.json``."""

    version: int = RUN_INFO_VERSION
    #: the run directory's name when it was written
    run_id: str = ""
    created: str = ""
    modulo_version: str | None = None
    git_revision: str | None = None
    benchmark: BenchmarkInfo
    generator: GeneratorInfo
    #: llm | parser | none
    reformulator: str = "llm"
    #: None: the run called no model (a search generator, no reformulation)
    llm: LLMInfo | None = None
    #: the critics that ran, in order
    critics: list[str] = Field(default_factory=list)
    #: the ``critics`` request as given (presets and names), so that reports name a run by what was asked
    critics_requested: list[str] | None = None
    critic_options: CriticOptionsInfo = Field(default_factory=CriticOptionsInfo)
    #: the feedback level that ran, and each critic's own (``critic_args.NAME.feedback`` may set one apart)
    feedback: str | None = None
    critic_feedback: dict[str, str] = Field(default_factory=dict)
    critic_args: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: where the critics come from (oracle, derived, ...; ``+``-joined), ``none`` without critics
    critic_source: str = "?"
    #: where critics that are not hand-written came from (an LLM-extracted critic: the constraint it stands
    #: for, ``reference``: the built-in it may be compared with, the model, its gate report)
    critic_provenance: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: critics run as untrusted code (always sandboxed)
    untrusted_critics: list[str] = Field(default_factory=list)
    backprompt: ComponentInfo = Field(default_factory=lambda: ComponentInfo(name="all"))
    budget: BudgetInfo
    fixed_point: FixedPointInfo = Field(default_factory=FixedPointInfo)
    #: None: a run.json written before these were recorded (what the run used is unknown, so a resumption
    #: is not compared on them)
    loop: LoopInfo | None = None
    user: UserInfo = Field(default_factory=UserInfo)
    sample: int = 0
    allow_test_oracle: bool = False
    labels: dict[str, str] = Field(default_factory=dict)
    #: every template the loop used: role -> id@version#sha
    templates: dict[str, str] = Field(default_factory=dict)
    problem_ids: list[str] = Field(default_factory=list)
    execution: ExecutionInfo = Field(default_factory=ExecutionInfo)
    #: problems whose data the benchmark derived itself rather than read from the official data
    derived_problems: list[str] = Field(default_factory=list)
    #: the critics run in sandboxed worker processes and their limits (None: all in-process)
    sandbox: SandboxInfo | None = None
    #: the critics run in the heavy-critic worker pool (None: none)
    heavy: HeavyInfo | None = None
    #: keys of an older run.json that this version does not know, kept as they were
    legacy: dict[str, Any] = Field(default_factory=dict)

    _arg_defaults: dict[str, Any] = PrivateAttr(default_factory=dict)
    _migrated_from: str | None = PrivateAttr(default=None)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1, default=str)

    def identity(self) -> dict[str, Any]:
        """What must match for a run directory to be resumed: everything but identity, time and labels
        of the request (:data:`RESUMABLE_KEYS`)."""
        return {k: v for k, v in self.model_dump(mode="json").items() if k not in RESUMABLE_KEYS}

    def differences(self, other: RunInfo) -> list[str]:
        """The top-level keys whose content differs between two runs' identities.

        The benchmark's arguments are compared with the benchmark's declared defaults filled in (see
        :attr:`arg_defaults`): an argument a newer benchmark added, recorded at its default, is the
        behaviour an older run had without it, not another configuration."""
        mine, theirs = self.identity(), other.identity()
        defaults = self._arg_defaults or other._arg_defaults
        for side in (mine, theirs):
            side["benchmark"] = {**side["benchmark"], "args": {**defaults, **side["benchmark"]["args"]}}
        if mine.get("loop") is None or theirs.get("loop") is None:  # not recorded by the older one
            mine.pop("loop", None)
            theirs.pop("loop", None)
        return sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))

    @property
    def arg_defaults(self) -> dict[str, Any]:
        """The benchmark constructor's default arguments (JSON values; known to a run being built, not
        written to run.json)."""
        return dict(self._arg_defaults)

    @property
    def migrated_from(self) -> str | None:
        """The older run.json format this was read from through :func:`migrate` (``"format 1"``), or None
        when the file was written in the current version (never written to run.json: a resumed run's
        run.json is rewritten in the current version)."""
        return self._migrated_from

    def migration_note(self) -> str | None:
        """What a report says about a run.json read through the migration (None: it was not)."""
        if self._migrated_from is None:
            return None
        return (
            f"run.json was written by an earlier modulo ({self._migrated_from}) and read through the migration "
            f"to version {RUN_INFO_VERSION}: what that format did not record (the user in the loop, the "
            "fixed-point policy, the sandbox, the execution settings) is shown as the code of the time ran it"
        )

    def with_arg_defaults(self, defaults: dict[str, Any]) -> RunInfo:
        """This run information, knowing the benchmark's default arguments (see :meth:`differences`)."""
        out = self.model_copy()
        out._arg_defaults = json.loads(json.dumps(defaults, default=str))
        return out


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A run.json of any older version as version-:data:`RUN_INFO_VERSION` data (see the module notes)."""
    if data.get("version") in (None, 1):
        fmt = data.get("format", 1)
        if fmt != 1:
            raise RunError(f"run.json format {fmt!r} is not one this modulo knows (it reads format 1 and versions 1-2)")
        known = set(RunInfo.model_fields)
        out = {k: v for k, v in data.items() if k in known and k != "format"}
        legacy = {k: v for k, v in data.items() if k not in known and k != "format"}
        for key in ("fixed_point", "user", "execution", "backprompt", "sandbox", "heavy"):
            if out.get(key) is None:
                out.pop(key, None)  # the model's default: what format-1 code did without the setting
        if out.get("critic_options") is None:
            out.pop("critic_options", None)
        if legacy:
            out["legacy"] = legacy
        out["version"] = RUN_INFO_VERSION
        return out
    return data


def parse_run_info(data: Any, where: str = RUN_INFO_FILE) -> RunInfo:
    """A :class:`RunInfo` from run.json's parsed content, migrated from an older version when needed."""
    if not isinstance(data, dict):
        raise RunError(f"{where}: a JSON {type(data).__name__}, not an object")
    version = data.get("version")
    if isinstance(version, int) and version > RUN_INFO_VERSION:
        raise RunError(
            f"{where} is run.json version {version}, written by a newer modulo; this one reads versions up to "
            f"{RUN_INFO_VERSION}. Upgrade modulo to read this run"
        )
    if version is not None and not isinstance(version, int):
        raise RunError(f"{where}: 'version' is {version!r}, not a version number")
    try:
        info = RunInfo.model_validate(migrate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "top level"
        raise RunError(
            f"{where} is not a valid run.json ({exc.error_count()} problem(s); first: {loc}: {first['msg']})"
        ) from None
    if version in (None, 1):
        info._migrated_from = f"format {data.get('format', 1)}" if version is None else "version 1"
    return info


def read_run_info(path: str | Path) -> RunInfo:
    """The :class:`RunInfo` of a run directory (or of a run.json file). RunError when missing or damaged."""
    file = Path(path)
    if file.is_dir():
        file = file / RUN_INFO_FILE
    elif not file.exists() and file.name != RUN_INFO_FILE:  # a mistyped directory, not its parent, is named
        raise RunError(f"{file}: no such file or directory")
    try:
        data = json.loads(file.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise RunError(f"{file.parent}: no {RUN_INFO_FILE}; not a run directory") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunError(f"{file}: not readable JSON ({exc})") from None
    return parse_run_info(data, str(file))
