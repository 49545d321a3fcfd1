"""PNG figures (matplotlib, non-interactive Agg backend): critic firing per iteration, pass rate per budget."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .budget import BudgetCurve
from .tables import Firing, method_label


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


_GROUP_HATCH = {"format": "..", "hard": "//"}


def plot_critic_firing(firings: Sequence[Firing], path: Path, *, subtitle: str = "") -> Path:
    """One panel per run: a bar group per iteration, one bar per critic: how many problems' plans it rejected.

    A critic keeps its colour in every panel, and one legend serves them all. Hatching marks the group
    (dots: format, stripes: hard, plain: commonsense and others); the dotted step line is the number of
    problems that reached the iteration. Panels share the y axis, so runs compare at a glance.
    """
    plt = _pyplot()
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    n = max(1, len(firings))
    cols = 1 if n == 1 else 2
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 3.6 * rows), squeeze=False, sharey=True)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    names: list[str] = []
    groups: dict[str, str] = {}
    for firing in firings:
        for name, counts in firing.counts.items():
            if any(counts) and name not in names:
                names.append(name)
            groups.setdefault(name, firing.groups.get(name, ""))
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    colour = {name: cmap(i % cmap.N) for i, name in enumerate(names)}
    for ax, firing in zip(axes.flat, firings, strict=False):
        x = list(range(len(firing.active)))
        if not x:
            ax.text(0.5, 0.5, "no iterations recorded", ha="center", va="center", transform=ax.transAxes)
        fired = [c for c in names if any(firing.counts.get(c, []))]
        width = 0.8 / max(1, len(fired))
        for i, name in enumerate(fired):
            offsets = [xi - 0.4 + width * (i + 0.5) for xi in x]
            ax.bar(
                offsets,
                firing.counts[name],
                width=width,
                color=colour[name],
                hatch=_GROUP_HATCH.get(groups.get(name, ""), ""),
                edgecolor="white",
                linewidth=0.3,
            )
        if x:
            ax.step(
                [x[0] - 0.5, *x, x[-1] + 0.5],
                [firing.active[0], *firing.active, firing.active[-1]],
                where="mid",
                color="0.35",
                linestyle=":",
                linewidth=1.2,
            )
            ax.set_xticks(x if len(x) <= 20 else x[:: math.ceil(len(x) / 20)])
        quiet = [c for c in firing.counts if not any(firing.counts[c])]
        method = method_label(firing.run)
        title = f"{firing.run.name}: " + (f"{method} ({firing.run.model})" if method != "-" else firing.run.model)
        if quiet:
            title += f"\n(never fired: {', '.join(quiet[:6])}{', ...' if len(quiet) > 6 else ''})"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("iteration (0 = first plan)", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    for ax in axes[:, 0]:
        ax.set_ylabel("problems whose plan\nthe critic rejected", fontsize=9)
    handles: list[Artist] = [
        Patch(
            facecolor=colour[c],
            hatch=_GROUP_HATCH.get(groups.get(c, ""), ""),
            edgecolor="white",
            label=f"{c} ({groups[c]})" if groups.get(c) else c,
        )
        for c in names
    ]
    handles.append(Line2D([], [], color="0.35", linestyle=":", label="problems at this iteration"))
    fig.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(4, len(handles)),
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(
        "How often each critic fired (rejected the plan), per iteration, over all problems"
        + (f"\n{subtitle}" if subtitle else ""),
        fontsize=11,
    )
    height = 3.6 * rows
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.55 / height, top=1 - 0.95 / height, hspace=0.55, wspace=0.12)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_budget_curve(
    curves: Sequence[BudgetCurve],
    labels: Sequence[str],
    path: Path,
    *,
    metric_label: str = "final pass rate",
    subtitle: str = "",
) -> Path:
    """All runs on one axes: the primary metric of the plan at iteration budget k, for k = 0..N."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 5.0))
    top = 0
    for curve, label in zip(curves, labels, strict=True):
        x = list(range(len(curve.values)))
        top = max(top, len(x) - 1)
        ax.plot(
            x,
            [100 * v for v in curve.values],
            marker="o",
            markersize=4,
            linewidth=1.6,
            label=f"{label} (n={curve.n_problems})",
        )
    ax.set_xlabel("iteration budget k (plan = best so far over the first k iterations)")
    ax.set_ylabel(f"{metric_label} (%)")
    ax.set_xlim(-0.2, max(top, 1) + 0.2)
    ax.set_xticks(list(range(top + 1)) if top <= 20 else list(range(0, top + 1, math.ceil(top / 20))))
    ax.set_ylim(0, 100)
    ax.grid(True, alpha=0.3)
    if curves:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_title(
        f"{metric_label.capitalize()} against iteration budget" + (f"\n{subtitle}" if subtitle else ""), fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
