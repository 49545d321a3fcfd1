"""Run directories: resolved config, run info, an append-only record per finished problem, summary.

See the module docstring of :mod:`modulo.runner` for how runs resume. Layout::

    RUN_DIR/config.yaml      the resolved configuration (no secrets)
    RUN_DIR/run.json         run information (:class:`modulo.runinfo.RunInfo`, versioned): benchmark,
                             split, model, critics, strategy, budget, templates, git revision, problem ids
    RUN_DIR/records.jsonl    one ProblemResult per line, appended and fsync'ed as each problem ends
    RUN_DIR/summary.json     outcome counts, usage and the benchmark's metrics (at the end)
    RUN_DIR/evaluation.json  the benchmark evaluator's result on the final plans (at the end)
    RUN_DIR/.lock            held (flock) by the one process writing the run; names it (pid, start)

One writer per run directory: :class:`RunLock` is taken before anything is written (the CLI takes it
before Hydra starts). A second process is refused with the holder's pid and start time; a lock left
by a killed process is released by the kernel with it, so the next run simply takes it over. A run
refused because its configuration differs writes nothing (its ``.hydra/`` files included: they are
handed to :meth:`RunDir.prepare` and written only once the configuration is accepted).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import functools
import itertools
import json
import logging
import math
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from json.encoder import encode_basestring_ascii as _escape_ascii
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

try:  # the standard library's indenting encoder (private: :func:`_long_text_encoder` checks it before use)
    from json.encoder import _make_iterencode  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a Python without it: run.json is written by json.JSONEncoder alone
    _make_iterencode = None

try:
    import orjson
except ImportError:  # pragma: no cover - exercised only where orjson is missing
    orjson = None  # type: ignore[assignment]

from .errors import RunError
from .problems import Spool
from .recordformat import encode_record, record_pieces
from .redact import known as secrets_known
from .redact import redact
from .runinfo import RUN_INFO_FILE, RunInfo, read_run_info
from .types import Outcome, ProblemResult, without_lone_surrogates

log = logging.getLogger("modulo.runs")
RECORDS = "records.jsonl"
RUN_INFO = RUN_INFO_FILE
T = TypeVar("T")


def git_revision(start: Path | None = None) -> str | None:
    """The project's git revision (with ``-dirty`` when the tree has changes), or None outside git."""
    here = start or Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return rev + ("-dirty" if dirty else "")


def read_records(path: Path) -> Iterator[ProblemResult]:
    """Records of a run, in file order, read one line at a time; a truncated or corrupt last line (a
    killed run) is skipped. A damaged line before the last is a RunError naming the file, the line and
    what to do."""
    file = path / RECORDS if path.is_dir() else path
    if not file.exists():
        return
    try:
        fh = file.open("rb")
    except OSError as exc:
        raise RunError(f"{file}: cannot be read ({exc.strerror or exc})") from None
    with fh:
        pending: tuple[int, bytes] | None = None  # the last non-empty line read, parsed once the next is seen
        for n, line in enumerate(fh):
            if not line.strip():
                continue
            if pending is not None:
                yield _record(file, *pending, last=False)
            pending = (n, line)
        if pending is not None:
            try:
                yield _record(file, *pending, last=True)
            except _TornTail:
                return  # the line being written when the run was killed


class _TornTail(Exception):
    pass


def _record(file: Path, n: int, line: bytes, *, last: bool) -> ProblemResult:
    try:
        return ProblemResult.model_validate_json(line)
    except ValueError as exc:
        if last:
            raise _TornTail from None
        what = "is not UTF-8 text" if _not_utf8(line) else f"is not a valid record ({_first_error(exc)})"
        raise RunError(
            f"{file}: line {n + 1} {what}. The records after it are intact; to go on, remove that line "
            f"(for example: sed -i '{n + 1}d' {file}) and resume, which runs the problem again"
        ) from None


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            return f"{first.get('msg')} at {'.'.join(str(p) for p in first.get('loc', ())) or 'top level'}"
        except (IndexError, TypeError, AttributeError):
            pass
    return str(exc).splitlines()[0][:200]


def latest_records(path: Path) -> dict[str, ProblemResult]:
    """The last record of each problem (a resumed run may re-record a problem that errored)."""
    return latest_digests(path, _same)


