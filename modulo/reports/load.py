"""Reading run directories: ``run.json``, ``records.jsonl``, ``summary.json`` and ``evaluation.json``.

A run directory is any directory holding ``run.json`` (see the run format notes). A sweep root is any
tree holding such directories (Hydra multirun: ``multirun/<date>/<time>/<job>/``). A run killed before
its end has no ``evaluation.json``; :func:`ensure_evaluation` re-evaluates its best plans with the
benchmark, or marks the run incomplete when the benchmark or its data cannot be had, and says which.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..benchmark import Benchmark, EvalResult, FinalPlan, MetricSpec
from ..errors import ModuloError, RunError
from ..problems import ProblemSet, ProblemView, Spool
from ..recordformat import expand_record
from ..runinfo import RunInfo, read_run_info
from ..runs import error_digest
from ..types import Abstention, Outcome, PlanJSON, Problem, ProblemResult, Usage, Verdict
from ..users import in_force

RUN_FILE = "run.json"
RECORDS_FILE = "records.jsonl"
SUMMARY_FILE = "summary.json"
EVALUATION_FILE = "evaluation.json"

#: how a run's evaluation was obtained
EVAL_RECORDED = "recorded"  # evaluation.json written by the run itself
EVAL_REEVALUATED = "re-evaluated"  # no evaluation.json: best plans re-scored by the benchmark now
EVAL_MISSING = "incomplete"  # no evaluation.json and no way to re-score: numbers left out


class RunInfoView:
    """What a run's ``run.json`` (``info``) says, as every view of a run reads it (:class:`RunData`,
    :class:`modulo.analysis.runs.RunMeta`)."""

    info: RunInfo

    @property
    def benchmark_name(self) -> str:
        return self.info.benchmark.name or "unknown"

    @property
    def split(self) -> str:
        return self.info.benchmark.split


@dataclass
class RunData(RunInfoView):
    """Everything read from one run directory (plus what reports derive and cache on it)."""

    path: Path
    info: RunInfo
    #: finished problems by id, in first-finish order (a problem recorded twice keeps its last record);
    #: a :class:`RecordStore` (on disk) for a report
    records: Mapping[str, ProblemResult]
    summary: dict[str, Any] | None = None
    evaluation: dict[str, Any] | None = None
    evaluation_status: str = EVAL_MISSING
    #: things a reader should know (truncated lines, duplicate records, why an evaluation is missing)
    notes: list[str] = field(default_factory=list)
    #: the usage of the records a later record of the same problem replaced (a retried problem's earlier
    #: attempts, ``run.retry_errors``): their calls were paid too, each once (the run's summary counts every
    #: record), so the run's totals add them to the kept records'
    replaced_usage: Usage = field(default_factory=Usage)
    #: short unique name used in tables (set by :func:`load_runs`)
    name: str = ""
    _benchmark: Benchmark | None = field(default=None, repr=False)
    _benchmark_error: str | None = field(default=None, repr=False)
    _problems: ProblemSet | None = field(default=None, repr=False)
    #: what reports derive from the records once per run and reuse (a pass over a large run's records
    #: reads them all from disk), by name
    derived: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- run.json accessors -----------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.info.run_id or self.path.name

    @property
    def problem_ids(self) -> list[str]:
        return list(self.info.problem_ids) or list(self.records)

    @property
    def finished_ids(self) -> list[str]:
        """Problem ids with a record, in the run's problem order (then any extra ids in record order)."""
        ordered = [i for i in self.problem_ids if i in self.records]
        known = set(ordered)  # once, not per record: this ran in time quadratic in the problems
        return ordered + [i for i in self.records if i not in known]

    @property
    def errored_ids(self) -> list[str]:
        """Finished problems whose outcome is ``error`` (left out of every metric and figure count)."""
        return [i for i in self.finished_ids if outcome_of(self.records, i) == Outcome.ERROR]

    @property
    def skipped_ids(self) -> list[str]:
        """Problems recorded ``skipped``: never started (the run's dollar budget was spent, or it was stopped)."""
        return [i for i in self.finished_ids if outcome_of(self.records, i) == Outcome.SKIPPED]

    @property
    def scored_ids(self) -> list[str]:
        """Finished problems that did not end in error and were not skipped: the ones a metric is computed over."""
        bad = {Outcome.ERROR, Outcome.SKIPPED}
        return [i for i in self.finished_ids if outcome_of(self.records, i) not in bad]

    def errors(self) -> dict[str, Any]:
        """Error count and the first error's class and message (see :func:`modulo.runs.error_digest`)."""
        return error_digest(self.records[i] for i in self.finished_ids)

    @property
    def complete(self) -> bool:
        """Every problem has a record, and none of them is ``skipped`` (a problem that never ran)."""
        return all(i in self.records for i in self.problem_ids) and not self.skipped_ids

    @property
    def status(self) -> str:
        """How the run ended, as every table shows it: ``complete``, or what went wrong (errors, and a run
        killed, cut short or not evaluated: both when both happened)."""
        total = len(self.problem_ids)
        errored = len(self.errored_ids)
        progress = self._progress(total)
        if not errored:
            return progress
        errors = f"errors ({errored} of {total} problems)"
        return errors if progress == "complete" else f"{errors}; {progress}"

    def _progress(self, total: int) -> str:
        finished = sum(1 for i in self.problem_ids if i in self.records)
        skipped = len(self.skipped_ids)
        if skipped and finished == total:  # every problem recorded, some never started (the run's budget)
            return f"partial ({total - skipped}/{total}; {skipped} skipped, never started)"
        if self.evaluation_status == EVAL_MISSING:
            return f"incomplete ({finished}/{total}, not evaluated)"
        if self.evaluation_status == EVAL_REEVALUATED:
            return f"killed ({finished}/{total}), re-evaluated"
        return "complete" if self.complete else f"partial ({finished}/{total})"

    @property
    def model(self) -> str:
        llm = self.info.llm
        if llm is not None:
            return llm.model or llm.name
        return f"{self.info.generator.name} (no LLM)"

    @property
    def critics(self) -> list[str]:
        return list(self.info.critics)

    @property
    def max_iterations(self) -> int | None:
        return self.info.budget.max_iterations

    @property
    def critic_source(self) -> str:
        return self.info.critic_source or "?"

    @property
    def git_revision(self) -> str:
        rev = self.info.git_revision
        if not rev:
            return "unknown"
        text = str(rev)
        return text[:10] + ("-dirty" if text.endswith("-dirty") else "")

    # -- benchmark -----------------------------------------------------------------------------------
    def benchmark(self) -> Benchmark:
        """The run's benchmark, re-created from ``run.json``. Raises RunError with the reason when it cannot be."""
        if self._benchmark is not None:
            return self._benchmark
        if self._benchmark_error is not None:
            raise RunError(self._benchmark_error)
        try:
            self._benchmark = open_benchmark(self.info)
        except RunError as exc:
            self._benchmark_error = str(exc)
            raise
        return self._benchmark

    def benchmark_or_none(self) -> Benchmark | None:
        try:
            return self.benchmark()
        except RunError:
            return None

    def benchmark_error(self) -> str | None:
        self.benchmark_or_none()
        return self._benchmark_error

    def problems(self, ids: Sequence[str] | None = None) -> Sequence[Problem]:
        """The run's problems (``ids`` or all finished ones), each as the updates recorded during its loop
        left it (what its final plan is judged against). The benchmark's problems are selected once; a
        benchmark that streams them is spooled (:class:`~modulo.problems.ProblemSet`), and the sequence
        returned reads each problem when it is used and keeps none, so that scoring a large run holds
        one problem at a time."""
        if self._problems is None:
            bench = self.benchmark()
            wanted = self.finished_ids
            try:
                self._problems = bench.problem_set(self.split, ids=wanted) if wanted else ProblemSet()
            except ModuloError as exc:
                raise RunError(
                    f"{self.path}: cannot load problems of {self.benchmark_name}/{self.split}: {exc}"
                ) from exc
        ids = list(ids) if ids is not None else self.finished_ids
        known = set(self._problems.ids)
        missing = [i for i in ids if i not in known]
        if missing:
            raise RunError(f"{self.path}: problems {missing[:5]} are not in {self.benchmark_name}/{self.split}")
        return _RunProblems(self, self.benchmark(), self._problems, ids)

    def longest_trace(self) -> int:
        """The most iterations any finished problem recorded (0 when none), found once per run."""
        if "longest_trace" not in self.derived:
            self.derived["longest_trace"] = max((len(r.iterations) for r in self.records.values()), default=0)
        longest: int = self.derived["longest_trace"]
        return longest

    def _in_force(self, bench: Benchmark, problem: Problem) -> Problem:
        record = self.records.get(problem.id)
        updates = record.updates if record is not None else []
        return in_force(bench, problem, updates) if updates else problem

    def metric_specs(self) -> list[MetricSpec]:
        """The benchmark's declared metrics; without the benchmark, the keys found in the evaluation."""
        cls = _benchmark_class(self.benchmark_name)
        if cls is not None and cls.metrics:
            return list(cls.metrics)
        keys = list((self.evaluation or {}).get("metrics", {}))
        return [MetricSpec(key=k, label=k) for k in keys]

    def primary_metric(self) -> str:
        cls = _benchmark_class(self.benchmark_name)
        if cls is not None and cls.primary_metric:
            return cls.primary_metric
        return ""

    def best_plans(self, ids: Sequence[str] | None = None) -> list[PlanJSON]:
        """The delivered plan of each problem (none where the planner's last word was to decline, as the run
        scored it, or where it has no record)."""
        ids = list(ids) if ids is not None else self.finished_ids
        return [
            self.records[i].best_plan if i in self.records and decline_at(self.records[i]) is None else None
            for i in ids
        ]

    def declines(self, ids: Sequence[str], budget: int | None = None) -> list[Abstention | None]:
        """Each problem's decline within its first ``budget`` turns (:func:`decline_at`)."""
        return [decline_at(self.records[i], budget) if i in self.records else None for i in ids]


