"""tracker=mlflow: a sweep logs one MLflow run per job, read back through MLflow's own client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from modulo import components
from modulo.errors import ConfigError, UnknownComponentError
from modulo.trackers import Tracker, open_tracker, tracked_run
from tests.reports.conftest import set_outcome

from .conftest import toy_sweep


def _mlflow_client(uri: str) -> Any:
    for module in ("mlflow", "sqlalchemy", "alembic"):
        pytest.importorskip(module, reason="the mlflow extra is not installed: pip install -e '.[mlflow]'")
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


@pytest.mark.slow
def test_a_sweep_logs_one_mlflow_run_per_job(tmp_path: Path, toy_critics: None) -> None:
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    _mlflow_client(f"sqlite:///{tmp_path / 'probe.db'}")  # skips without the extra
    (tmp_path / "store").mkdir()
    sweep, code, out = toy_sweep(
        tmp_path,
        "critics=all,json",
        "metacontroller.max_iterations=4",
        "tracker=mlflow",
        f"tracker.args.tracking_uri={uri}",
        "tracker.args.experiment=toy-sweep",
    )
    assert code == 0, out
    assert out.count("tracker mlflow: logged") == 2
    client = _mlflow_client(uri)
    exp = client.get_experiment_by_name("toy-sweep")
    runs = sorted(client.search_runs([exp.experiment_id]), key=lambda r: r.data.tags["modulo.job_num"])
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    assert [r.info.run_name for r in runs] == [f"{sweep.name}/0", f"{sweep.name}/1"]
    assert [r.data.params["critics"] for r in runs] == ["[All]", "[Json]"]
    for run, job in zip(runs, ("0", "1"), strict=True):
        data = run.data
        assert data.tags["modulo.run_dir"] == str((sweep / job).resolve())
        assert data.tags["modulo.sweep_dir"] == str(sweep.resolve())
        assert data.tags["modulo.git_revision"] and data.tags["modulo.critic_source"]
        assert any(k.startswith("modulo.template.") for k in data.tags)
        assert {"generator", "strategy", "feedback", "budget", "model", "benchmark", "split"} <= set(data.params)
        assert data.params["budget"] == "4 it" and data.params["cfg.critic_options.mode"] == "strict"
        evaluation = json.loads((sweep / job / "evaluation.json").read_text())
        for key, value in evaluation["metrics"].items():
            assert data.metrics[key] == pytest.approx(value)
        assert data.metrics["problems"] == 6 and "input_tokens" in data.metrics and "cost_usd" in data.metrics
        certified = client.get_metric_history(run.info.run_id, "certified_at_budget")
        assert [m.step for m in sorted(certified, key=lambda m: m.step)] == [1, 2, 3, 4]
        curve = sorted(client.get_metric_history(run.info.run_id, "final_pass_rate_at_budget"), key=lambda m: m.step)
        assert [m.step for m in curve] == [1, 2, 3, 4]
        assert curve[-1].value == pytest.approx(evaluation["metrics"]["final_pass_rate"])
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"report.md", "records.jsonl", "run.json", "config.yaml", "evaluation.json"} <= artifacts
        assert any(p.endswith(".png") for p in artifacts)
    # [All] certifies p0 at iteration 1 and p3 at 1, p4 at 0 (1/6 at k=1, 3/6 at k=2); [Json] accepts any plan
    series = sorted(client.get_metric_history(runs[0].info.run_id, "certified_at_budget"), key=lambda m: m.step)
    assert [m.value for m in series] == pytest.approx([1 / 6, 3 / 6, 3 / 6, 3 / 6])


def test_tracked_run_never_carries_a_secret(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    from modulo import redact

    run = make_run(tmp_path / "a", run_a_plans)
    secret = "sk-test-tracker-0123456789abcdef"
    info = json.loads((run / "run.json").read_text())
    info["llm"]["args"] = {"note": f"token {secret}"}
    (run / "run.json").write_text(json.dumps(info))
    redact.register(secret)
    data = tracked_run(run)
    text = json.dumps([data.params, data.tags, data.metrics])
    assert secret not in text and "[redacted]" in data.params["cfg.llm.args.note"]


def test_a_tracker_is_a_plugin_kind_and_a_missing_extra_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "mlflow" in components.trackers.names()
    assert open_tracker(None) is None and open_tracker("none") is None
    with pytest.raises(UnknownComponentError, match="mlflwo"):
        open_tracker("mlflwo")

    class Recorder(Tracker):
        name = "recorder"

        def __init__(self, where: str) -> None:
            self.where = where

        def log_run(self, run_dir: Path, *, tags: Any = None) -> str:
            return self.where

    components.trackers.register("recorder", Recorder, replace=True)
    try:
        tracker = open_tracker("recorder", {"where": "x"})
        assert isinstance(tracker, Recorder) and tracker.where == "x"
        with pytest.raises(Exception, match="wher"):
            open_tracker("recorder", {"wher": "x"})
    finally:
        components.trackers.unregister("recorder")

    import importlib.util

    real = importlib.util.find_spec
    # every module of the extra missing (the message names each; the same with or without the extra installed)
    extra = ("mlflow", "sqlalchemy", "alembic")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in extra else real(name, *a))
    with pytest.raises(
        ConfigError, match=r"tracker=mlflow needs mlflow, sqlalchemy, alembic: pip install -e '\.\[mlflow\]'"
    ):
        open_tracker("mlflow")


def test_a_tracker_that_fails_keeps_the_run_and_says_so(
    tmp_path: Path, make_run: Any, run_a_plans: Any, capsys: Any
) -> None:
    from modulo.trackers import EXIT_NOT_TRACKED, log_to_tracker

    class Broken(Tracker):
        name = "broken"

        def log_run(self, run_dir: Path, *, tags: Any = None) -> str:
            raise OSError("store is read-only")

    run = make_run(tmp_path / "a", run_a_plans)
    assert log_to_tracker(Broken(), run) == EXIT_NOT_TRACKED == 4
    err = capsys.readouterr().err
    assert "the run was NOT logged (OSError: store is read-only)" in err
    assert f"modulo track {run} --tracker broken" in err
    assert (run / "records.jsonl").is_file()


def test_a_run_with_an_unpriced_model_logs_no_dollar_metric(tmp_path: Path, make_run: Any, run_a_plans: Any) -> None:
    """Its calls counted $0 for want of a price: the tracker logs no cost metric (a lower bound posing as a
    price), tags the models and says why; a priced run logs its dollars."""
    run = make_run(tmp_path / "a", run_a_plans)
    assert "cost_usd" in tracked_run(run).metrics
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "unpriced_models": ["mystery-model-xyz"]}))
    data = tracked_run(run)
    assert "cost_usd" not in data.metrics and "cached_cost_usd" not in data.metrics and "seconds" in data.metrics
    assert data.tags["modulo.unpriced_models"] == "mystery-model-xyz"
    assert any("no price is known for mystery-model-xyz" in note for note in data.notes)


def test_certified_rates_leave_out_errored_and_skipped_problems(
    tmp_path: Path, make_run: Any, run_a_plans: Any
) -> None:
    """The tracker's certified_rate and certified_at_budget, and the budget frame's certified column,
    divided by every recorded problem, errored and skipped ones included (2 certified of 4 scored logged
    as 0.33), while the report leaves those out of every rate (2/4)."""
    import modulo.analysis as analysis

    run = make_run(tmp_path / "a", run_a_plans)  # p0 certified at iteration 1, p4 at once; 6 problems
    set_outcome(run, 1, "error")
    set_outcome(run, 2, "skipped")
    data = tracked_run(run)
    assert data.metrics["certified_rate"] == pytest.approx(2 / 4)
    assert (data.metrics["n_error"], data.metrics["n_skipped"], data.metrics["problems"]) == (1, 1, 6)
    assert data.series["certified_at_budget"][:2] == [(1, 1 / 4), (2, 2 / 4)]
    frame = analysis.load(run).budget(evaluate=False)
    assert frame["problems"].tolist()[0] == 4 and frame["certified"].tolist()[:2] == [1 / 4, 2 / 4]


def test_a_run_that_did_not_end_clean_is_tagged_with_its_status(
    tmp_path: Path, make_run: Any, run_a_plans: Any
) -> None:
    """A logged run with an errored problem, or killed, looked like any finished run in the tracker (its
    only sign an n_error metric); the modulo.status tag says how it ended, as the report's Status does."""
    clean = make_run(tmp_path / "clean", run_a_plans)
    assert tracked_run(clean).tags["modulo.status"] == "complete"
    run = make_run(tmp_path / "a", run_a_plans, evaluate=False, truncate_last=True)
    set_outcome(run, 1, "error")
    assert tracked_run(run).tags["modulo.status"] == "errors (1 of 6 problems); incomplete (5/6, not evaluated)"
