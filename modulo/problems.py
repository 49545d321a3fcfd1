"""The problems of a run, held in memory or spooled to a temporary file (:class:`ProblemSet`).

A benchmark hands its problems over one at a time (:meth:`~modulo.benchmark.Benchmark.iter_problems`).
A benchmark that streams them (it overrides ``iter_problems``: the synthesized benchmarks read their
JSONL file line by line or generate problem after problem) gets a *spooled* set: one pass over the
stream keeps the selection's ids, and writes each selected problem as a JSON line into an anonymous
temporary file; the run, the evaluation and any later pass read problems back from it one at a time.
Memory then holds the ids and one byte offset per problem, whatever the number of problems. A
benchmark that only implements ``load`` keeps its list in memory, as before.

:class:`Spool` is the same idea for any picklable values (the runner's digests of finished problems,
an evaluation's per-problem rows, a report's records): appended to an anonymous temporary file, read
back one at a time, 8 bytes of memory per value.

Selection (``benchmark.limit``, ``benchmark.ids``) is applied during that pass: a limit stops reading
the stream early; ids are kept in the order given.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from abc import abstractmethod
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any, Generic, TypeVar, overload

from .errors import ConfigError, DataError
from .types import Problem

T = TypeVar("T")


class OnDemand(Sequence[T], Generic[T]):
    """A sequence whose items are made by ``_load(position)`` when used (nothing kept)."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def _load(self, n: int) -> T:
        """The item at position ``n`` (0 <= n < len)."""

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return self._load(range(len(self))[i])  # IndexError, negative indices

    def __iter__(self) -> Iterator[T]:
        for n in range(len(self)):
            yield self._load(n)


class ProblemView(OnDemand[Problem]):
    """A sequence of problems known by their ids (``_ids``), each made by ``_load(position)`` when used."""

    _ids: list[str]

    def __len__(self) -> int:
        return len(self._ids)


class ProblemSet(ProblemView):
    """An ordered, read-only sequence of problems with their ids at hand (``ids``, ``index``).

    Indexing and iteration give :class:`Problem` objects; a spooled set parses each from its
    temporary file on every access (nothing is kept), an in-memory set hands out its own objects.
    """

    def __init__(self, problems: Iterable[Problem] = ()) -> None:
        self._items: list[Problem] | None = list(problems)
        self._ids: list[str] = [p.id for p in self._items]
        self._file: IO[bytes] | None = None
        # 8 bytes a problem each (a list of ints would hold a 28-byte int object per problem besides)
        self._offsets = array("q")
        self._lengths = array("q")
        self._index: dict[str, int] | None = None
        #: ids of problems whose data the benchmark derived itself (``metadata['derived']``)
        self.derived: list[str] = [p.id for p in self._items if p.metadata.get("derived")]

    @classmethod
    def spooled(cls, problems: Iterable[Problem]) -> ProblemSet:
        """A set that writes ``problems`` to an anonymous temporary file as they come (one pass)."""
        out = cls()
        out._items = None
        fh = tempfile.TemporaryFile(prefix="modulo-problems-")  # closed by close(), or with the set
        out._file = fh
        offset = 0
        for p in problems:
            line = p.model_dump_json().encode("utf-8") + b"\n"
            fh.write(line)
            out._ids.append(p.id)
            out._offsets.append(offset)
            out._lengths.append(len(line))
            offset += len(line)
            if p.metadata.get("derived"):
                out.derived.append(p.id)
        fh.flush()
        return out

    @property
    def spooled_to_disk(self) -> bool:
        return self._file is not None

    @property
    def ids(self) -> list[str]:
        """The problems' ids, in order."""
        return self._ids

    def index(self, value: object, start: int = 0, stop: int | None = None) -> int:
        """Position of a problem (or of a problem id) in the set; ValueError when absent."""
        pid = value.id if isinstance(value, Problem) else value
        if self._index is None:
            self._index = {i: n for n, i in enumerate(self._ids)}
        pos = self._index.get(pid) if isinstance(pid, str) else None
        if pos is None or pos < start or (stop is not None and pos >= stop):
            raise ValueError(f"{pid!r} is not in this problem set")
        return pos

    def get(self, problem_id: str) -> Problem:
        return self[self.index(problem_id)]

    def _load(self, n: int) -> Problem:
        if self._items is not None:
            return self._items[n]
        assert self._file is not None
        data = os.pread(self._file.fileno(), self._lengths[n], self._offsets[n])
        return Problem.model_validate_json(data)

    def __iter__(self) -> Iterator[Problem]:
        if self._items is not None:
            yield from self._items
            return
        assert self._file is not None
        with open(self._file.fileno(), "rb", closefd=False) as fh:  # an own position: passes may overlap
            fh.seek(0)
            for _ in self._ids:
                yield Problem.model_validate_json(fh.readline())

    def __contains__(self, value: object) -> bool:
        try:
            self.index(value)
        except ValueError:
            return False
        return True

    def __repr__(self) -> str:
        where = "spooled" if self._file is not None else "in memory"
        return f"<ProblemSet {len(self)} problems, {where}>"

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __del__(self) -> None:
        self.close()