class _RunProblems(ProblemView):
    """Problems of a run by id, read from the selected set on each access (see :meth:`RunData.problems`)."""

    def __init__(self, run: RunData, bench: Benchmark, source: ProblemSet, ids: list[str]) -> None:
        self._run, self._bench, self._source, self._ids = run, bench, source, ids

    def _load(self, n: int) -> Problem:
        return self._run._in_force(self._bench, self._source.get(self._ids[n]))


def _benchmark_class(name: str) -> type[Benchmark] | None:
    from .. import components

    try:
        cls = components.benchmarks.get(name)
    except ModuloError:
        return None
    return cls if isinstance(cls, type) and issubclass(cls, Benchmark) else None


def open_benchmark(info: RunInfo) -> Benchmark:
    """Re-create a run's benchmark from its ``run.json`` (raises RunError with the reason)."""
    from .. import components

    spec = info.benchmark
    name = spec.name
    if not name:
        raise RunError("run.json names no benchmark")
    try:
        cls = components.benchmarks.get(str(name))
    except ModuloError as exc:
        raise RunError(f"benchmark {name!r} is not available: {exc}") from exc
    data_dir = spec.data_dir
    path = Path(data_dir) if data_dir else None
    if path is not None and not path.exists():
        path = None  # the recorded directory is gone here: let the benchmark use its default (MODULO_DATA_DIR)
    args = dict(spec.args)
    try:
        bench: Benchmark = cls(data_dir=path, **args)
    except ModuloError as exc:
        raise RunError(f"benchmark {name!r} could not be created: {exc}") from exc
    except TypeError as exc:
        raise RunError(f"benchmark {name!r} does not accept the recorded arguments {args}: {exc}") from exc
    return bench