def latest_digests(path: Path, digest: Callable[[ProblemResult], T]) -> dict[str, T]:
    """``digest`` of the last record of each problem, the records read one at a time (only the digests
    are kept: the runner's resume holds a small digest per finished problem, not its iterations)."""
    out: dict[str, T] = {}
    for r in read_records(path):
        out.pop(r.problem_id, None)  # a re-recorded problem moves to its last place
        out[r.problem_id] = digest(r)
    return out


def _same(record: ProblemResult) -> ProblemResult:
    return record


LOCK_FILE = ".lock"

#: the processes that ran into a run directory (:meth:`RunDir.processes`): which process wrote which record
PROCESSES_FILE = "processes.jsonl"


class RunLockedError(RunError):
    """Another process is writing the run directory."""


class RunLock:
    """The exclusive right to write a run directory (an ``flock`` on ``RUN_DIR/.lock``).

    Re-entrant within a process (the CLI takes it before Hydra starts, the run takes it again).
    ``acquire`` raises :class:`RunError` naming the holder when another process has it."""

    _held: ClassVar[dict[Path, tuple[int, int]]] = {}  # resolved path -> (fd, depth)
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _key(self) -> Path:
        return self.path.resolve()

    def acquire(self) -> RunLock:
        key = self._key()
        with RunLock._guard:
            if key in RunLock._held:
                fd, depth = RunLock._held[key]
                RunLock._held[key] = (fd, depth + 1)
                return self
            if self.path.exists() and not self.path.is_dir():
                raise RunError(f"run.dir={self.path} is not a directory")
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise RunError(f"cannot use {self.path} as a run directory: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunLockedError(
                    f"{self.path} is being written by another modulo process ({holder}); "
                    "wait for it to finish (then resume), or use another run.dir"
                ) from None
            stamp = {"pid": os.getpid(), "host": socket.gethostname(), "started": now_iso(), "argv": sys.argv[1:]}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(stamp).encode(), 0)
            RunLock._held[key] = (fd, 1)
        return self

    def release(self) -> None:
        key = self._key()
        with RunLock._guard:
            if key not in RunLock._held:
                return
            fd, depth = RunLock._held[key]
            if depth > 1:
                RunLock._held[key] = (fd, depth - 1)
                return
            del RunLock._held[key]
            os.close(fd)  # closing releases the flock

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "holder unknown"
    return f"pid {info.get('pid')} on {info.get('host', '?')}, started {info.get('started', '?')}"


