"""``user=scripted``: answers and updates read from a YAML or JSON file. No model is called.

The file::

    default: "I have nothing more to add."     # optional; the reply when no entry matches
    answers:                                   # tried in order, the first match answers
      - match: "budget|how much"               # a regex searched in the question (case-insensitive)
        answer: "At most 800 dollars."
        unnecessary: true                      # mark: the query already said this
      - turn: 1                                # the question asked at turn 1 (0-based)
        answer: "Any weekday works."
      - match: "when|time"
        reveal: window                         # answer with problem.hidden["window"] (see below)
      - match: "room"
        answer: "Room B only."
        add: {room: B}                         # the answer brings a constraint (applied at once)
        text: "Only room B can be used."       # optional: what the update says (default: the answer)
    updates:                                   # scheduled changes, applied after turn `after`
      - {after: 2, add: {max_cost: 500}, text: "The budget is now 500."}
    problems:                                  # per-problem entries, consulted before the ones above
      "p3": {answers: [...], updates: [...], default: "..."}

``reveal: KEY`` answers from the problem's hidden information: a string (or any value) is told as is; a
hidden constraint ``{"text": ..., "add": {...}}`` is told by its text and applied as an update. A
problem without that key gets the default reply. An entry with neither ``answer`` nor ``reveal`` is
refused when the file is read, as is any unknown key, ``add`` beside ``reveal`` (a revealed item brings
its own constraint) and ``text`` without ``add`` (it is the text of the update ``add`` brings).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..types import Problem, ProblemUpdate, UserAnswer
from .base import User, UserContext, UserReply, updates_from

DEFAULT_REPLY = "I have no more information about that."

_ENTRY_KEYS = {"match", "turn", "answer", "reveal", "unnecessary", "add", "text"}


@dataclass(frozen=True)
class _Entry:
    pattern: re.Pattern[str] | None
    turn: int | None
    answer: str | None
    reveal: str | None
    unnecessary: bool | None
    add: dict[str, Any]
    #: what the update ``add`` brings says (None: the answer)
    text: str | None = None

    def matches(self, question: str, turn: int) -> bool:
        if self.turn is not None and self.turn != turn:
            return False
        return self.pattern is None or self.pattern.search(question) is not None


@dataclass
class _Script:
    answers: list[_Entry] = field(default_factory=list)
    updates: list[ProblemUpdate] = field(default_factory=list)
    default: str | None = None


def _entries(items: Any, where: str) -> list[_Entry]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise ConfigError(f"{where} must be a list of answer entries")
    out = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{at} must be a mapping (match/turn, answer/reveal, ...), not {item!r:.60}")
        unknown = sorted(set(item) - _ENTRY_KEYS)
        if unknown:
            raise ConfigError(
                f"{at}: unknown key(s) {', '.join(map(str, unknown))}; keys: {', '.join(sorted(_ENTRY_KEYS))}"
            )
        if item.get("answer") is None and item.get("reveal") is None:
            raise ConfigError(f"{at}: give 'answer' (the text) or 'reveal' (a key of the problem's hidden information)")
        try:
            pattern = re.compile(str(item["match"]), re.IGNORECASE) if item.get("match") is not None else None
        except re.error as exc:
            raise ConfigError(f"{at}.match is not a regular expression: {exc}") from None
        turn = item.get("turn")
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 0):
            raise ConfigError(f"{at}.turn must be an integer >= 0, not {turn!r}")
        add = item.get("add") or {}
        if not isinstance(add, dict):
            raise ConfigError(f"{at}.add must be a mapping of constraints, not {add!r:.60}")
        if add and item.get("reveal") is not None:
            raise ConfigError(f"{at}: 'add' beside 'reveal': a revealed hidden item brings its own constraint")
        if item.get("text") is not None and not add:
            raise ConfigError(f"{at}: 'text' is what the update 'add' brings says; this entry has no 'add'")
        unnecessary = item.get("unnecessary")
        if unnecessary is not None and not isinstance(unnecessary, bool):
            raise ConfigError(f"{at}.unnecessary must be true or false, not {unnecessary!r}")
        out.append(
            _Entry(
                pattern=pattern,
                turn=turn,
                answer=str(item["answer"]) if item.get("answer") is not None else None,
                reveal=str(item["reveal"]) if item.get("reveal") is not None else None,
                unnecessary=unnecessary,
                add=dict(add),
                text=str(item["text"]) if item.get("text") is not None else None,
            )
        )
    return out


def _script(data: Any, where: str) -> _Script:
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping with answers, updates, default")
    unknown = sorted(set(data) - {"answers", "updates", "default", "problems"})
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(map(str, unknown))}; keys: answers, updates, default, problems"
        )
    updates = data.get("updates") or []
    if not isinstance(updates, list):
        raise ConfigError(f"{where}.updates must be a list")
    default = data.get("default")
    return _Script(
        answers=_entries(data.get("answers"), f"{where}.answers"),
        updates=updates_from(updates, f"{where}.updates", source="user"),
        default=str(default) if default is not None else None,
    )


def read_script_file(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML or JSON user script (a ConfigError naming the file when it cannot be read)."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"user=scripted: file {str(file)!r} does not exist (set user.file=PATH)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"user=scripted: cannot read {str(file)!r}: {exc}") from None
    try:
        data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"user=scripted: {str(file)!r} is not valid {'JSON' if file.suffix == '.json' else 'YAML'}: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"user=scripted: {str(file)!r} must hold a mapping (answers, updates, default, problems)")
    return data


def hidden_item(problem: Problem, key: str) -> tuple[str, ProblemUpdate | None] | None:
    """What telling ``problem.hidden[key]`` says, and the update it brings (a hidden constraint); None when
    the problem holds no such item."""
    if key not in problem.hidden:
        return None
    value = problem.hidden[key]
    if isinstance(value, dict) and "text" in value:
        add = value.get("add") or {}
        text = str(value["text"])
        update = ProblemUpdate(add=dict(add), text=text, source="user") if add else None
        return text, update
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text, None


class ScriptedUser(User):
    """Answers and updates from a YAML/JSON file: by pattern or turn, or from the problem's hidden information."""

    name = "scripted"
    description = "answers and updates from a YAML/JSON file (by pattern or turn; reveal: hidden items)"

    def __init__(self, *, file: str | None = None, script: dict[str, Any] | None = None) -> None:
        if (file is None) == (script is None):
            raise ConfigError("user=scripted needs a script: set user.file=PATH (YAML or JSON)")
        data = read_script_file(file) if file is not None else dict(script or {})
        where = f"user file {file}" if file is not None else "user script"
        self.common = _script({k: v for k, v in data.items() if k != "problems"}, where)
        problems = data.get("problems") or {}
        if not isinstance(problems, dict):
            raise ConfigError(f"{where}.problems must map problem ids to {{answers, updates, default}}")
        self.per_problem = {str(pid): _script(entry, f"{where}.problems.{pid}") for pid, entry in problems.items()}

    def _scripts(self, problem: Problem) -> list[_Script]:
        own = self.per_problem.get(problem.id)
        return [own, self.common] if own is not None else [self.common]

    async def answer(self, problem: Problem, question: str, ctx: UserContext) -> UserReply:
        scripts = self._scripts(problem)
        for script in scripts:
            for entry in script.answers:
                if not entry.matches(question, ctx.turn):
                    continue
                if entry.reveal is not None:
                    told = hidden_item(problem, entry.reveal)
                    if told is None:
                        continue  # this problem holds no such item: the next entry, or the default
                    text, update = told
                    return UserReply(
                        UserAnswer(
                            text=entry.answer or text,
                            unnecessary=entry.unnecessary,
                            revealed=[entry.reveal],
                            update=update,
                            user=self.name,
                        )
                    )
                assert entry.answer is not None
                said = entry.text or entry.answer
                update = ProblemUpdate(add=entry.add, text=said, source="user") if entry.add else None
                return UserReply(
                    UserAnswer(text=entry.answer, unnecessary=entry.unnecessary, update=update, user=self.name)
                )
        default = next((s.default for s in scripts if s.default is not None), DEFAULT_REPLY)
        return UserReply(UserAnswer(text=default, user=self.name))

    def scheduled(self, problem: Problem) -> list[ProblemUpdate]:
        return [u for s in self._scripts(problem) for u in s.updates]
