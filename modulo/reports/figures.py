"""PNG figures (matplotlib, non-interactive Agg backend): critic firing per iteration, metric per budget.

Both figures state one convention: **iteration 0 is the first plan; budget k allows at most k plans**
(iterations 0..k-1), and the plan at budget k is the best of those. Panels and legend entries are named
by the runs' method labels (the parts that differ between the runs; the shared parts go in the
subtitle). Every run in the budget figure has its own colour, line style and marker. Layout is
matplotlib's constrained layout; :func:`text_overlaps` finds text that still collides (the tests use it,
and the report notes any it finds).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .budget import BudgetCurve
from .tables import Firing

#: stated in every figure
CONVENTION = "Iteration 0 = the first plan; budget k = at most k plans (iterations 0..k-1), the best of them counts."
_LINESTYLES = ["-", "--", "-.", ":"]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]
_GROUP_HATCH = {"format": "..", "hard": "//"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.fill(line, width, break_long_words=True) for line in text.split("\n"))


def distinct_colours(n: int) -> list[Any]:
    """``n`` colours, none repeated: tab10 up to 10, tab20 up to 20, else evenly spaced hues."""
    import matplotlib

    if n <= 10:
        cmap = matplotlib.colormaps["tab10"]
        return [tuple(cmap(i)) for i in range(n)]
    if n <= 20:
        cmap = matplotlib.colormaps["tab20"]
        # dark shades first, then the light ones, so neighbours in the legend differ most
        order = [*range(0, 20, 2), *range(1, 20, 2)]
        return [tuple(cmap(order[i])) for i in range(n)]
    hsv = matplotlib.colormaps["hsv"]
    return [tuple(hsv(i / n)) for i in range(n)]


def run_styles(n: int) -> list[dict[str, Any]]:
    """A (colour, line style, marker) per run; the colour alone is already unique within a figure."""
    colours = distinct_colours(n)
    return [
        {"color": colours[i], "linestyle": _LINESTYLES[i % len(_LINESTYLES)], "marker": _MARKERS[i % len(_MARKERS)]}
        for i in range(n)
    ]


def text_overlaps(fig: Any) -> list[tuple[str, str]]:
    """Pairs of non-empty texts that ``fig`` draws whose boxes intersect (the figure is drawn to find out).

    Only texts that are actually drawn count (tick labels outside the axis limits, hidden shared tick
    labels and empty strings are not); texts inside one legend and tick labels of one axis are compared
    too. A box is shrunk by a hair so that texts that merely touch do not count.
    """
    with _texts_drawn() as drawn:
        fig.canvas.draw()
    return _overlapping(fig, drawn)


@contextmanager
def _texts_drawn() -> Iterator[list[Any]]:
    """The non-empty visible texts drawn while inside (in drawing order, repeats included)."""
    from matplotlib.text import Text

    drawn: list[Any] = []
    original = Text.draw

    def spy(self: Any, renderer: Any) -> Any:
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        return original(self, renderer)

    Text.draw = spy  # type: ignore[method-assign]
    try:
        yield drawn
    finally:
        Text.draw = original  # type: ignore[method-assign]


def _overlapping(fig: Any, drawn: list[Any]) -> list[tuple[str, str]]:
    """Pairs of ``drawn`` texts whose boxes (at the figure's last drawing) intersect."""
    renderer = fig.canvas.get_renderer()
    boxes: list[tuple[str, Any]] = []
    for artist in dict.fromkeys(drawn):
        box = artist.get_window_extent(renderer)
        if box.width > 0 and box.height > 0:
            boxes.append((artist.get_text(), box.shrunk(0.98, 0.9)))
    hits: list[tuple[str, str]] = []
    for i, (ta, ba) in enumerate(boxes):
        for tb, bb in boxes[i + 1 :]:
            if ba.overlaps(bb):
                hits.append((ta, tb))
    return hits


def _save(fig: Any, path: Path, dpi: int) -> list[tuple[str, str]]:
    """Save ``fig`` and check its texts for overlaps on that one drawing (not a second one first) when
    it is saved at the figure's own dpi; otherwise drawn once more at the figure's dpi for the check."""
    if dpi != fig.dpi:
        overlaps = text_overlaps(fig)
        fig.savefig(path, dpi=dpi)
        return overlaps
    with _texts_drawn() as drawn:
        fig.savefig(path, dpi=dpi)
    return _overlapping(fig, drawn)


def plot_critic_firing(
    firings: Sequence[Firing],
    path: Path,
    *,
    titles: dict[str, str] | None = None,
    subtitle: str = "",
    check: list[tuple[str, str]] | None = None,
) -> Path:
    """One panel per run: a bar group per iteration, one bar per critic: how many problems' plans it rejected.

    A critic keeps its colour in every panel, and one legend serves them all. Hatching marks the group
    (dots: format, stripes: hard, plain: commonsense and others); the dotted step line is the number of
    problems whose plan was critiqued at that iteration. Iterations that errored before the critics ran
    are not rejections; a panel says how many there were. ``titles`` maps run name -> panel title;
    overlapping texts found after layout are appended to ``check``.
    """
    plt = _pyplot()
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    n = max(1, len(firings))
    cols = 1 if n == 1 else 2
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(7.0 * cols, 3.4 * rows + 1.6), squeeze=False, sharey=True, layout="constrained"
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    names: list[str] = []
    groups: dict[str, str] = {}
    for firing in firings:
        for name, counts in firing.counts.items():
            if any(counts) and name not in names:
                names.append(name)
            groups.setdefault(name, firing.groups.get(name, ""))
    colour = dict(zip(names, distinct_colours(len(names)), strict=True))
    width_chars = 62 if cols == 2 else 90
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
        title = (titles or {}).get(firing.run.name, firing.run.name)
        extra: list[str] = []
        if quiet:
            extra.append(f"never fired: {', '.join(quiet[:8])}{', ...' if len(quiet) > 8 else ''}")
        if any(firing.errored):
            extra.append(f"errored iterations (not counted): {sum(firing.errored)}")
        ax.set_title(_wrap(title, width_chars), fontsize=9, loc="left")
        if extra:
            ax.text(
                0.99,
                0.97,
                "\n".join(_wrap(e, 48) for e in extra),
                transform=ax.transAxes,
                ha="right",
                va="top",
                fontsize=7,
                color="0.3",
                bbox={"facecolor": "white", "edgecolor": "0.8", "alpha": 0.85, "pad": 2},
            )
        ax.set_xlabel("iteration (0 = the first plan)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0, top=max([1, *[max(f.active, default=0) for f in firings]]) * 1.45)
    for ax in axes[:, 0]:
        ax.set_ylabel("problems whose plan\nthe critic rejected", fontsize=8)
    handles: list[Artist] = [
        Patch(
            facecolor=colour[c],
            hatch=_GROUP_HATCH.get(groups.get(c, ""), ""),
            edgecolor="white",
            label=f"{c} ({groups[c]})" if groups.get(c) else c,
        )
        for c in names
    ]
    handles.append(Line2D([], [], color="0.35", linestyle=":", label="problems critiqued at this iteration"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)), fontsize=8, frameon=False)
    head = "How often each critic rejected the plan, per iteration, over all problems"
    fig.suptitle(
        _wrap(head + (f"\n{subtitle}" if subtitle else "") + f"\n{CONVENTION}", 110 * cols // 2 + 20), fontsize=10
    )
    overlaps = _save(fig, path, 100)
    plt.close(fig)
    if check is not None:
        check.extend(overlaps)
    return path


def plot_budget_curve(
    curves: Sequence[BudgetCurve],
    labels: Sequence[str],
    path: Path,
    *,
    metric_label: str = "final pass rate",
    subtitle: str = "",
    check: list[tuple[str, str]] | None = None,
) -> Path:
    """Top: the primary metric of the plan at budget k, k = 1..N. Bottom: fresh model calls per problem
    spent within budget k (cache hits are not model calls; their count is in each legend entry)."""
    plt = _pyplot()
    fig, (top_ax, calls_ax) = plt.subplots(
        2, 1, figsize=(10.0, 7.0 + 0.22 * len(curves)), sharex=True, height_ratios=[3, 2], layout="constrained"
    )
    styles = run_styles(len(curves))
    top = 1
    for curve, label, style in zip(curves, labels, styles, strict=True):
        x = curve.budgets
        top = max([top, *x])
        entry = f"{label} (n={curve.n_problems}; {curve.fresh_total} fresh calls, {curve.cached_total} cache hits)"
        top_ax.plot(x, [100 * v for v in curve.values], markersize=4, linewidth=1.6, label=_wrap(entry, 58), **style)
        calls_ax.plot(x, curve.fresh_calls, markersize=3, linewidth=1.3, **style)
    top_ax.set_ylabel(f"{metric_label} (%)", fontsize=9)
    top_ax.set_ylim(0, 100)
    calls_ax.set_ylabel("fresh model calls\nper problem (mean)", fontsize=9)
    calls_ax.set_ylim(bottom=0)
    calls_ax.set_xlabel("iteration budget k (at most k plans: iterations 0..k-1)", fontsize=9)
    calls_ax.set_xlim(0.8, max(top, 2) + 0.2)
    calls_ax.set_xticks(list(range(1, top + 1)) if top <= 20 else list(range(1, top + 1, math.ceil(top / 20))))
    for ax in (top_ax, calls_ax):
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=8)
    if curves:
        fig.legend(loc="outside lower center", ncol=1 if len(curves) < 4 else 2, fontsize=7.5, frameon=False)
    head = f"{metric_label.capitalize()} of the best plan within budget k, and the model calls it took"
    fig.suptitle(_wrap(head + (f"\n{subtitle}" if subtitle else "") + f"\n{CONVENTION}", 110), fontsize=10)
    overlaps = _save(fig, path, 100)
    plt.close(fig)
    if check is not None:
        check.extend(overlaps)
    return path
