"""The registry of synthesized families (one instance each; families hold no per-problem state)."""

from __future__ import annotations

from modulo.errors import ConfigError

from .calendar import CalendarFamily
from .family import Family
from .tasks import TasksFamily
from .trip import TripFamily

FAMILIES: dict[str, Family] = {f.name: f for f in (TasksFamily(), CalendarFamily(), TripFamily())}


def get_family(name: str) -> Family:
    """``tasks``, ``calendar``, ``trip`` (or ``synth/<name>``)."""
    key = name.removeprefix("synth/")
    if key not in FAMILIES:
        raise ConfigError(f"unknown synthesized family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[key]
