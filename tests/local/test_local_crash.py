"""A llama.cpp build that cannot run here stops the run at once and says why (issue 11).

The machine these tests run on may not reproduce the native-build crash (it needs a CPU with AMX), so a
stand-in ``llama_cpp`` package, put first on PYTHONPATH, plays the server: it answers /v1/models like
llama.cpp's server and kills itself with the signal named in $FAKE_SIGNAL on the completion numbered
$FAKE_CRASH_AT (counted per process; 1 is the probe). Its ``llama_print_system_info`` reports
$FAKE_SYSINFO. Nothing here needs the real llama-cpp-python.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from modulo.errors import ConfigError, TransientLLMError
from modulo.llm import local
from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.local import (
    REINSTALL_SERVER,
    LocalBackend,
    ServerCounter,
    ServerCrashError,
    incompatible_build,
)
from modulo.types import Message

from .local_support import REPO, kill_if_alive, wait_gone

PORTABLE_INFO = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 0 | LLAMAFILE = 1 |"
NATIVE_INFO = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | AMX_INT8 = 1 |"
CPU = {"avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "amx_tile", "amx_int8", "sse2"}

FAKE_INIT = """
import os
def llama_print_system_info():
    return os.environ.get("FAKE_SYSINFO", "").encode()
"""

FAKE_SERVER = r"""
import json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
with open(os.environ["FAKE_STARTS"], "a") as fh:
    fh.write(f"{os.getpid()}\n")