def select_problems(
    problems: Iterable[Problem],
    where: str,
    *,
    limit: int | None = None,
    ids: Sequence[str] | None = None,
    spool: bool = False,
) -> ProblemSet:
    """The problems of ``where`` (``benchmark/split``, for messages) the selection keeps, in a ProblemSet.

    ``ids`` keeps those problems in the order given (an id not found is a ConfigError), else the first
    ``limit`` problems (the stream is not read past them). Duplicate ids in what is read are a
    DataError (each would run and be counted twice). ``spool`` writes them to a temporary file
    instead of keeping them in memory.
    """
    if limit is not None and limit < 0:
        raise ConfigError(f"benchmark.limit must be at least 0, not {limit}")
    seen: Counter[str] = Counter()
    wanted = [str(i) for i in ids] if ids else None

    def chosen() -> Iterator[Problem]:
        if wanted is None:
            for n, p in enumerate(problems):
                if limit is not None and n >= limit:
                    return
                seen[p.id] += 1
                yield p
            return
        keep = set(wanted)
        for p in problems:
            seen[p.id] += 1
            if p.id in keep and seen[p.id] == 1:
                yield p

    picked = ProblemSet.spooled(chosen()) if spool else ProblemSet(chosen())
    duplicates = sorted(pid for pid, n in seen.items() if n > 1)
    if duplicates:
        picked.close()
        raise DataError(
            f"{where} holds duplicate problem ids ({', '.join(duplicates[:5])}"
            + (f" and {len(duplicates) - 5} more" if len(duplicates) > 5 else "")
            + "): each would run and be counted twice; make the ids unique"
        )
    if wanted is None:
        return picked
    missing = [i for i in wanted if i not in seen]
    if missing:
        picked.close()
        raise ConfigError(f"benchmark.ids: {missing} not in {where} (ids look like {list(seen)[:3]})")
    order = list(dict.fromkeys(wanted))[:limit]  # an id given twice runs once, at its first place
    if picked.ids == order:
        picked._ids = order  # the caller's id strings, not a copy of each read from the stream
        return picked
    out = ProblemSet.spooled(picked.get(i) for i in order) if spool else ProblemSet(picked.get(i) for i in order)
    picked.close()
    return out


class Spool(OnDemand[T]):
    """Values appended to an anonymous temporary file (pickled) and read back one at a time: a list
    whose items live on disk, 8 bytes of memory each (their offsets). ``append`` returns the value's
    position; indexing reads one value, iteration reads them in order. A value read back is a copy:
    changing it changes nothing in the spool. The file is deleted when the spool is closed or dropped.

    The first ``in_memory`` bytes stay in memory and the file is made only when they are exceeded: a
    small spool (a report over a sweep of many small runs holds two per run) opens no file.
    """

    def __init__(self, values: Iterable[T] = (), *, prefix: str = "modulo-spool-", in_memory: int = 1 << 18) -> None:
        self._prefix = prefix
        self._limit = in_memory
        self._head: bytearray | None = bytearray()  # the pickled values while they fit in memory
        self._file: IO[bytes] | None = None
        self._starts = array("q")
        self._end = 0
        self._dirty = False
        for value in values:
            self.append(value)

    def append(self, value: T) -> int:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        if self._head is not None and self._end + len(data) > self._limit:
            self._file = tempfile.TemporaryFile(prefix=self._prefix)  # closed by close(), or with the spool
            self._file.write(self._head)
            self._head = None
        if self._head is not None:
            self._head += data
        else:
            assert self._file is not None
            self._file.write(data)
            self._dirty = True
        self._starts.append(self._end)
        self._end += len(data)
        return len(self._starts) - 1

    def _read(self, start: int, end: int) -> bytes:
        if self._head is not None:
            return bytes(self._head[start:end])
        assert self._file is not None
        if self._dirty:
            self._file.flush()
            self._dirty = False
        return os.pread(self._file.fileno(), end - start, start)

    def __len__(self) -> int:
        return len(self._starts)

    def _load(self, n: int) -> T:
        # a positioned read (the file's own position is the writer's): passes may overlap appends
        end = self._starts[n + 1] if n + 1 < len(self._starts) else self._end
        value: T = pickle.loads(self._read(self._starts[n], end))
        return value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Spool of {len(self)} values on disk>"

    def __reduce__(self) -> tuple[Any, ...]:  # a copy (deepcopy, pickle) is a list of the values
        return (list, (list(self),))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __del__(self) -> None:
        self.close()
