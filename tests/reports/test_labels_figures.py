"""Reports say exactly what ran: labels from the request, collapsed presets, k/n, Holm, Direct against
LLM-Modulo, and figures of many runs whose text does not overlap and whose runs never share a colour."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from modulo.reports import ReportOptions, build_report, holm, load_runs, method_parts, short_labels
from modulo.reports import figures as figs
from modulo.reports.figures import distinct_colours, text_overlaps

PRESETS = {
    "all": ("format", "c_nonneg", "c_even", "h_max"),
    "common": ("format", "c_nonneg", "c_even"),
    "hard": ("format", "h_max"),
    "json": ("format",),
}


def _sweep(make_run: Any, root: Path, n: int, *, long_labels: bool = False) -> Path:
    plans_a, plans_b = make_run.plans
    """``n`` toy runs: critics presets x backprompt strategies x temperatures (job numbers as names)."""
    jobs = [(bp, t, req) for t in (0.0, 0.7) for bp in ("all", "first", "grouped") for req in PRESETS]
    for i, (bp, temp, req) in enumerate(jobs[:n]):
        extra: dict[str, Any] = {
            "critics_requested": [req],
            "backprompt": {"name": bp, "args": {"include_plan": True, "window": 3} if long_labels else {}},
            "llm": {
                "name": "scripted",
                "model": "toy-model-v2-long-name" if long_labels else "toy",
                "temperature": temp,
            },
        }
        make_run(
            root / str(i),
            plans_a if i % 2 == 0 else plans_b,
            critics=PRESETS[req],
            run_id=str(i),
            method=f"ablation arm {i} with a long user label" if long_labels else None,
            info_extra=extra,
        )
    return root


@pytest.fixture
def make_run(make_run: Any, run_a_plans: Any, run_b_plans: Any) -> Any:
    make_run.plans = (run_a_plans, run_b_plans)
    return make_run


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """Every figure the report saves, with its overlapping texts computed before it is closed."""
    seen: list[tuple[str, Any]] = []
    original = figs._save

    def save(fig: Any, path: Path, dpi: int) -> list[tuple[str, str]]:
        overlaps = original(fig, path, dpi)
        seen.append((path.name, {"fig": fig, "overlaps": overlaps, "lines": _line_styles(fig)}))
        return overlaps

    monkeypatch.setattr(figs, "_save", save)
    yield seen


def _line_styles(fig: Any) -> list[tuple[tuple[float, ...], str, str]]:
    """(colour, line style, marker) of each line of the figure's first axes."""
    from matplotlib.colors import to_rgba

    return [
        (tuple(np.round(to_rgba(line.get_color()), 4)), str(line.get_linestyle()), str(line.get_marker()))
        for line in fig.axes[0].get_lines()
    ]


@pytest.mark.slow  # draws and measures every figure of up to 12 runs
@pytest.mark.parametrize(("n", "long_labels"), [(12, False), (8, True), (2, False)])
def test_many_runs_figures_have_no_overlapping_text_and_no_repeated_colour(
    tmp_path: Path, make_run: Any, captured: list[tuple[str, Any]], n: int, long_labels: bool
) -> None:
    root = _sweep(make_run, tmp_path / "sweep", n, long_labels=long_labels)
    result = build_report([root], ReportOptions(n_resamples=200))
    names = [name for name, _ in captured]
    assert names == ["critic_firing.png", "budget_curve.png"]
    for name, info in captured:
        assert info["overlaps"] == [], (name, info["overlaps"][:3])
    assert "Figure layout note" not in result.markdown
    lines = captured[1][1]["lines"]
    assert len(lines) == n
    colours = [c for c, _, _ in lines]
    assert len(set(colours)) == n  # no colour repeats within the figure
    assert len(set(lines)) == n
    # the iteration convention is stated in both figures and in the report
    for _, info in captured:
        assert figs.CONVENTION in info["fig"].get_suptitle()
    assert figs.CONVENTION in result.markdown


def test_overlap_check_finds_overlapping_text() -> None:
    """The layout check can fail: two texts drawn on top of each other are found."""
    plt = figs._pyplot()
    fig, ax = plt.subplots(layout="constrained")
    ax.text(0.5, 0.5, "one text here", transform=ax.transAxes)
    ax.text(0.52, 0.5, "another text", transform=ax.transAxes)
    ax.set_xticks([0.0, 1.0])
    hits = text_overlaps(fig)
    plt.close(fig)
    assert ("one text here", "another text") in hits