# -- finding and reading runs ----------------------------------------------------------------------


def _natural_key(path: Path) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def find_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Every run directory under ``paths`` (a run dir itself, its run.json, or any tree holding run dirs)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_file() and path.name == RUN_FILE:
            path = path.parent
        if not path.exists():
            raise RunError(f"{path}: no such file or directory")
        if not path.is_dir():
            raise RunError(f"{path}: not a run directory (expected a directory holding {RUN_FILE})")
        if (path / RUN_FILE).is_file():
            found.append(path)
            continue
        hits: list[Path] = []
        for root, dirs, files in os.walk(path):
            if RUN_FILE in files:
                hits.append(Path(root))
                dirs[:] = []  # a run directory holds no further runs
            else:
                dirs[:] = [d for d in dirs if not d.startswith(".")]
        if not hits:
            raise RunError(f"{path}: no run directories found (no {RUN_FILE} anywhere below it)")
        found.extend(sorted(hits, key=_natural_key))
    unique: list[Path] = []
    seen: set[Path] = set()
    for p in found:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(value, dict):
        raise RunError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value


class _JSONStream:
    """JSON values read one after another from a text file through a window of it (``raw_decode``)."""

    def __init__(self, fh: Any, chunk: int = 1 << 20) -> None:
        self.fh, self.chunk = fh, chunk
        self.buf, self.pos, self.eof = "", 0, False
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        if self.eof:
            return False
        data = self.fh.read(self.chunk)
        self.eof = not data
        self.buf, self.pos = self.buf[self.pos :] + data, 0
        return bool(data)

    def peek(self) -> str:
        """The next character that is not white space (not consumed); "" at the end of the file."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def char(self) -> str:
        """The next character that is not white space (consumed); "" at the end of the file."""
        c = self.peek()
        self.pos += len(c)
        return c

    def value(self) -> Any:
        """The next whole value (one that ends at the window's edge may go on: read more first)."""
        if not self.peek():
            raise ValueError("the file ends where a value was expected")
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self._more():
                    continue
                raise
            if end == len(self.buf) and self._more():
                continue  # a number cut at the window's edge: read on
            self.pos = end
            return value


def _read_json_rows(path: Path, key: str = "per_problem") -> dict[str, Any] | None:
    """:func:`_read_json` of a JSON object whose ``key`` (a list) is read into a Spool one item at a
    time: memory holds the file's other values and one row, never the list or the file's text. Any
    other shape, or damage, is read (or refused) by :func:`_read_json` as a whole."""
    if not path.is_file():
        return None
    out: dict[str, Any] = {}
    try:
        with path.open(encoding="utf-8") as fh:
            stream = _JSONStream(fh)
            if stream.char() != "{":
                raise ValueError("not an object")
            sep = stream.peek()
            if sep == "}":
                stream.char()
            while sep != "}":
                if sep != '"':
                    raise ValueError("expected a key")
                name = stream.value()
                if stream.char() != ":":
                    raise ValueError("expected ':'")
                if name == key and stream.peek() == "[":
                    stream.char()
                    rows: Spool[Any] = Spool(prefix="modulo-rows-")
                    out[name] = rows
                    while stream.peek() != "]":
                        rows.append(stream.value())
                        item = stream.peek()
                        if item == ",":
                            stream.char()
                            if stream.peek() == "]":
                                raise ValueError("a comma before ']'")
                        elif item != "]":
                            raise ValueError("expected ',' or ']'")
                    stream.char()
                else:
                    out[name] = stream.value()
                sep = stream.char()
                if sep == ",":
                    sep = stream.peek()
                    if sep != '"':
                        raise ValueError("expected a key")
                elif sep != "}":
                    raise ValueError("expected ',' or '}'")
            if stream.char() != "":
                raise ValueError("extra data")
    except (ValueError, UnicodeDecodeError):
        return _read_json(path)  # the whole file, for the reason it cannot be read (or a value after all)
    return out


def iter_records(
    path: Path, notes: list[str] | None = None, *, light: bool = False, only: Collection[str] | None = None
) -> Iterator[ProblemResult]:
    """Records of ``records.jsonl`` one at a time, in file order (a problem recorded twice comes twice).

    A truncated last line (a killed run) is skipped with a note; so is any other unreadable line.
    ``light`` leaves out what no report reads (see :class:`LightReader`); ``only`` parses the records
    of those problem ids alone (the others are skipped unread).
    """
    notes = notes if notes is not None else []
    if not path.is_file():
        return
    parse = LightReader() if light else _full
    wanted = _IdFilter(only) if only is not None else None
    with path.open("rb") as fh:
        previous: bytes | None = None
        number = 0
        for raw in fh:
            if previous is not None and (wanted is None or wanted(previous)):
                rec = _parse_record(parse, previous, number, notes, last=False)
                if rec is not None:
                    yield rec
            number += 1
            previous = raw if raw.strip() else None
        if previous is not None and (wanted is None or wanted(previous)):
            rec = _parse_record(parse, previous, number, notes, last=True)
            if rec is not None:
                yield rec


def _full(raw: bytes) -> ProblemResult:
    return ProblemResult.model_validate_json(raw.decode("utf-8", errors="replace"))


class _IdFilter:
    """Whether a record line may be one of ``ids`` (its leading ``problem_id``, else a full parse)."""

    def __init__(self, ids: Collection[str]) -> None:
        self.ids = set(ids)

    def __call__(self, raw: bytes) -> bool:
        match = _ID_AT_START.match(raw)
        if match is None:
            return True  # not written by modulo's own writer: let the parser decide
        try:
            return str(json.loads(match.group(1))) in self.ids
        except ValueError:
            return True


#: ``model_dump_json`` writes ``problem_id`` first
_ID_AT_START = re.compile(rb'^\{"problem_id":("(?:[^"\\]|\\.)*")')
#: what reports never read of an iteration (the texts: prompts, replies, backprompts, call logs)
LIGHT_DROPPED_ITERATION_KEYS = (
    "prompt",
    "prompt_sha256",
    "raw_reply",
    "plan_sha256",
    "backprompt",
    "calls",
    "timings",
    "tool_use",
)
#: what reports never read of a verdict (its explanation and evidence)
LIGHT_DROPPED_VERDICT_KEYS = ("feedback", "details", "hint")


_SHARED_EMPTIES: dict[str, Any] = {"prompt": [], "calls": [], "timings": {}, "updates": [], "gated": []}


class LightReader:
    """Parses record lines for reports: each iteration without its texts (prompt, reply, backprompt,
    call log, timings, tool steps), each verdict without feedback, details and hint, the record without
    its template labels; equal verdicts, verdict lists, usages, field-name sets, empty lists and short
    strings are shared between records (light records are read, never changed: about 16 KB a problem
    at budget 10 instead of 48 KB). What is kept is what tables, metrics, budget curves and figures
    read (plans, verdict outcomes, usage, outcome, metadata, the turns' acts, answers and updates), so
    a report over a sweep holds a small part of the records' size. ``modulo show`` reads its one
    record in full.
    """

    def __init__(self) -> None:
        self._verdicts: dict[tuple[Any, ...], Verdict] = {}
        self._usages: dict[tuple[Any, ...], Usage] = {}
        self._field_sets: dict[frozenset[str], set[str]] = {}
        #: equal lists of (shared) verdicts, by the ids of their verdicts (kept alive by ``_verdicts``)
        self._verdict_lists: dict[tuple[int, ...], list[Verdict]] = {}

    def __call__(self, raw: bytes) -> ProblemResult:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("a record is a JSON object")
        data.pop("templates", None)
        if "metadata" in data:
            data["metadata"] = _interned(data["metadata"])
        iterations = data.get("iterations")
        for it in iterations if isinstance(iterations, list) else ():
            if isinstance(it, dict):
                for key in LIGHT_DROPPED_ITERATION_KEYS:
                    it.pop(key, None)
        # a compact line's shared verdicts put in place (its texts, dropped above, are never built)
        data = expand_record(data)
        iterations = data.get("iterations")
        for it in iterations if isinstance(iterations, list) else ():
            if not isinstance(it, dict):
                continue
            for key in ("act", "served"):  # one string object for each of a few values, not one per line
                if isinstance(it.get(key), str):
                    it[key] = sys.intern(it[key])
            if "plan" in it:  # plans repeat their short strings (names, times) from iteration to iteration
                it["plan"] = _interned(it["plan"])
            for v in it.get("verdicts") or ():
                if isinstance(v, dict):
                    for key in LIGHT_DROPPED_VERDICT_KEYS:
                        v.pop(key, None)
        rec = ProblemResult.model_validate(data)
        for it in rec.iterations:
            verdicts = [self._verdict(v) for v in it.verdicts]
            it.verdicts = self._verdict_lists.setdefault(tuple(map(id, verdicts)), verdicts)
            it.usage = self._usage(it.usage)
            # the names of the fields the line set (pydantic keeps a set per object, about 2 KB for an
            # iteration): one set shared by every iteration that set the same ones
            fields = it.__pydantic_fields_set__
            object.__setattr__(it, "__pydantic_fields_set__", self._field_sets.setdefault(frozenset(fields), fields))
            # the dropped texts' empty defaults, and empty update and gate lists: one shared object each
            # (light records are read, never changed)
            for key, empty in _SHARED_EMPTIES.items():
                if not it.__dict__.get(key, True):
                    it.__dict__[key] = empty
        return rec

    def _verdict(self, v: Verdict) -> Verdict:
        return self._verdicts.setdefault(_value_key(v), v)

    def _usage(self, u: Usage) -> Usage:
        return self._usages.setdefault(_value_key(u), u)


def _interned(value: Any) -> Any:
    """``value`` (parsed JSON) with its short strings interned: equal ones share one object."""
    if isinstance(value, str):
        return sys.intern(value) if len(value) <= 64 else value
    if isinstance(value, dict):
        return {sys.intern(k): _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value


def _value_key(model: BaseModel) -> tuple[Any, ...]:
    """A hashable key equal for models of equal field values (containers compared by their repr)."""
    return (type(model), *(x if isinstance(x, str | int | float | None) else repr(x) for x in model.__dict__.values()))


def _parse_record(
    parse: Callable[[bytes], ProblemResult], raw: bytes, number: int, notes: list[str], *, last: bool
) -> ProblemResult | None:
    try:
        return parse(raw)
    except ValueError as exc:  # ValidationError and JSONDecodeError are ValueErrors
        if last and not raw.endswith(b"\n"):
            notes.append(f"records.jsonl: skipped a truncated last line (line {number}; the run was killed mid-write)")
        else:
            errors = exc.errors() if isinstance(exc, ValidationError) else []
            first = errors[0] if errors else {"msg": str(exc).splitlines()[0][:200]}
            notes.append(f"records.jsonl: skipped unreadable line {number}: {first.get('msg')}")
        return None


def _read_derived(path: Path, notes: list[str], rows_on_disk: bool = False) -> dict[str, Any] | None:
    """A file derived from the records (summary, evaluation); damaged, it is noted and treated as absent.
    ``rows_on_disk``: its ``per_problem`` list is read into a :class:`~modulo.problems.Spool` one row at
    a time (:func:`_read_json_rows`)."""
    try:
        return _read_json_rows(path) if rows_on_disk else _read_json(path)
    except (RunError, UnicodeDecodeError) as exc:
        notes.append(f"{path.name} is damaged ({exc}); ignored, everything is rebuilt from records.jsonl")
        return None


class RecordStore(Mapping[str, ProblemResult]):
    """A run's records by problem id, kept on disk (a :class:`~modulo.problems.Spool` of parsed records)
    and read back one at a time: memory holds, per problem, where its record lies and its outcome, so
    a report over a large run or a sweep does not grow with the problems. Ordered as
    :func:`read_records` orders its dict; a problem recorded twice keeps its last record. The record
    last read is kept, so asking for it again (``in``, then ``[]``) reads nothing."""

    def __init__(
        self, records: Iterable[ProblemResult] = (), notes: list[str] | None = None, ids: Iterable[str] = ()
    ) -> None:
        #: the usage of the records a later one of the same problem replaced (see :attr:`RunData.replaced_usage`)
        self.replaced_usage = Usage()
        self._spool: Spool[ProblemResult] = Spool(prefix="modulo-records-")
        self._at: dict[str, int] = {}
        self._outcomes = bytearray()  # by spool position: the outcome's index in _OUTCOMES
        self._last: tuple[int, ProblemResult] | None = None
        # the keys are the string objects of ``ids`` (the run's problem ids) where they are among them:
        # one string per problem held, not another read from each record
        same = {i: i for i in ids}
        for rec in records:
            pid = same.get(rec.problem_id, rec.problem_id)
            if pid in self._at:
                if notes is not None:
                    notes.append(f"records.jsonl: problem {pid} recorded more than once; the last record is used")
                self.replaced_usage = self.replaced_usage + self._spool[self._at.pop(pid)].usage
            self._at[pid] = self._spool.append(rec)
            self._outcomes.append(_OUTCOMES.index(rec.outcome))

    def __getitem__(self, problem_id: str) -> ProblemResult:
        k = self._at[problem_id]
        if self._last is None or self._last[0] != k:
            self._last = (k, self._spool[k])
        return self._last[1]

    def __contains__(self, problem_id: object) -> bool:
        return problem_id in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def outcome(self, problem_id: str) -> Outcome:
        """The problem's outcome, without reading its record."""
        return _OUTCOMES[self._outcomes[self._at[problem_id]]]

    def close(self) -> None:
        self._spool.close()


_OUTCOMES = list(Outcome)


def outcome_of(records: Mapping[str, ProblemResult], problem_id: str) -> Outcome:
    """A recorded problem's outcome (a :class:`RecordStore` answers without reading the record)."""
    if isinstance(records, RecordStore):
        return records.outcome(problem_id)
    return records[problem_id].outcome


def read_records(
    path: Path,
    notes: list[str] | None = None,
    *,
    light: bool = False,
    only: Collection[str] | None = None,
    replaced: list[Usage] | None = None,
) -> dict[str, ProblemResult]:
    """Read ``records.jsonl``: skip a truncated last line (a killed run); note other bad lines and skip them.
    ``light`` and ``only``: see :func:`iter_records`; ``replaced`` gets the usage of each record a later one of
    the same problem replaces."""
    notes = notes if notes is not None else []
    records: dict[str, ProblemResult] = {}
    for rec in iter_records(path, notes, light=light, only=only):
        if rec.problem_id in records:
            notes.append(f"records.jsonl: problem {rec.problem_id} recorded more than once; the last record is used")
            old = records.pop(rec.problem_id)
            if replaced is not None:
                replaced.append(old.usage)
        records[rec.problem_id] = rec
    return records


def load_run(
    path: str | Path,
    *,
    with_records: bool = True,
    light: bool = False,
    only: Collection[str] | None = None,
    on_disk: bool = False,
) -> RunData:
    """Read one run directory. Raises RunError when ``run.json`` is missing or unreadable.

    ``with_records=False`` leaves ``records`` empty, for a caller that streams them with
    :func:`iter_records` (and then calls :func:`note_unfinished`). ``light`` reads the records without
    what reports never read (:class:`LightReader`: bounded memory over large sweeps); ``only`` reads
    the records of those problem ids alone (``modulo show``); ``on_disk`` keeps them in a
    :class:`RecordStore` (memory that does not grow with the problems; each record read when used).
    """
    path = Path(path)
    info = read_run_info(path)
    notes: list[str] = []
    migrated = info.migration_note()
    if migrated is not None:
        notes.append(migrated)
    derived = info.derived_problems
    if derived:
        shown = ", ".join(str(d) for d in derived[:8]) + (f" and {len(derived) - 8} more" if len(derived) > 8 else "")
        notes.append(f"{len(derived)} problem(s) carry data the benchmark derived, not official data: {shown}")
    records: Mapping[str, ProblemResult] = {}
    replaced: list[Usage] = []
    if with_records and on_disk:
        records = RecordStore(iter_records(path / RECORDS_FILE, notes, light=light, only=only), notes, info.problem_ids)
        replaced.append(records.replaced_usage)
    elif with_records:
        records = read_records(path / RECORDS_FILE, notes, light=light, only=only, replaced=replaced)
    run = RunData(path=path, info=info, records=records, notes=notes, replaced_usage=sum(replaced, Usage()))
    # a damaged summary or evaluation never hides intact records: they are rebuilt from records.jsonl
    run.summary = _read_derived(path / SUMMARY_FILE, notes)
    run.evaluation = _read_derived(path / EVALUATION_FILE, notes, rows_on_disk=on_disk)
    if run.evaluation is not None:
        run.evaluation_status = EVAL_RECORDED
    if with_records and only is None:
        note_unfinished(run)
    return run


def note_unfinished(run: RunData) -> None:
    if not run.complete:
        skipped = len(run.skipped_ids)
        done = sum(1 for i in run.problem_ids if i in run.records) - skipped
        run.notes.append(
            f"{done} of {len(run.problem_ids)} problems finished"
            + (f"; {skipped} skipped (never started) and left out of every metric" if skipped else "")
        )


def load_runs(
    paths: Iterable[str | Path], *, with_records: bool = True, light: bool = False, on_disk: bool = False
) -> list[RunData]:
    """Find and read every run under ``paths``; give each a short unique display name (``light``,
    ``on_disk``: see :func:`load_run`)."""
    runs = [load_run(p, with_records=with_records, light=light, on_disk=on_disk) for p in find_runs(paths)]
    _assign_names(runs)
    return runs


def _assign_names(runs: list[RunData]) -> None:
    ids = [r.run_id for r in runs]
    if len(set(ids)) == len(ids):
        for r in runs:
            r.name = r.run_id
        return
    # duplicate run ids (sweep job numbers): use the shortest distinguishing path suffix
    parts = [r.path.resolve().parts for r in runs]
    depth = 1
    while depth < max(len(p) for p in parts):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            break
        depth += 1
    for r, p in zip(runs, parts, strict=True):
        r.name = "/".join(p[-depth:])


# -- evaluation ------------------------------------------------------------------------------------


def ensure_evaluation(run: RunData, *, reevaluate: bool = True) -> None:
    """Give a run without ``evaluation.json`` one: re-score its finished problems' best plans, or say why not.

    Problems that ended ``error`` are never scored (not a plan failure, not an abstention). A recorded
    evaluation that still holds rows for errored problems (written before errors were left out) is
    re-scored without them when the benchmark is available, else kept with a note. One that lacks
    finished problems (written by an earlier process of a run resumed since) is re-scored, else left out.
    """
    errored = set(run.errored_ids)
    unscored = errored | set(run.skipped_ids)  # evaluation.json written before skipped problems were left out
    missing: list[str] = []
    if run.evaluation is not None:
        rows = run.evaluation.get("per_problem") or []
        stale = [str(r.get("problem_id")) for r in rows if str(r.get("problem_id")) in unscored]
        scored = {str(r.get("problem_id")) for r in rows}
        missing = [i for i in run.scored_ids if i not in scored]
        if not stale and not missing:
            return
        if not reevaluate and missing:
            run.evaluation, run.evaluation_status = None, EVAL_MISSING
            run.notes.append(
                f"evaluation.json does not score {len(missing)} finished problem(s) (written before the run was "
                "resumed): its metrics are left out (not re-evaluated here)"
            )
            return
        if not reevaluate:
            run.notes.append(
                f"evaluation.json scores {len(stale)} problem(s) that ended in error or were skipped as plan "
                "failures (not re-evaluated here)"
            )
            return
    elif not reevaluate:
        run.evaluation_status = EVAL_MISSING
        run.notes.append("no evaluation.json, and it is not re-evaluated here: the run's metrics are left out")
        return
    ids = run.scored_ids
    if not ids:
        if unscored:
            if run.evaluation is None:
                run.evaluation_status = EVAL_REEVALUATED
            run.evaluation = {"metrics": {}, "per_problem": [], "tables": {}}
            run.notes.append("every finished problem ended in error or was skipped: there is nothing to score")
        else:
            run.evaluation_status = EVAL_MISSING
            run.notes.append("no evaluation.json and no finished problem: nothing to evaluate")
        return
    recorded = run.evaluation is not None
    try:
        bench = run.benchmark()
        result = evaluate_finals(bench, run.problems(ids), run.best_plans(ids), run.declines(ids))
    except (ModuloError, NotImplementedError) as exc:
        if recorded and missing:
            run.evaluation, run.evaluation_status = None, EVAL_MISSING
            run.notes.append(
                f"evaluation.json does not score {len(missing)} finished problem(s) (written before the run was "
                f"resumed) and re-evaluation failed ({exc}); the run's metrics are left out"
            )
            return
        if recorded:
            run.notes.append(f"evaluation.json scores errored or skipped problems and re-evaluation failed ({exc})")
            return
        run.evaluation_status = EVAL_MISSING
        run.notes.append(f"no evaluation.json and re-evaluation failed ({exc}); the run's metrics are left out")
        return
    run.evaluation = eval_result_to_dict(result)
    run.evaluation_status = EVAL_REEVALUATED
    if missing:
        run.notes.append(
            f"evaluation.json did not score {len(missing)} finished problem(s) (written before the run was resumed): "
            f"the {len(ids)} finished problems were re-evaluated by the benchmark for this report"
        )
        return
    if recorded:
        run.notes.append(
            f"evaluation.json scored {len(stale)} errored or skipped problem(s) as plan failures; the {len(ids)} other "
            "finished problems were re-evaluated by the benchmark for this report"
        )
        return
    run.notes.append(
        f"no evaluation.json (the run did not finish): the best plans of the {len(ids)} finished problems "
        f"were re-evaluated by the benchmark for this report"
        + (f" ({len(errored)} errored problem(s) left out)" if errored else "")
    )


def evaluate_plans(bench: Benchmark, problems: Iterable[Problem], plans: Iterable[PlanJSON | None]) -> EvalResult:
    """``bench.evaluate(problems, plans)`` run in a worker thread (its exceptions raised here), the
    problems handed over one at a time (:meth:`~modulo.benchmark.Benchmark.evaluate_stream`).

    Z3, the synthesized benchmarks' evaluator, pays for every context it creates on the main thread
    a cost that grows with the process's heap (about 10 ms at 200 MB, against 0.5 ms in a thread);
    a report holding a sweep's records would pay it for every problem scored.
    """
    return evaluate_pairs(bench, zip(problems, plans, strict=True))


def evaluate_pairs(bench: Benchmark, pairs: Iterable[tuple[Problem, PlanJSON | None]]) -> EvalResult:
    """:func:`evaluate_plans` of (problem, plan) pairs, made one at a time in the worker thread."""
    return _in_worker(bench.evaluate_stream, pairs)


def _in_worker(evaluate: Callable[[Any], EvalResult], items: Any) -> EvalResult:
    """``evaluate(items)`` in a worker thread of its own (see :func:`evaluate_plans`), its exception raised here."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="modulo-evaluate") as pool:
        return pool.submit(evaluate, items).result()


def evaluate_finals(
    bench: Benchmark,
    problems: Iterable[Problem],
    plans: Iterable[PlanJSON | None],
    declines: Iterable[Abstention | None],
) -> EvalResult:
    """:func:`evaluate_plans` with each plan's decline (:attr:`~modulo.benchmark.FinalPlan.abstention`, None
    where the planner did not decline): the benchmark's ``evaluate_final``, as the run scored them, so that a
    decline is told from a problem with no plan read. Made one at a time in the worker thread."""
    finals = (FinalPlan(p, plan, abstention=d) for p, plan, d in zip(problems, plans, declines, strict=True))
    return evaluate_final_stream(bench, finals)


def evaluate_final_stream(bench: Benchmark, finals: Iterable[FinalPlan]) -> EvalResult:
    """``bench.evaluate_final(finals)`` in the worker thread (see :func:`evaluate_plans`), made one at a time."""
    return _in_worker(bench.evaluate_final, finals)


def decline_at(record: ProblemResult, budget: int | None = None) -> Abstention | None:
    """The decline that ends ``record`` within its first ``budget`` turns (None: all of them): the planner's, or
    the benchmark's proof before any turn (:attr:`~modulo.types.ProblemResult.decline`); None when it delivered
    a plan there, or none could be read."""
    found = record.decline
    if found is None or (budget is not None and found.iteration >= budget):
        return None
    return found


def eval_result_to_dict(result: EvalResult) -> dict[str, Any]:
    rows = result.per_problem if isinstance(result.per_problem, Spool) else list(result.per_problem)  # on disk: stays
    return {"metrics": dict(result.metrics), "per_problem": rows, "tables": dict(result.tables)}
