"""A fault-injecting fake LLM provider on 127.0.0.1, for tests and fault drills.

It speaks enough of the OpenAI chat-completions API (``POST /v1/chat/completions``) and the
Anthropic messages API (``POST /v1/messages``) for the official SDKs (non-streaming), answers from a
script or a seeded generator, and injects failures at configured rates or in a fixed order.

In a test::

    with FakeProvider(["first reply", "second reply"], faults=["rate_limit"]) as fake:
        settings = LLMSettings(name="openai", base_url=fake.openai_base_url, model="gpt-4o-mini")
        ...                                   # the first request gets a 429, its retry "first reply"
        assert fake.stats().by_fault["rate_limit"] == 1

From a shell: ``modulo fake-server --port 8000 --rate rate_limit=0.1 --rate server_error=0.05``,
then point ``llm.base_url`` at ``http://127.0.0.1:8000/v1`` (OpenAI) or ``http://127.0.0.1:8000``
(Anthropic). ``GET /_stats`` returns the counters; ``POST /_faults`` with ``{"faults": [...]}``
queues faults; ``POST /_reset`` clears counters.

Replies come from (first match wins):

- a list: consumed in arrival order by every request;
- a dict ``{problem_id: [...], "*": [...]}``: each problem consumes its own list; a problem without an
  entry replays its own copy of ``"*"``. The problem id is read from the ``X-Modulo-Problem-Id``
  header (the backends send it with ``tag_headers=true``) or, failing that, from a
  ``problem_id: ID`` (or ``problem_id=ID``) mention in the messages;
- a callable ``fn(FakeRequest) -> str | dict``;
- a model double (:class:`~modulo.testing.FunctionModel`, :class:`~modulo.testing.ScriptedModel`, or any
  LLM backend): asked with the :class:`~modulo.llm.base.LLMRequest` the request stands for (see
  :func:`model_replies`), so the same double answers in process and over HTTP;
- otherwise a generator seeded by ``seed`` and the request's messages: a JSON instance of the
  requested schema, a JSON object in JSON mode, else a few words. At temperature 0 the reply is a
  function of the request; at a temperature above 0 it samples: the request's ``seed`` (or, without
  one, the request's arrival number) joins the generator's seed, so another seed is another draw.

A script entry is a string, ``{"text": ...}``, or ``{"fault": KIND, "text": ...}`` to inject a fault
at that point of the script (it consumes its entry). ``{"tool_calls": [{"name": N, "arguments": {...}},
...], "text": ...}`` answers with native tool calls (OpenAI ``message.tool_calls``, finish_reason
"tool_calls"; Anthropic ``tool_use`` blocks, stop_reason "tool_use"). A request's ``tools`` (the names
offered) and ``tool_results`` (the results it sends back, in order) are recorded on its FakeRequest.
``{"text": ..., "cached_tokens": N}`` reports N of the prompt's tokens as read from the provider's prompt
cache (OpenAI ``prompt_tokens_details.cached_tokens``; Anthropic ``cache_read_input_tokens``, which its
``input_tokens`` leave out). Faults drawn from ``faults`` (a queue, used
first) or ``fault_rates`` (seeded draws) consume no script entry: a retry gets the reply the faulted
request would have had. :data:`FAULT_KINDS` lists the faults.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import random
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

from ..errors import LLMError
from ..llm.base import LLM, LLMRequest
from ..llm.sampling import WORDS as _WORDS
from ..llm.sampling import sample_from_schema
from ..llm.tokens import approx_tokens

#: every fault the fake provider can inject, with what it does
FAULT_KINDS: dict[str, str] = {
    "rate_limit": "HTTP 429 with Retry-After (seconds) and retry-after-ms",
    "rate_limit_bare": "HTTP 429 without Retry-After",
    "server_error": "HTTP 500",
    "unavailable": "HTTP 503",
    "overloaded": "HTTP 529 (Anthropic's overloaded)",
    "bad_request": "HTTP 400",
    "context_length": "HTTP 400 saying the prompt exceeds the context window",
    "auth": "HTTP 401 that echoes the key it was sent, as a careless server might",
    "auth_echo": "HTTP 401 echoing every header and extra body field sent, raw, URL-encoded and base64",
    "echo": "a 200 reply whose text echoes every header and extra body field sent, raw, URL-encoded and base64",
    "reset": "the connection is reset (TCP RST) before any response",
    "timeout": "no response for hang_s seconds, then the connection is closed",
    "slow": "the normal reply after slow_s seconds",
    "truncated": "the reply cut in half, finish_reason 'length'",
    "empty": "an empty reply",
    "refusal": "a refusal instead of an answer",
    "invalid_json": "text that is not JSON",
    "truncated_json": "JSON cut off half-way, finish_reason 'stop'",
    "ignore_schema": "valid JSON that ignores the requested schema",
    "no_usage": "the normal reply without its usage (no token counts)",
    "garbled": "HTTP 200 whose body is a proxy's HTML error page, labelled JSON",
}

#: faults answered without a reply (they consume no script entry)
TRANSPORT_FAULTS = frozenset(
    {
        "rate_limit",
        "rate_limit_bare",
        "server_error",
        "unavailable",
        "overloaded",
        "bad_request",
        "context_length",
        "auth",
        "auth_echo",
        "reset",
        "timeout",
        "garbled",
    }
)

PROBLEM_HEADER = "x-modulo-problem-id"
_PROBLEM_RE = re.compile(r"\bproblem[_ ]id\s*[:=]\s*[\"']?([A-Za-z0-9_.:/\-]+)")
REFUSAL = "I'm sorry, but I can't help with that request."

Api = Literal["openai", "anthropic"]
ReplyItem = str | Mapping[str, Any]
ReplyFn = Callable[["FakeRequest"], ReplyItem]
ReplyScript = Sequence[ReplyItem] | Mapping[str, Sequence[ReplyItem]] | ReplyFn | None
ReplySource = ReplyScript | LLM


@dataclass
class FakeRequest:
    """What the fake provider understood of one request."""

    index: int
    api: Api
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    #: role/content pairs; Anthropic's system prompt comes first as a system message
    messages: list[dict[str, str]]
    model: str
    problem_id: str | None
    #: the JSON Schema asked for (OpenAI response_format, llama.cpp's form, Anthropic output_config or forced tool)
    schema: dict[str, Any] | None
    json_mode: bool
    #: the forced Anthropic tool's name, when the schema came as a tool
    tool_name: str | None = None
    #: names of the tools offered for native tool calling (the forced answer tool excluded)
    tools: list[str] = field(default_factory=list)
    #: tool results sent back in the request (OpenAI tool messages, Anthropic tool_result blocks), in order
    tool_results: list[str] = field(default_factory=list)
    #: seconds since the provider started (or was reset) when the request arrived
    arrived: float = 0.0
    #: seconds since start when the handler finished with it (reply written, error sent or connection dropped)
    finished: float | None = None
    #: the fault injected into it (None: a normal reply)
    fault: str | None = None
    #: the HTTP status sent (None: no response, as for reset and timeout, or not finished yet)
    status: int | None = None

    @property
    def api_key(self) -> str | None:
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:]
        return self.headers.get("x-api-key")

    @property
    def prompt_tokens(self) -> int:
        return sum(approx_tokens(m["content"]) for m in self.messages)


@dataclass
class FakeStats:
    """Counters since start (or the last reset). ``arrivals`` are seconds since then, in order."""

    requests: int = 0
    by_path: dict[str, int] = field(default_factory=dict)
    by_fault: dict[str, int] = field(default_factory=dict)
    by_status: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    arrivals: list[float] = field(default_factory=list)

    def fault(self, kind: str) -> int:
        return self.by_fault.get(kind, 0)


class _ScriptError(Exception):
    """The script cannot answer this request (exhausted, or no entry for the problem)."""


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return "" if content is None else str(content)


class FakeProvider:
    """The fake provider: start it (or use it as a context manager), point an SDK at :attr:`url`."""

    def __init__(
        self,
        replies: ReplySource = None,
        *,
        faults: Iterable[str | None] = (),
        fault_rates: Mapping[str, float] | None = None,
        seed: int = 0,
        latency_s: float = 0.0,
        slow_s: float = 1.0,
        hang_s: float = 30.0,
        retry_after_s: float = 0.1,
        model: str = "fake-model",
        host: str = "127.0.0.1",
        port: int = 0,
        max_recorded: int = 10_000,
    ) -> None:
        self._check_faults(list(faults) + list(fault_rates or {}))
        rates = dict(fault_rates or {})
        for kind, rate in rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"fault rate for {kind!r} must be within [0, 1], not {rate}")
        if sum(rates.values()) > 1.0 + 1e-9:
            raise ValueError(f"fault rates add up to {sum(rates.values()):.3f} > 1")
        self.replies: ReplyScript = reply_fn(replies) if _is_model(replies) else replies  # type: ignore[arg-type,assignment]
        self.fault_rates = rates
        self.seed = seed
        self.latency_s = latency_s
        self.slow_s = slow_s
        self.hang_s = hang_s
        self.retry_after_s = retry_after_s
        self.model = model
        self.host = host
        self.port = port
        #: the requests received, in arrival order (the latest ``max_recorded`` of them)
        self.requests: list[FakeRequest] = []
        self.max_recorded = max_recorded
        self._serial = 0
        self._queue: deque[str | None] = deque(faults)
        self._rng = random.Random(seed)
        self._cursor: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stats = FakeStats()
        self._t0 = time.monotonic()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._sockets: set[socket.socket] = set()

    @staticmethod
    def _check_faults(kinds: Iterable[str | None]) -> None:
        unknown = sorted({k for k in kinds if k is not None and k != "ok" and k not in FAULT_KINDS})
        if unknown:
            raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(FAULT_KINDS)}")

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        if self._server is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"provider": self})
        server = _Server((self.host, self.port), handler)
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._stop.clear()
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm-provider", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stop.set()
        server.shutdown()
        with self._lock:
            open_sockets = list(self._sockets)
        for sock in open_sockets:  # keep-alive connections would otherwise linger
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    # -- control ------------------------------------------------------------------------------------
    def push_faults(self, *kinds: str | None) -> None:
        """Queue faults for the next requests (``None`` or ``"ok"``: a normal answer)."""
        self._check_faults(kinds)
        with self._lock:
            self._queue.extend(kinds)

    def stats(self) -> FakeStats:
        with self._lock:
            s = self._stats
            return FakeStats(
                requests=s.requests,
                by_path=dict(s.by_path),
                by_fault=dict(s.by_fault),
                by_status=dict(s.by_status),
                in_flight=s.in_flight,
                max_in_flight=s.max_in_flight,
                arrivals=list(s.arrivals),
            )

    def reset_stats(self) -> None:
        with self._lock:
            self._stats = FakeStats()
            self._t0 = time.monotonic()
            self.requests.clear()

    def elapsed(self) -> float:
        """Seconds since the provider started (or its counters were last reset): the clock of ``arrivals``."""
        return time.monotonic() - self._t0

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when the provider was stopped meanwhile."""
        return self._stop.wait(seconds)

    # -- request handling (called from handler threads) --------------------------------------------
    def _arrive(self, path: str) -> None:
        with self._lock:
            s = self._stats
            s.requests += 1
            s.by_path[path] = s.by_path.get(path, 0) + 1
            s.in_flight += 1
            s.max_in_flight = max(s.max_in_flight, s.in_flight)
            s.arrivals.append(time.monotonic() - self._t0)

    def _note(self, fault: str) -> None:
        with self._lock:
            self._stats.by_fault[fault] = self._stats.by_fault.get(fault, 0) + 1

    def _leave(self, status: int | None) -> None:
        with self._lock:
            s = self._stats
            s.in_flight -= 1
            key = str(status) if status is not None else "none"
            s.by_status[key] = s.by_status.get(key, 0) + 1

    def _draw_fault(self) -> str | None:
        with self._lock:
            if self._queue:
                kind = self._queue.popleft()
                return None if kind in (None, "ok") else kind
            if not self.fault_rates:
                return None
            x = self._rng.random()
        acc = 0.0
        for kind in sorted(self.fault_rates):
            acc += self.fault_rates[kind]
            if x < acc:
                return kind
        return None

    def _script_for(self, req: FakeRequest) -> tuple[str, Sequence[ReplyItem]] | None:
        replies = self.replies
        if replies is None or callable(replies):
            return None
        if isinstance(replies, Mapping):
            pid = req.problem_id or ""
            if pid in replies:
                return pid, replies[pid]
            if "*" in replies:
                return pid, replies["*"]
            raise _ScriptError(f"fake provider: no script for problem {pid!r} and no '*' default")
        return "", replies

    def next_item(self, req: FakeRequest, *, consume: bool) -> ReplyItem:
        """The script item (or generated reply) for ``req``; ``consume=False`` peeks."""
        replies = self.replies
        if callable(replies) and not isinstance(replies, Mapping | Sequence):
            return replies(req)
        script = self._script_for(req)
        if script is None:
            return self.generate(req)
        key, items = script
        with self._lock:
            index = self._cursor.get(key, 0)
            if index >= len(items):
                who = f"problem {key!r}" if key else "the script"
                raise _ScriptError(f"fake provider: script exhausted for {who} after {len(items)} replies")
            if consume:
                self._cursor[key] = index + 1
            return items[index]

    def generate(self, req: FakeRequest) -> str:
        """The seeded reply: deterministic in (seed, messages, schema) at temperature 0; at a temperature
        above 0 also in the request's seed (without one, its arrival number: every request a new draw)."""
        parts: list[Any] = [self.seed, req.messages, req.schema]
        temperature = req.body.get("temperature")
        if isinstance(temperature, int | float) and temperature > 0:
            seed = req.body.get("seed")
            parts.append(["sample", seed if isinstance(seed, int) else f"request-{req.index}"])
        digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
        rng = random.Random(digest)
        if req.schema is not None:
            return json.dumps(sample_from_schema(req.schema, rng))
        if req.json_mode:
            return json.dumps({"answer": " ".join(rng.choice(_WORDS) for _ in range(6))})
        return " ".join(rng.choice(_WORDS) for _ in range(12)).capitalize() + "."