def test_saving_checks_overlaps_on_the_drawing_it_saves(tmp_path: Path) -> None:
    """A figure saved at its own dpi is drawn once (the check reads that drawing), and finds what a
    separate drawing finds; the file is the one a plain save writes."""
    plt = figs._pyplot()
    found = []
    for name in ("checked.png", "plain.png"):
        fig, ax = plt.subplots(layout="constrained")
        ax.text(0.5, 0.5, "one text here", transform=ax.transAxes)
        ax.text(0.52, 0.5, "another text", transform=ax.transAxes)
        ax.set_title("a title")
        if name == "checked.png":
            drawn = []
            original = fig.canvas.draw
            fig.canvas.draw = lambda: drawn.append(1) or original()  # type: ignore[method-assign]
            found = figs._save(fig, tmp_path / name, int(fig.dpi))
            assert not drawn, "the figure was drawn once more for the check"
        else:
            expected = text_overlaps(fig)
            fig.savefig(tmp_path / name, dpi=int(fig.dpi))
        plt.close(fig)
    assert ("one text here", "another text") in found and found == expected
    assert (tmp_path / "checked.png").read_bytes() == (tmp_path / "plain.png").read_bytes()


def test_distinct_colours_never_repeat() -> None:
    for n in (1, 8, 10, 12, 20, 25):
        colours = [tuple(np.round(c, 6)) for c in distinct_colours(n)]
        assert len(set(colours)) == n


def test_panels_and_legends_are_named_by_what_differs(tmp_path: Path, make_run: Any) -> None:
    runs = load_runs([_sweep(make_run, tmp_path / "sweep", 8)])
    shorts = short_labels(runs)
    assert shorts["0"] == "0: critics [All]; backprompt all"
    assert shorts["6"] == "6: critics [Hard]; backprompt first"
    parts = method_parts(runs[0])
    assert list(parts) == ["generator", "critics", "strategy", "feedback", "budget", "model", "temperature"]
    assert parts["temperature"] == "T=0" and parts["feedback"] == "feedback explain"


def test_feedback_level_is_read_from_run_json(tmp_path: Path, make_run: Any) -> None:
    plans = make_run.plans[0]
    runs = {
        name: load_runs([make_run(tmp_path / name, plans, info_extra=extra)])[0]
        for name, extra in {
            "old_hints": {"critic_options": {"mode": "strict", "hints": True}},
            "level": {"feedback": "binary", "critic_options": {"mode": "strict", "feedback": "binary"}},
            "apart": {"feedback": "explain", "critic_feedback": {"c_even": "hint", "c_nonneg": "explain"}},
        }.items()
    }
    assert method_parts(runs["old_hints"])["feedback"] == "feedback hint"
    assert method_parts(runs["level"])["feedback"] == "feedback binary"
    assert method_parts(runs["apart"])["feedback"] == "feedback explain (c_even: hint)"