class RunDir:
    """A run directory being written. Thread- and task-safe appends, flushed to disk per record.

    ``extra_files`` (relative path -> text; the CLI's ``.hydra/`` files) are written by
    :meth:`prepare` once the configuration is accepted, never before."""

    def __init__(self, path: Path, *, extra_files: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self.extra_files = dict(extra_files or {})
        #: the run's identity across its processes (its directory and when its first process started it),
        #: known once :meth:`prepare_digests` has opened the directory
        self.identity = ""
        self._lock = threading.Lock()

    @property
    def records_path(self) -> Path:
        return self.path / RECORDS

    def prepare(self, info: RunInfo, config_yaml: str) -> dict[str, ProblemResult]:
        """Create or reopen the directory; return the records already finished there (see
        :meth:`prepare_digests` for a reader that keeps less of them)."""
        return self.prepare_digests(info, config_yaml, _same)

    def prepare_digests(self, info: RunInfo, config_yaml: str, digest: Callable[[ProblemResult], T]) -> dict[str, T]:
        """Create or reopen the directory; return ``digest`` of each record already finished there.

        Reopening a directory written with a different configuration is a RunError naming the keys
        that differ, so that records of one experiment never mix with another's. A run.json of an
        earlier version is read through its migration (:mod:`modulo.runinfo`) and rewritten in this one.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        info_path = self.path / RUN_INFO
        info = info.model_copy(update={"run_id": self.path.name})
        if info_path.exists():
            try:
                old = read_run_info(info_path)
            except RunError as exc:
                raise RunError(
                    f"{info_path} is damaged ({exc}); it identifies the run's configuration, so the run cannot be "
                    "resumed safely: start a new run.dir (the records there can still be read by report)"
                ) from None
            differ = old.differences(info)
            if differ:
                raise RunError(
                    f"{self.path} holds a run with another configuration (differs in: {', '.join(differ)}); "
                    "use another run.dir"
                )
            info = info.model_copy(update={"created": old.created or info.created, "legacy": old.legacy})
        self.identity = f"{self.path.resolve()}@{info.created}"
        # info.to_json()'s text (a scripted backend's replies, recorded with its arguments, are megabytes)
        _atomic_write(info_path, _json_pieces(info.model_dump(mode="json"), long_texts=True))
        _atomic_write(self.path / "config.yaml", config_yaml)
        for name, text in self.extra_files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(target, text)
        self._drop_torn_tail()
        return latest_digests(self.path, digest)

    def _drop_torn_tail(self) -> None:
        """Cut a last record line that is not a valid record (half-written by a killed run, or complete
        but damaged), so that the next append starts a fresh line after the last good record. The cut
        bytes are kept in ``records.jsonl.damaged``; the problem is simply run again."""
        path = self.records_path
        if not path.exists():
            return
        start, tail, newline_at_end = _last_line(path)
        if not tail.strip():
            return
        if _valid_record(tail):
            if not newline_at_end:  # a complete record whose newline never reached the disk
                with path.open("ab") as fh:
                    fh.write(b"\n")
                    fh.flush()
                    os.fsync(fh.fileno())
            return
        with (self.path / (RECORDS + ".damaged")).open("ab") as side:
            side.write(tail + b"\n")
        with path.open("r+b") as fh:
            fh.truncate(start)
            fh.flush()
            os.fsync(fh.fileno())
        log.warning("%s: cut an invalid last line (kept in %s.damaged); that problem runs again", path, RECORDS)

    def append(self, result: ProblemResult) -> None:
        self.append_many([result])

    def append_many(self, results: Sequence[ProblemResult]) -> None:
        """Append records in one write and one fsync (a group commit: all of them are on disk on return).
        Each is one line of the compact record format (:mod:`modulo.recordformat`), redacted; the lines
        go out in their pieces (``os.writev``), never copied into one buffer."""
        pieces = [piece for r in results for piece in _line_pieces(r)]
        try:
            with self._lock:
                fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    _write_all(fd, pieces)
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:  # a full disk, a removed directory: stop after the last complete record
            raise RunError(
                f"cannot write {self.records_path} ({exc.strerror or exc}); the run stopped after its last complete "
                "record, and replies already paid for are in the response cache. Free space, then resume"
            ) from None

    def discard_ending(self) -> None:
        """Remove ``summary.json`` and ``evaluation.json`` (the summary first: it says the run ended), which
        describe the run as an earlier process ended it: a run that goes on solving has not ended, and if it
        is stopped before it ends, its directory must not show the earlier figures as the records' own
        (readers then rebuild them from the records)."""
        removed = False
        for name in ("summary.json", "evaluation.json"):
            try:
                (self.path / name).unlink()
            except FileNotFoundError:
                continue
            removed = True
        if removed:
            _fsync_directory(self.path)

    def processes(self) -> list[tuple[str, int]]:
        """The processes that have run into the directory, in order: each one's token and how many records the
        directory held when it started (its records are those from there to the next one's start). Empty for
        a directory written before processes were listed; a line cut by a kill is left out."""
        out: list[tuple[str, int]] = []
        try:
            lines = (self.path / PROCESSES_FILE).read_text(encoding="utf-8").splitlines()
        except (FileNotFoundError, UnicodeDecodeError):
            return out
        for line in lines:
            try:
                entry = json.loads(line)
                out.append((str(entry["process"]), int(entry["records"])))
            except (ValueError, TypeError, KeyError):
                continue
        return out

    def start_process(self, process: str, records: int) -> None:
        """List this process (:meth:`processes`), on disk before it writes a record."""
        path = self.path / PROCESSES_FILE
        created = not path.exists()
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"process": process, "records": records}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if created:
            _fsync_directory(self.path)

    def write_json(self, name: str, data: Any) -> Path:
        target = self.path / name
        _atomic_write(target, _json_pieces(data))
        return target


def record_line(result: ProblemResult) -> bytes:
    """``result`` as one line of ``records.jsonl`` (compact, redacted, with its newline)."""
    return b"".join(_line_pieces(result))


_NEWLINE = b"\n"


def _line_pieces(result: ProblemResult) -> list[bytes | memoryview]:
    """:func:`record_line` in pieces that join into it. A record holding text UTF-8 cannot carry (a lone
    surrogate: a model's tool-call argument or a plan's string written as the JSON escape of half an emoji)
    is written with each such character replaced by U+FFFD, as the LLM client does with reply texts, and a
    warning: one unwritable string must not stop the run that holds it (found only when encoding fails)."""
    try:
        return _encoded_pieces(result)
    except Exception as exc:
        try:
            pieces = _encoded_pieces(ProblemResult.model_validate(_valid_unicode(result.model_dump(mode="python"))))
        except Exception:
            raise exc from None  # not (only) a surrogate: the error of the record as it is
        log.warning("record of problem %s: text that is not valid Unicode replaced by U+FFFD", result.problem_id)
        return pieces


def _valid_unicode(value: Any) -> Any:
    """``value`` (plain data) with each lone surrogate in its strings, keys too, replaced by U+FFFD."""
    if isinstance(value, str):
        return without_lone_surrogates(value)
    if isinstance(value, dict):
        return {_valid_unicode(k): _valid_unicode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_valid_unicode(v) for v in value]
    return value


def _encoded_pieces(result: ProblemResult) -> list[bytes | memoryview]:
    if not secrets_known():
        pieces = record_pieces(result)
        pieces.append(_NEWLINE)
        return pieces
    text = redact(encode_record(result, redact).decode("utf-8"))
    return [text.encode("utf-8"), _NEWLINE]


#: the most pieces one ``os.writev`` takes
_IOV_MAX = max(16, min(os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 1024, 1024))


def _write_all(fd: int, pieces: list[bytes | memoryview]) -> None:
    """Write ``pieces`` to ``fd`` in order, whole (a short write goes on where it stopped)."""
    for start in range(0, len(pieces), _IOV_MAX):
        chunk = pieces[start : start + _IOV_MAX]
        want = sum(len(p) for p in chunk)
        done = os.writev(fd, chunk)
        if done < want:  # rare (a signal, a nearly full disk): the rest as one buffer, until written
            rest = memoryview(b"".join(chunk))[done:]
            while rest:
                rest = rest[os.write(fd, rest) :]


_ERROR_CLASS = re.compile(r"^([A-Za-z_][\w.]*): (.*)$", re.DOTALL)


def split_error(text: str, stop_reason: str = "") -> tuple[str, str]:
    """``"Class: message"`` (how the loop records an exception) as (class, message).

    A critic error recorded without a class prefix reads as ``CriticError``; other text as ``error``.
    """
    match = _ERROR_CLASS.match(text.strip())
    if match:
        return match.group(1), match.group(2)
    return ("CriticError" if stop_reason == "critic_error" else "error"), text.strip()


class _Ended(Protocol):
    """What :func:`error_digest` reads of a problem's end: a ProblemResult or the runner's digest of one."""

    @property
    def problem_id(self) -> str: ...
    @property
    def outcome(self) -> Outcome: ...
    @property
    def stop_reason(self) -> str: ...
    @property
    def error(self) -> str | None: ...


def error_digest(results: Iterable[_Ended]) -> dict[str, Any]:
    """How many problems ended ``error``, and the first one's class and message (summary.json's ``errors``).

    ``{"count": 0}`` when none did; otherwise also ``problem_id``, ``class``, ``message`` of the first
    errored problem (in the order given) and ``problem_ids`` of all of them.
    """
    errored = [r for r in results if r.outcome == Outcome.ERROR]
    if not errored:
        return {"count": 0}
    first = errored[0]
    cls, message = split_error(first.error or "no error message recorded", first.stop_reason)
    return {
        "count": len(errored),
        "problem_id": first.problem_id,
        "class": cls,
        "message": message,
        "problem_ids": [r.problem_id for r in errored],
    }


def _last_line(path: Path, block: int = 1 << 16) -> tuple[int, bytes, bool]:
    """(offset, bytes) of the last line of ``path`` not counting trailing newlines, and whether the file
    ends with a newline; read backwards from the end in blocks (never the whole file)."""
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        data = b""
        pos = size
        while pos > 0:
            step = min(block, pos)
            pos -= step
            fh.seek(pos)
            data = fh.read(step) + data
            body = data.rstrip(b"\n")
            if body and b"\n" in body:
                break
    body = data.rstrip(b"\n")
    cut = body.rfind(b"\n") + 1
    return pos + cut, body[cut:], data.endswith(b"\n")


def _valid_record(line: bytes) -> bool:
    try:
        ProblemResult.model_validate_json(line)
    except ValueError:
        return False
    return True


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _atomic_write(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` (or its pieces, in order) redacted to a temporary file, on disk (fsync), then move it
    over ``path`` and put the move on disk too: after a crash ``path`` holds the old text or the new one,
    never an empty or partial file (a damaged run.json would leave the run's records unresumable)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for piece in [text] if isinstance(text, str) else text:
            fh.write(redact(piece))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_directory(path.parent)


def _fsync_directory(path: Path) -> None:
    """Put a directory's entries (a file moved or created in it) on disk, where the system allows it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse an fsync of a directory: the file's own fsync is what they give
        pass
    finally:
        os.close(fd)


class _StreamedList(list[Any]):
    """A :class:`~modulo.problems.Spool` as the JSON encoder's (pure Python, indenting) list path reads
    it: emptiness and items from the spool, one at a time. Made only inside :func:`_json_pieces`."""

    def __init__(self, items: Spool[Any]) -> None:
        super().__init__()
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)


