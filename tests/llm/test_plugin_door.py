"""The plugin door: a third-party package that claims a built-in's name, or registers a backend that is
not one, stops the run before any call with a message naming the package; nothing is picked silently."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from modulo import components
from modulo.config import LLMSettings
from modulo.errors import PluginLoadError
from modulo.llm.client import build_client


def _install(site: Path, dist: str, group: str, name: str, target: str, source: str) -> None:
    """A distribution as an installer leaves it: its module (not named like it) and ``<dist>-1.0.dist-info``."""
    (site / f"{dist}_code.py").write_text(source)
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {dist}_code:{target}\n")


@pytest.fixture
def door(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``door(dist, group, name, target, source)``: :func:`_install` it ahead of every other package on the path
    (modulo's own metadata included: its entry points come first)."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(dist: str, group: str, name: str, target: str, source: str) -> None:
        _install(tmp_path, dist, group, name, target, source)

    return install


def _refusal(match: str, lookup: Callable[[], Any]) -> str:
    """The message of the PluginLoadError ``lookup`` raises (it must match ``match``)."""
    with pytest.raises(PluginLoadError, match=match) as info:
        lookup()
    return str(info.value)


def test_a_package_that_registers_a_builtin_name_stops_the_lookup(
    door: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(components.llms, "_loaded", {})
    door("door_squatter", "modulo.llms", "openai", "backend", "def backend(settings): ...\n")
    message = _refusal("more than one package", lambda: components.llms.get("openai"))
    assert "from door_squatter" in message and "from modulo" in message


def test_a_backend_without_complete_stops_the_build(door: Callable[..., None]) -> None:
    door("door_half", "modulo.llms", "door/half", "Half", "class Half:\n    def __init__(self, settings): ...\n")
    message = _refusal("lacks complete and aclose", lambda: build_client(LLMSettings(name="door/half", model="m")))
    assert "from door_half" in message


def test_an_invalid_plugin_names_its_package(door: Callable[..., None]) -> None:
    door("door_notcallable", "modulo.llms", "door/value", "VALUE", "VALUE = 3\n")
    assert "from door_notcallable" in _refusal("is invalid", lambda: components.llms.get("door/value"))


def test_a_complete_backend_still_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    class Whole:
        name = "door/whole"

        def __init__(self, settings: Any) -> None:
            pass

        async def complete(self, request: Any) -> Any: ...

        async def aclose(self) -> None: ...

    components.llms.register("door/whole", Whole)
    try:
        assert isinstance(build_client(LLMSettings(name="door/whole", model="m")).backend, Whole)
    finally:
        components.llms.unregister("door/whole")


def test_a_benchmark_without_a_required_hook_names_its_package(door: Callable[..., None]) -> None:
    source = (
        "from modulo.benchmark import Benchmark\nclass NoLoad(Benchmark):\n    def splits(self):\n        return []\n"
    )
    door("door_noload", "modulo.benchmarks", "door/noload", "NoLoad", source)
    message = _refusal("does not implement the required hook", lambda: components.benchmarks.get("door/noload"))
    assert "from door_noload" in message and "hook(s) load" in message


def test_a_plugin_that_exits_on_import_is_a_load_error(door: Callable[..., None]) -> None:
    # a module that ends the process when a dependency is missing would make the run exit with its code
    # (0 or 3 read as a finished or a stopped run), saying nothing of the plugin
    door("door_exits", "modulo.llms", "door/exits", "backend", "import sys\nsys.exit('please install frobnicate')\n")
    message = _refusal(r"failed to load: its import called sys\.exit", lambda: components.llms.get("door/exits"))
    assert "from door_exits" in message and "please install frobnicate" in message


def test_a_backend_whose_constructor_fails_is_named() -> None:
    def fails(settings: Any) -> Any:
        raise RuntimeError("CUDA not found")

    components.llms.register("door/fails", fails)
    try:
        with pytest.raises(PluginLoadError, match=r"llm backend 'door/fails' could not be set up: .*CUDA not found"):
            build_client(LLMSettings(name="door/fails", model="m"))
    finally:
        components.llms.unregister("door/fails")
