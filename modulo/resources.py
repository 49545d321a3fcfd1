"""Where modulo's shipped resources (prompt templates, Hydra configs) live, installed or editable."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """``prompts`` or ``conf``: inside the wheel (modulo/_resources/NAME) or at the repository root."""
    for candidate in (_PKG / "_resources" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"modulo resource folder {name!r} not found next to {_PKG}")