def _streamed(value: Any) -> Any:
    """The encoder's fallback: a spool of rows is written as a list, read as it is written; anything
    else as its ``str``."""
    return _StreamedList(value) if isinstance(value, Spool) else str(value)


#: the encoder's fragments joined at a time by :func:`_json_pieces` (joined in C, not one by one)
_FRAGMENTS = 512


#: a string at least this long is escaped by orjson where it writes the standard library's bytes (an ASCII
#: text without DEL, which ``json.dumps`` writes as \u007f): several times faster on long texts (a scripted
#: backend's reply lists in run.json: 3.2 MB in 2 ms instead of 8)
_LONG_TEXT = 256


def _escaped(text: str) -> str:
    """``text`` as a JSON string, as ``json.dumps`` (ensure_ascii) writes it."""
    if orjson is not None and len(text) >= _LONG_TEXT and text.isascii() and "\x7f" not in text:
        return orjson.dumps(text).decode("ascii")
    return _escape_ascii(text)


def _float_text(value: float) -> str:
    """A float as ``json.dumps`` (allow_nan) writes it."""
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


class _Encoder(json.JSONEncoder):
    """The standard library's indenting encoder (pure Python) with :func:`_escaped` for its strings: the same
    text (``tests/core/test_runner.py`` compares them on every kind of value)."""

    def iterencode(self, o: Any, _one_shot: bool = False) -> Iterator[str]:
        encode = _make_iterencode(
            {} if self.check_circular else None,
            self.default,
            _escaped,
            self.indent,
            _float_text,
            self.key_separator,
            self.item_separator,
            self.sort_keys,
            self.skipkeys,
            _one_shot,
        )
        fragments: Iterator[str] = encode(o, 0)
        return fragments