def _schema_of(api: Api, body: Mapping[str, Any]) -> tuple[dict[str, Any] | None, bool, str | None]:
    """(schema, json_mode, forced tool name) asked for by the request body."""
    if api == "openai":
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            spec = fmt.get("json_schema") or {}
            return spec.get("schema"), True, None
        if fmt.get("type") == "json_object":
            return fmt.get("schema"), True, None
        return None, False, None
    out_fmt = (body.get("output_config") or {}).get("format") or {}
    if out_fmt.get("type") == "json_schema":
        return out_fmt.get("schema"), True, None
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool":
        for tool in body.get("tools") or []:
            if tool.get("name") == choice.get("name"):
                return tool.get("input_schema"), True, str(choice["name"])
    return None, False, None


def _offered_tools(body: Mapping[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if isinstance(tool, Mapping):
            fn = tool.get("function")
            names.append(str(fn.get("name") if isinstance(fn, Mapping) else tool.get("name")))
    return names


def _tool_results(api: Api, raw_messages: list[Any]) -> list[str]:
    out: list[str] = []
    for m in raw_messages:
        if not isinstance(m, Mapping):
            continue
        if api == "openai" and m.get("role") == "tool":
            out.append(_text_of(m.get("content")))
        elif api == "anthropic" and isinstance(m.get("content"), list):
            for block in m["content"]:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    content = block.get("content")
                    out.append(content if isinstance(content, str) else _text_of(content))
    return out


def _arguments_text(call: Mapping[str, Any]) -> str:
    """A scripted call's arguments as the JSON text OpenAI sends (a string in the script is sent as is)."""
    arguments = call.get("arguments", {})
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _is_model(source: object) -> bool:
    return callable(getattr(source, "complete", None)) and not callable(source)


def reply_fn(source: ReplyFn | LLM) -> ReplyFn:
    """A reply policy as it is, a model double as :func:`model_replies` of it."""
    if _is_model(source):
        return model_replies(source)  # type: ignore[arg-type]
    return source  # type: ignore[return-value]


def llm_request_of(req: FakeRequest) -> LLMRequest:
    """The :class:`LLMRequest` a fake-provider request stands for: its messages, model, sampling
    settings and schema, and as ``tags`` the ``X-Modulo-*`` headers (``X-Modulo-Problem-Id`` ->
    ``problem_id``; the problem id found in the messages when that header is missing)."""
    tags = {k[len("x-modulo-") :].replace("-", "_"): v for k, v in req.headers.items() if k.startswith("x-modulo-")}
    if req.problem_id and "problem_id" not in tags:
        tags["problem_id"] = req.problem_id
    body = req.body
    seed = body.get("seed")
    temperature = body.get("temperature")
    return LLMRequest.model_validate(
        {
            "messages": [m for m in req.messages if m["role"] in ("system", "user", "assistant")],
            "model": req.model,
            "temperature": float(temperature) if isinstance(temperature, int | float) else 0.0,
            "seed": seed if isinstance(seed, int) else None,
            "response_schema": req.schema,
            "structured_output": "schema" if req.schema else "json" if req.json_mode else "off",
            "tags": tags,
        }
    )


def model_replies(model: LLM) -> ReplyFn:
    """A reply policy that asks ``model`` (a model double or any LLM backend). A fault the model raises
    (a scripted ``{"fault": KIND}``) is served as that fault when the provider knows it."""

    def reply(req: FakeRequest) -> ReplyItem:
        try:
            response = asyncio.run(model.complete(llm_request_of(req)))
        except LLMError as exc:
            if exc.fault in FAULT_KINDS:
                return {"fault": exc.fault, "text": ""}
            raise
        if response.tool_calls:
            calls = [{"name": c.name, "arguments": c.arguments} for c in response.tool_calls]
            return {"text": response.text, "tool_calls": calls}
        return response.text

    return reply


def _problem_of(headers: Mapping[str, str], messages: list[dict[str, str]]) -> str | None:
    if headers.get(PROBLEM_HEADER):
        return headers[PROBLEM_HEADER]
    for message in messages:
        found = _PROBLEM_RE.search(message["content"])
        if found:
            return found.group(1)
    return None


#: headers and body fields every client sends; the echo faults repeat everything else
_ORDINARY_HEADERS = frozenset(
    {"host", "content-length", "content-type", "accept", "accept-encoding", "user-agent", "connection"}
)
_ORDINARY_BODY = frozenset(
    {"model", "messages", "temperature", "max_tokens", "max_completion_tokens", "seed", "stop", "response_format"}
    | {"system", "tools", "tool_choice", "output_config", "stream", "metadata"}
)


def _echo(req: FakeRequest) -> str:
    """Every credential-like thing the request carried, in the forms careless servers echo them."""
    values = [v for k, v in req.headers.items() if k not in _ORDINARY_HEADERS and not k.startswith("x-stainless")]
    values += [json.dumps(v) if not isinstance(v, str) else v for k, v in req.body.items() if k not in _ORDINARY_BODY]
    words = {w for v in values for w in [v, *v.split()]}
    forms = []
    for w in sorted(words):
        forms += [w, urllib.parse.quote(w, safe=""), base64.b64encode(w.encode()).decode()]
        forms.append(base64.b64encode(f"user:{w}".encode()).decode())
    return " | ".join(forms)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (killed, timed out) is routine here: no traceback on stderr."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    provider: FakeProvider
    _request: FakeRequest | None = None
    protocol_version = "HTTP/1.1"
    server_version = "modulo-fake-provider/1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return None

    def setup(self) -> None:
        super().setup()
        with self.provider._lock:
            self.provider._sockets.add(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().finish()
        with self.provider._lock:
            self.provider._sockets.discard(self.connection)

    # -- plumbing -----------------------------------------------------------------------------------
    def _send_json(self, status: int, payload: object, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _read_body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:  # the client went away while sending: there is no request to answer
            raise ConnectionAbortedError(f"request body cut off after {len(raw)} of {length} bytes")
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return body if isinstance(body, dict) else None

    def _reset(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        self.close_connection = True

    # -- routes -------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/_stats":
            self._send_json(200, asdict(self.provider.stats()))
        elif path in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [{"id": self.provider.model, "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route GET {path}", "type": "not_found"}})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            body = self._read_body()
        except OSError:  # includes a body cut off by a client that died while sending it
            self.close_connection = True
            return
        if path == "/_reset":
            self.provider.reset_stats()
            self._send_json(200, {"ok": True})
            return
        if path == "/_faults":
            try:
                self.provider.push_faults(*(body or {}).get("faults", []))
            except ValueError as exc:
                self._send_json(400, {"error": {"message": str(exc)}})
                return
            self._send_json(200, {"ok": True})
            return
        api: Api
        if path in ("/v1/chat/completions", "/chat/completions"):
            api = "openai"
        elif path in ("/v1/messages", "/messages"):
            api = "anthropic"
        else:
            self._send_json(404, {"error": {"message": f"no route POST {path}", "type": "not_found"}})
            return
        provider = self.provider
        provider._arrive(path)
        status: int | None = None
        self._request = None
        try:
            status = self._complete(api, path, body)
        finally:
            provider._leave(status)
            if self._request is not None:
                self._request.status = status
                self._request.finished = provider.elapsed()

    def _error(self, api: Api, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> int:
        if api == "openai":
            code = "context_length_exceeded" if kind == "context_length" else kind
            payload: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        else:
            payload = {"type": "error", "error": {"type": kind, "message": message}}
        self._send_json(status, payload, headers)
        return status

    def _complete(self, api: Api, path: str, body: dict[str, Any] | None) -> int | None:
        provider = self.provider
        if body is None:
            provider._note("bad_body")
            return self._error(api, 400, "invalid_request_error", "the request body is not a JSON object")
        req = self._request = self._read_request(api, path, body)
        with provider._lock:
            provider.requests.append(req)
            if len(provider.requests) > provider.max_recorded:
                del provider.requests[: len(provider.requests) - provider.max_recorded]
        if provider.latency_s and provider.wait(provider.latency_s):
            provider._note("stopped")
            return None
        fault = provider._draw_fault()
        item: ReplyItem | None = None
        if fault is None or fault not in TRANSPORT_FAULTS:
            try:
                item = provider.next_item(req, consume=fault is None or fault == "slow")
            except _ScriptError as exc:
                provider._note("script_exhausted")
                return self._error(api, 400, "invalid_request_error", str(exc))
            if isinstance(item, Mapping) and item.get("fault"):
                fault = str(item["fault"])
        provider._note(fault or "ok")
        req.fault = fault
        if fault == "slow" and provider.wait(provider.slow_s):
            return None
        if fault in TRANSPORT_FAULTS:
            return self._transport_fault(api, fault, req)
        calls = item.get("tool_calls") if isinstance(item, Mapping) else None
        if calls:
            return self._reply(api, req, str(item.get("text") or ""), None, tool_calls=list(calls))  # type: ignore[union-attr]
        base = provider.generate(req) if item is None else item if isinstance(item, str) else item.get("text")
        if base is None:
            base = provider.generate(req)
        cached = int(item.get("cached_tokens") or 0) if isinstance(item, Mapping) else 0
        return self._reply(api, req, str(base), None if fault == "slow" else fault, cached_tokens=cached)

    def _read_request(self, api: Api, path: str, body: dict[str, Any]) -> FakeRequest:
        """The request as the provider records and scripts it (numbered in arrival order)."""
        provider = self.provider
        raw_messages = body.get("messages") or []
        messages = [{"role": str(m.get("role", "user")), "content": _text_of(m.get("content"))} for m in raw_messages]
        if api == "anthropic" and body.get("system"):
            messages.insert(0, {"role": "system", "content": _text_of(body["system"])})
        headers = {k.lower(): v for k, v in self.headers.items()}
        schema, json_mode, tool = _schema_of(api, body)
        with provider._lock:
            index = provider._serial
            provider._serial += 1
        return FakeRequest(
            index=index,
            api=api,
            path=path,
            headers=headers,
            body=body,
            messages=messages,
            model=str(body.get("model") or provider.model),
            problem_id=_problem_of(headers, messages),
            schema=schema,
            json_mode=json_mode,
            tool_name=tool,
            tools=[n for n in _offered_tools(body) if n != tool],
            tool_results=_tool_results(api, raw_messages),
            arrived=provider.elapsed(),
        )

    def _transport_fault(self, api: Api, fault: str, req: FakeRequest) -> int | None:
        provider = self.provider
        anthropic = api == "anthropic"
        if fault == "rate_limit":
            wait = provider.retry_after_s
            headers = {"Retry-After": f"{wait:g}", "retry-after-ms": str(int(wait * 1000))}
            kind = "rate_limit_error" if anthropic else "rate_limit_exceeded"
            return self._error(api, 429, kind, "Rate limit reached (fake provider).", headers)
        if fault == "rate_limit_bare":
            kind = "rate_limit_error" if anthropic else "rate_limit_exceeded"
            return self._error(api, 429, kind, "Rate limit reached (fake provider, no Retry-After).")
        if fault == "server_error":
            return self._error(api, 500, "api_error" if anthropic else "server_error", "Internal error (fake).")
        if fault == "unavailable":
            return self._error(api, 503, "api_error" if anthropic else "server_error", "Service unavailable (fake).")
        if fault == "overloaded":
            return self._error(api, 529, "overloaded_error", "Overloaded (fake).")
        if fault == "bad_request":
            return self._error(api, 400, "invalid_request_error", "Invalid request (fake bad_request fault).")
        if fault == "context_length":
            message = (
                "prompt is too long: 250000 tokens > 200000 maximum"
                if anthropic
                else "This model's maximum context length is 8192 tokens; your messages resulted in 9000 tokens."
            )
            return self._error(api, 400, "context_length" if not anthropic else "invalid_request_error", message)
        if fault == "auth":
            return self._error(
                api,
                401,
                "authentication_error",
                f"Incorrect API key provided: {req.api_key}. You can find your API key in your account.",
            )
        if fault == "auth_echo":
            return self._error(api, 401, "authentication_error", f"Unauthorized. You sent: {_echo(req)}")
        if fault == "reset":
            self._reset()
            return None
        if fault == "timeout":
            provider.wait(provider.hang_s)
            self._reset()
            return None
        if fault == "garbled":
            page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
            with contextlib.suppress(OSError):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
            return 200
        raise AssertionError(fault)

    def _reply(
        self,
        api: Api,
        req: FakeRequest,
        text: str,
        fault: str | None,
        *,
        tool_calls: list[Any] | None = None,
        cached_tokens: int = 0,
    ) -> int:
        finish = "stop"
        refusal = False
        if fault == "truncated":
            text, finish = text[: max(1, len(text) // 2)], "length"
        elif fault == "empty":
            text = ""
        elif fault == "refusal":
            text, refusal = REFUSAL, True
        elif fault == "invalid_json":
            text = 'Here is the plan: {"plan": [{"day": 1,, "city": }'
        elif fault == "truncated_json":
            if req.schema is not None:
                try:
                    json.loads(text)
                except json.JSONDecodeError:
                    text = self.provider.generate(req)
            text = text[: max(1, len(text) // 2)]
        elif fault == "echo":
            text = f"Here is what you sent: {_echo(req)}"
        elif fault == "ignore_schema":
            text = json.dumps({"response": "I would rather describe the plan in words.", "confidence": "high"})
        prompt_tokens, completion_tokens = req.prompt_tokens, approx_tokens(text)
        cached_tokens = min(cached_tokens, prompt_tokens)
        with self.provider._lock:
            serial = self.provider._stats.requests
        if api == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            if refusal and req.schema is not None:
                message = {"role": "assistant", "content": None, "refusal": text}
            if tool_calls:
                message = {
                    "role": "assistant",
                    "content": text or None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": f"call_fake{serial}_{i}",
                            "type": "function",
                            "function": {"name": str(c["name"]), "arguments": _arguments_text(c)},
                        }
                        for i, c in enumerate(tool_calls)
                    ],
                }
                finish = "tool_calls"
            payload: dict[str, Any] = {
                "id": f"chatcmpl-fake-{serial}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
            if cached_tokens:
                payload["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
        else:
            stop_reason = {"stop": "end_turn", "length": "max_tokens"}[finish]
            if refusal:
                stop_reason = "refusal"
            content: list[dict[str, Any]] = [{"type": "text", "text": text}]
            if req.tool_name is not None and fault is None:
                try:
                    parsed = json.loads(text)
                except json.JSONDecodeError:
                    parsed = None
                if isinstance(parsed, dict):
                    content = [
                        {"type": "tool_use", "id": f"toolu_fake{serial}", "name": req.tool_name, "input": parsed}
                    ]
                    stop_reason = "tool_use"
            if tool_calls:
                content = [{"type": "text", "text": text}] if text else []
                content += [
                    {
                        "type": "tool_use",
                        "id": f"toolu_fake{serial}_{i}",
                        "name": str(c["name"]),
                        "input": c.get("arguments", {}),
                    }
                    for i, c in enumerate(tool_calls)
                ]
                stop_reason = "tool_use"
            payload = {
                "id": f"msg_fake{serial}",
                "type": "message",
                "role": "assistant",
                "model": req.model,
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": {"input_tokens": prompt_tokens - cached_tokens, "output_tokens": completion_tokens},
            }
            if cached_tokens:
                payload["usage"]["cache_read_input_tokens"] = cached_tokens
        if fault == "no_usage":
            del payload["usage"]
        self._send_json(200, payload)
        return 200