completions = 0

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        sys.stderr.write("fake llama.cpp: " + (a[0] % a[1:]) + "\n")

    def _json(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._json({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    def do_POST(self):
        global completions
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.path.endswith("/tokenize/count"):
            return self._json({"count": len(body.get("input", "").split())})
        completions += 1
        if str(completions) == os.environ.get("FAKE_CRASH_AT"):
            sys.stderr.write("fake llama.cpp: crashing now\n")
            sys.stderr.flush()
            os.kill(os.getpid(), getattr(signal, os.environ.get("FAKE_SIGNAL", "SIGSEGV")))
        self._json({
            "id": "x", "object": "chat.completion", "model": "fake", "created": 0,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "OK"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        })

HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""

FAKE_SETTINGS = """
class Settings:
    model_fields = {"model": None, "port": None}
"""

#: modules the server command needs (modulo checks that they import before it starts a server)
SERVER_DEPS = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in llama_cpp package on PYTHONPATH (for child processes), and a model file."""
    root = tmp_path / "fake"
    pkg = root / "llama_cpp"
    (pkg / "server").mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_INIT)
    (pkg / "server" / "__init__.py").write_text("")
    (pkg / "server" / "__main__.py").write_text(FAKE_SERVER)
    (pkg / "server" / "settings.py").write_text(FAKE_SETTINGS)
    for name in SERVER_DEPS:
        (root / name).mkdir()
        (root / name / "__init__.py").write_text("")
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), str(REPO)]))
    monkeypatch.setenv("FAKE_STARTS", str(tmp_path / "starts.txt"))
    monkeypatch.setenv("FAKE_SYSINFO", PORTABLE_INFO)
    monkeypatch.setattr(local, "missing_server_modules", lambda: [])
    monkeypatch.setattr(local, "cpu_flags", lambda *a: set(CPU))
    monkeypatch.setattr(LocalBackend, "_new_counter", lambda self, url: ServerCounter(url, 10.0))
    return tmp_path


def _starts(tmp: Path) -> list[int]:
    path = tmp / "starts.txt"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _backend(tmp: Path, **kwargs: object) -> LocalBackend:
    return LocalBackend(
        LLMSettings(name="local", timeout_s=20.0),
        model_path=str(tmp / "model.gguf"),
        log_file=str(tmp / "run" / "llm-server.log"),
        prompt_cache_mb=0,
        **kwargs,  # type: ignore[arg-type]
    )


REQUEST = LLMRequest(messages=(Message(role="user", content="Plan."),), max_tokens=4)


@pytest.mark.parametrize(("sig", "label"), [("SIGSEGV", "Segmentation fault"), ("SIGILL", "Illegal instruction")])
async def test_a_server_that_dies_on_the_probe_stops_with_the_signal_the_cpu_and_the_fix(
    fake: Path, monkeypatch: pytest.MonkeyPatch, sig: str, label: str
) -> None:
    monkeypatch.setenv("FAKE_CRASH_AT", "1")
    monkeypatch.setenv("FAKE_SIGNAL", sig)
    backend = _backend(fake)
    try:
        with pytest.raises(ServerCrashError) as info:
            await backend.start()
        message = str(info.value)
        assert f"signal {sig} ({label})" in message
        assert "probe" in message
        assert "avx2" in message and "avx512f" in message and "amx_tile" in message and "sse2" not in message
        assert REINSTALL_SERVER in message and "--no-cache-dir" in REINSTALL_SERVER
        log_path = fake / "run" / "llm-server.log"
        assert str(log_path) in message
        assert "crashing now" in log_path.read_text()
        # the failure is remembered: no second server is started
        with pytest.raises(ServerCrashError):
            await backend.start()
        assert len(_starts(fake)) == 1
    finally:
        await backend.aclose()
        for pid in _starts(fake):
            kill_if_alive(pid)
    assert (fake / "run" / "llm-server.log").exists()


async def test_restarts_are_bounded_for_the_whole_run_not_per_call(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CRASH_AT", "2")  # every server passes its probe, then dies on the first real request
    backend = _backend(fake, max_restarts=2)
    outcomes: list[str] = []
    try:
        for _ in range(5):
            try:
                await backend.complete(REQUEST)
                outcomes.append("ok")
            except TransientLLMError as exc:
                assert "signal SIGSEGV" in str(exc)
                outcomes.append("transient")
            except ServerCrashError as exc:
                assert "after 2 restart(s)" in str(exc) and REINSTALL_SERVER in str(exc)
                outcomes.append("fatal")
    finally:
        await backend.aclose()
        starts = _starts(fake)
        for pid in starts:
            kill_if_alive(pid)
    assert outcomes == ["transient", "transient", "transient", "fatal", "fatal"]
    assert len(starts) == 3  # the first server and two restarts, then no more
    assert backend.restarts == 3


async def test_a_server_that_answers_is_used_after_its_probe(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_CRASH_AT", raising=False)
    backend = _backend(fake)
    try:
        response = await backend.complete(REQUEST)
        pid = backend.server_pid
    finally:
        await backend.aclose()
    assert response.text == "OK"
    assert pid is not None and wait_gone(pid)


async def test_a_native_build_is_refused_before_any_server_starts(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SYSINFO", NATIVE_INFO)
    backend = _backend(fake)
    try:
        with pytest.raises(ConfigError) as info:
            await backend.start()
    finally:
        await backend.aclose()
    assert "native build" in str(info.value) and "AMX_INT8" in str(info.value)
    assert REINSTALL_SERVER in str(info.value)
    assert _starts(fake) == []


def test_build_compatibility_rules() -> None:
    portable = {"AVX", "AVX2", "FMA", "F16C"}
    assert incompatible_build(portable, CPU, allow_native=False) is None
    assert incompatible_build(portable | {"AMX_INT8"}, CPU, allow_native=True) is None
    assert "native build" in (incompatible_build(portable | {"AVX512"}, CPU, allow_native=False) or "")
    # a feature the CPU lacks is refused even when native builds are allowed
    reason = incompatible_build(portable | {"AVX512"}, {"avx", "avx2", "fma", "f16c"}, allow_native=True)
    assert reason is not None and "AVX512" in reason
    assert incompatible_build(portable, set(), allow_native=False) is None  # no /proc/cpuinfo: nothing to compare


@pytest.mark.slow  # a whole modulo run in a subprocess
def test_modulo_run_exits_nonzero_with_the_crash_first_and_the_log_in_the_run_dir(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CRASH_AT", "1")
    monkeypatch.setenv("FAKE_SIGNAL", "SIGILL")
    run_dir = fake / "quick"
    result = subprocess.run(
        [
            sys.executable, "-m", "modulo.cli.main", "run",
            f"+llm.args.model_path={fake / 'model.gguf'}", "benchmark.n=2", f"run.dir={run_dir}",
            "run.progress=false", "+llm.args.allow_native_build=true",
        ],
        capture_output=True, text=True, cwd=fake, timeout=120, check=False,
    )  # fmt: skip
    for pid in _starts(fake):
        kill_if_alive(pid)
    assert result.returncode == 2, result.stdout + result.stderr
    first = result.stderr.strip().splitlines()[0]
    assert first.startswith("error: ServerCrashError") and "SIGILL" in first, result.stderr
    assert REINSTALL_SERVER in result.stderr
    assert "crashing now" in (run_dir / "llm-server.log").read_text()
    assert not (run_dir / "records.jsonl").exists() or not (run_dir / "records.jsonl").read_text().strip()
    assert len(_starts(fake)) == 1
    json.loads((run_dir / "run.json").read_text())  # the run directory says what was attempted
