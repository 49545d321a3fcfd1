"""Entry points are read once and read again when what they come from changes.

Scanning every installed distribution and parsing the metadata of each one named costs tens of
milliseconds; the registry keeps a group's entry points until ``sys.path`` or a directory on it
changes, so a package installed (or removed) while the process runs is still seen.
"""

from __future__ import annotations

import importlib.metadata as md
import shutil
from pathlib import Path
from typing import Any

import pytest

from modulo import components, registry


def _install(site: Path, dist: str, critic: str) -> Path:
    """A distribution as an installer leaves it: ``<dist>-1.0.dist-info`` with its metadata and entry points."""
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[modulo.critics]\n{critic} = {dist}_module:check\n")
    return info


def test_a_package_installed_or_removed_while_the_process_runs_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "scan/first" not in components.critics.names()
    _install(tmp_path, "scan_first", "scan/first")
    monkeypatch.syspath_prepend(str(tmp_path))  # a new directory on sys.path
    entries = components.critics.entries()
    assert entries["scan/first"].distribution == "scan_first" and not entries["scan/first"].builtin

    second = _install(tmp_path, "scan_second", "scan/second")  # the same directory, changed
    assert {"scan/first", "scan/second"} <= set(components.critics.names())

    shutil.rmtree(second)
    names = components.critics.names()
    assert "scan/first" in names and "scan/second" not in names


def test_lookups_in_an_unchanged_environment_scan_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    real = md.entry_points

    def counting(**params: Any) -> Any:
        calls.append(params)
        return real(**params)

    monkeypatch.setattr(md, "entry_points", counting)
    first = components.critics.names()
    for _ in range(5):
        assert components.critics.names() == first
        assert "format" in components.critics
    assert calls == [{"group": "modulo.critics"}]
    assert registry.group_entry_points("modulo.critics") is registry.group_entry_points("modulo.critics")
