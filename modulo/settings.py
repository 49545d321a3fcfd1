"""Process-wide settings read from the environment: the data and cache directories."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "MODULO_DATA_DIR"
CACHE_ENV = "MODULO_CACHE_DIR"


def data_dir(override: str | Path | None = None) -> Path:
    """The benchmark data directory: the explicit setting, else $MODULO_DATA_DIR, else ./data."""
    if override:
        return Path(override).expanduser().resolve()
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return Path("data").resolve()


def cache_dir(override: str | Path | None = None) -> Path:
    """Where derived files (SQLite stores, response cache) go: setting, $MODULO_CACHE_DIR, ~/.cache/modulo."""
    if override:
        path = Path(override).expanduser()
    elif os.environ.get(CACHE_ENV):
        path = Path(os.environ[CACHE_ENV]).expanduser()
    else:
        path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "modulo"
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()