#: a sample of what run.json holds, for :func:`_long_text_encoder`'s check
_SAMPLE = {
    "a": ["x" * _LONG_TEXT, '\u00e9\x7f\n"', 1.5, float("nan"), -math.inf, 10**20, None, True],
    "b": {},
    "c": [],
}


@functools.cache
def _long_text_encoder() -> type[json.JSONEncoder]:
    """:class:`_Encoder` where it writes the standard library's text on a sample of every kind of value
    (it builds on the standard library's private ``_make_iterencode``, whose signature another Python may
    change), else ``json.JSONEncoder`` itself: the same text, slower on long strings."""
    if _make_iterencode is None:
        return json.JSONEncoder
    try:
        ours = "".join(_Encoder(indent=1, default=str).iterencode(_SAMPLE))
    except Exception:  # any failure of the private function means: do without it
        return json.JSONEncoder
    return _Encoder if ours == json.dumps(_SAMPLE, indent=1, default=str) else json.JSONEncoder


def _json_pieces(data: Any, size: int = 1 << 20, *, long_texts: bool = False) -> Iterator[str]:
    """``json.dumps(data, indent=1, default=str)`` in pieces of about ``size`` characters, each cut between
    two JSON tokens (a string is never split, so redaction sees every value whole): a large evaluation
    is written without its whole text and the encoder's list of fragments in memory at once.
    ``long_texts``: the data holds long strings (:class:`_Encoder`; a Python call more for each string)."""
    encoder = _long_text_encoder() if long_texts else json.JSONEncoder
    fragments = encoder(indent=1, default=_streamed).iterencode(data)
    buffer: list[str] = []
    held = 0
    while True:
        some = list(itertools.islice(fragments, _FRAGMENTS))
        if not some:
            break
        text = "".join(some)
        buffer.append(text)
        held += len(text)
        if held >= size:
            yield "".join(buffer)
            buffer, held = [], 0
    yield "".join(buffer)
