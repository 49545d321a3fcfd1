"""A backend that answers from a recorded run, never from a live model.

``llm=replay llm.recording=RUN_DIR`` reads ``RUN_DIR/records.jsonl`` (one
:class:`~modulo.types.ProblemResult` per line) and answers each request with the reply recorded for
exactly the same messages. When the same messages were sent more than once (for example the
generator's and the reformulator's prompts happen to coincide, or a deliberate second sample), the
request's stage (``tags["stage"]``) narrows the choice and successive identical requests get the
recorded replies in their recorded order. The recording may also be a JSONL file of
``{"messages": [...], "reply": "...", "stage": "...", "model": "...", "usage": {...}}`` lines.

A request that is not in the recording raises :class:`~modulo.errors.ReplayMissError`. Replayed
calls cost nothing: the client accounts them like cache hits (``cached=True``, ``cost_usd=0``,
``cached_cost_usd`` = what they would cost now).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError

from ..errors import ConfigError, ReplayMissError
from ..types import LLMCall, Message, ProblemResult, Usage, canonical_json, json_lines
from .base import Capabilities, LLMRequest, LLMResponse, LLMSettings


@dataclass(frozen=True)
class Recorded:
    stage: str
    reply: str
    model: str
    usage: Usage
    finish_reason: str | None


def messages_key(messages: list[Message] | tuple[Message, ...]) -> str:
    return canonical_json([[m.role, m.content] for m in messages])


def _records_file(path: Path) -> Path:
    if path.is_dir():
        file = path / "records.jsonl"
        if not file.is_file():
            raise ConfigError(f"replay backend: {str(path)!r} is a directory without records.jsonl")
        return file
    if not path.is_file():
        raise ConfigError(f"replay backend: recording {str(path)!r} does not exist")
    return path


def _entries(line: dict[str, Any], where: str) -> Iterator[tuple[list[Message], Recorded]]:
    if "iterations" in line and "problem_id" in line:
        result = ProblemResult.model_validate(line)
        for iteration in result.iterations:
            for call in iteration.calls:
                if call.reply is not None:
                    yield call.messages, _from_call(call)
        return
    if "messages" in line and "reply" in line:
        if line["reply"] is None:
            return
        messages = [Message.model_validate(m) for m in line["messages"]]
        usage = Usage.model_validate(line.get("usage") or {})
        yield (
            messages,
            Recorded(
                stage=str(line.get("stage") or ""),
                reply=str(line["reply"]),
                model=str(line.get("model") or ""),
                usage=usage,
                finish_reason=line.get("finish_reason"),
            ),
        )
        return
    raise ConfigError(f"replay backend: {where} is neither a problem record nor a {{messages, reply}} line")


def _from_call(call: LLMCall) -> Recorded:
    assert call.reply is not None
    return Recorded(
        stage=call.stage, reply=call.reply, model=call.model, usage=call.usage, finish_reason=call.finish_reason
    )


def load_recording(path: str | Path) -> dict[str, list[Recorded]]:
    """Every recorded reply, grouped by the exact messages that produced it, in recorded order."""
    file = _records_file(Path(path).expanduser())
    table: dict[str, list[Recorded]] = {}

    def not_json(number: int, exc: ValueError) -> ConfigError:
        return ConfigError(f"replay backend: {file}:{number} is not JSON ({exc})")

    with file.open(encoding="utf-8") as fh:
        for number, line in json_lines(fh, not_json):
            where = f"{file}:{number}"
            if not isinstance(line, dict):
                raise ConfigError(f"replay backend: {where} is not a JSON object")
            try:
                for messages, recorded in _entries(line, where):
                    table.setdefault(messages_key(messages), []).append(recorded)
            except ValidationError as exc:
                raise ConfigError(f"replay backend: {where} does not match the record format: {exc}") from None
    return table


class ReplayBackend:
    """:class:`modulo.llm.base.LLM` answering from a recording; a miss is a ReplayMissError."""

    name = "replay"
    #: answers are recorded, not paid for: the client accounts them like cache hits
    capabilities: ClassVar[Capabilities] = Capabilities(free=True, recorded=True)

    def __init__(self, settings: LLMSettings, *, recording: str | None = None) -> None:
        source = recording or settings.recording
        if not source:
            raise ConfigError("replay backend needs a recording: set llm.recording=RUN_DIR (or a JSONL file)")
        self.settings = settings
        self.source = str(source)
        self._table = load_recording(source)
        self._cursor: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ReplayBackend(recording={self.source!r}, requests={len(self._table)})"

    def __len__(self) -> int:
        return sum(len(v) for v in self._table.values())

    async def complete(self, request: LLMRequest) -> LLMResponse:
        key = messages_key(request.messages)
        candidates = self._table.get(key)
        stage = request.tags.get("stage", "")
        if not candidates:
            preview = request.messages[-1].content[:120].replace("\n", " ") if request.messages else ""
            raise ReplayMissError(
                f"replay: the recording {self.source!r} holds no reply for these messages "
                f"(problem {request.tags.get('problem_id', '?')!r}, stage {stage or '?'!r}, "
                f"{len(request.messages)} messages, last begins {preview!r}); replay never calls a live model"
            )
        staged = [c for c in candidates if c.stage == stage] if stage else []
        pool = staged or candidates
        with self._lock:
            slot = (key, stage if staged else "")
            index = self._cursor.get(slot, 0)
            if index >= len(pool):
                raise ReplayMissError(
                    f"replay: the recording {self.source!r} holds {len(pool)} repl{'y' if len(pool) == 1 else 'ies'} "
                    f"for these messages (problem {request.tags.get('problem_id', '?')!r}, stage {stage or '?'!r}) "
                    f"and all were used; replay never calls a live model"
                )
            self._cursor[slot] = index + 1
        hit = pool[index]
        usage = Usage(input_tokens=hit.usage.input_tokens, output_tokens=hit.usage.output_tokens)
        return LLMResponse(
            text=hit.reply, usage=usage, model=hit.model or request.model, finish_reason=hit.finish_reason
        )

    async def aclose(self) -> None:
        return None
