"""Pieces of toy benchmarks, for tests and the speed scripts under benchmarks/."""

from __future__ import annotations

from collections.abc import Sequence

from ..benchmark import MetricSpec


def group_metrics(groups: Sequence[str] = ("commonsense", "hard")) -> tuple[MetricSpec, ...]:
    """The headline metrics of a benchmark whose critics fall in ``groups`` (TravelPlanner's shape):
    ``delivery_rate``, each group's ``<group>_micro`` and ``<group>_macro``, and ``final_pass_rate``."""
    per_group = [MetricSpec(f"{g}_{kind}", f"{g.capitalize()} {kind}") for g in groups for kind in ("micro", "macro")]
    return (MetricSpec("delivery_rate", "Delivery"), *per_group, MetricSpec("final_pass_rate", "Final pass"))
