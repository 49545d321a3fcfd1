"""Test-wide setup: no test can reach the internet, data and cache directories are configured.

Any socket connection to a non-loopback address fails loudly, so an accidental live API call is an
error, never a silent bill. Live tests are opt-in with ``--live`` (marker ``live``).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX paths
        return True
    host = address[0] if isinstance(address, tuple) and address else address
    if host in ("localhost", "", None):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LiveNetworkBlocked(RuntimeError):
    pass


def _guard(sock: socket.socket, address: Any) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address):
        raise LiveNetworkBlocked(f"test tried to connect to {address!r}: tests may only use 127.0.0.1 (use --live)")


def _connect(self: socket.socket, address: Any) -> Any:
    _guard(self, address)
    return _real_connect(self, address)


def _connect_ex(self: socket.socket, address: Any) -> Any:
    _guard(self, address)
    return _real_connect_ex(self, address)


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host not in (None, "localhost", "127.0.0.1", "::1", b"localhost") and not _is_local((host,)):
        raise LiveNetworkBlocked(f"test tried to resolve {host!r}: tests may only use 127.0.0.1 (use --live)")
    return _real_getaddrinfo(host, *args, **kwargs)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--live", action="store_true", default=False, help="allow tests that call real LLM APIs")


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("--live"):
        socket.socket.connect = _connect  # type: ignore[method-assign]
        socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = _getaddrinfo
    if "MODULO_DATA_DIR" not in os.environ:
        shared = ROOT.parent / "shared" / "data"
        if shared.is_dir():
            os.environ["MODULO_DATA_DIR"] = str(shared)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        if not config.getoption("--live"):
            os.environ.pop(var, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--live"):
        return
    skip = pytest.mark.skip(reason="live API test: run with --live")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A per-session cache directory (SQLite stores, response cache), unless the caller set one."""
    if "MODULO_CACHE_DIR" not in os.environ:
        path = tmp_path_factory.mktemp("modulo-cache")
        os.environ["MODULO_CACHE_DIR"] = str(path)
    return Path(os.environ["MODULO_CACHE_DIR"])


@pytest.fixture
def data_dir() -> Path:
    env = os.environ.get("MODULO_DATA_DIR")
    if not env or not Path(env).is_dir():
        pytest.skip("benchmark data not found: set MODULO_DATA_DIR (CI points it at ../shared/data)")
    return Path(env)