def test_holm_adjustment() -> None:
    assert holm([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    out = holm([0.5, float("nan"), 0.01])
    assert out[0] == pytest.approx(0.5) and np.isnan(out[1]) and out[2] == pytest.approx(0.02)
    assert holm([0.9, 0.8]).tolist() == pytest.approx([1.0, 1.0])  # 0.8 x 2 capped at 1; monotone after it


def test_comparisons_are_holm_corrected_against_the_chosen_baseline(tmp_path: Path, make_run: Any) -> None:
    root = _sweep(make_run, tmp_path / "sweep", 4)
    result = build_report([root], ReportOptions(n_resamples=500, baseline="1"))
    df = pd.read_csv(root / "comparisons.csv")
    assert set(df["a"].astype(str)) == {"1"} and sorted(df["b"].astype(str)) == ["0", "2", "3"]
    assert (df["holm_family"] == 3).all()
    assert np.allclose(df["mcnemar_p_holm"], holm(df["mcnemar_p"].to_numpy()))
    assert (df["mcnemar_p_holm"] >= df["mcnemar_p"] - 1e-12).all()
    assert "against the baseline 1" in result.markdown and "Holm-adjusted p (family of 3)" in result.markdown
    # counts beside the rates: run 1 (RUN_B) passes 4 of 6, run 0 (RUN_A) 2 of 6
    assert "66.7 (4/6)" in result.markdown and "33.3 (2/6)" in result.markdown


def test_direct_against_modulo_is_in_the_report(tmp_path: Path, make_run: Any) -> None:
    path = make_run(tmp_path / "b", make_run.plans[1])
    result = build_report([path], ReportOptions(n_resamples=500))
    assert "### Direct against LLM-Modulo" in result.markdown
    df = pd.read_csv(path / "direct_vs_modulo.csv")
    # first plans of RUN_B: only p4 (x=4) passes; final plans: p1, p3, p4, p5 pass
    assert df.loc[0, "direct_k"] == 1 and df.loc[0, "modulo_k"] == 4 and df.loc[0, "n"] == 6
    assert df.loc[0, "modulo_only"] == 3 and df.loc[0, "direct_only"] == 0
    assert df.loc[0, "mcnemar_p"] == pytest.approx(0.25)
    assert "16.7 (1/6)" in result.markdown and "66.7 (4/6)" in result.markdown


def test_no_travelplanner_headings_on_another_benchmark(tmp_path: Path, make_run: Any) -> None:
    result = build_report([make_run(tmp_path / "a", make_run.plans[0])], ReportOptions(n_resamples=200))
    assert "Table 4" not in result.markdown and "Table 1" not in result.markdown
    assert "### Headline metrics (toy_reports's own metrics)" in result.markdown
    assert "Critic presets on toy_reports: [All] = format, c_nonneg, c_even, h_max;" in result.markdown


@pytest.mark.slow  # a sweep of real runs, then their report
def test_sweep_over_collapsing_presets_names_each_job_by_its_request(tmp_path: Path, invoke: Any) -> None:
    """synth/calendar has no commonsense critics: `hard` runs every critic and `common` only format."""
    sweep = tmp_path / "sweep"
    code, out = invoke(
        "run", "-m", "critics=all,common,hard,json", "benchmark=synth/calendar_small", "llm=scripted",
        "benchmark.limit=2", "metacontroller.max_iterations=2", "cache.mode=off", "run.progress=false",
        "run.report=false", f"hydra.sweep.dir={sweep}",
    )  # fmt: skip
    assert code == 0, out
    asked = {json.loads((sweep / str(i) / "run.json").read_text())["critics_requested"][0] for i in range(4)}
    assert asked == {"all", "common", "hard", "json"}
    code, out = invoke("report", str(sweep), "--resamples", "200", "--no-figures")
    assert code == 0, out
    md = (sweep / "report.md").read_text()
    assert "critics hard (= [All])" in md and "critics common (= [Json])" in md
    assert "| 0 | critics [All] |" in md and "| 3 | critics [Json] |" in md
    assert "**Warning: runs that are one configuration.**" in md.split("\n## ")[0]
    assert "runs 0 (critics [All]), 2 (critics hard (= [All])) resolve to the same configuration" in md
    assert "runs 1 (critics common (= [Json])), 3 (critics [Json]) resolve to the same configuration" in md
    assert "WARNING: runs that are one configuration" in out
    table = pd.read_csv(sweep / "table1.csv")
    assert table["critics_requested"].tolist() == ["[All]", "common (= [Json])", "hard (= [All])", "[Json]"]


def test_runs_alike_in_every_part_are_named_by_the_keys_they_differ_in(tmp_path: Path, make_run: Any) -> None:
    """A sweep over run.sample (or critic_options.mode) labelled every row '(same as the others)' in the
    report and by its bare job number in the paper table: nothing said what ran. They are named by the
    configuration keys they differ in."""
    from modulo.reports.paper import paper_tables

    root = tmp_path / "sweep"
    official = {"mode": "official", "hints": False}
    for job, extra in (("0", {"sample": 0}), ("1", {"sample": 1}), ("2", {"sample": 1, "critic_options": official})):
        make_run(root / job, make_run.plans[0], info_extra=extra)
    runs = load_runs([root])
    assert short_labels(runs) == {
        "0": "0: critic_options.mode strict; sample 0",
        "1": "1: critic_options.mode strict; sample 1",
        "2": "2: critic_options.mode official; sample 1",
    }
    result = build_report([root], ReportOptions(n_resamples=100, budget_curves=False, figures=False))
    assert (
        "(same as the others)" not in result.text
        and "| 2 | critic_options.mode official; sample 1 |" in result.markdown
    )
    (table,) = paper_tables([root], n_resamples=100)
    assert [r.label for r in table.rows] == [
        "critic_options.mode strict; sample 0",
        "critic_options.mode strict; sample 1",
        "critic_options.mode official; sample 1",
    ]
