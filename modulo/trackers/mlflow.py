"""``tracker=mlflow``: each run (each sweep job) becomes one MLflow run in a local store.

Needs the ``mlflow`` extra (``pip install -e ".[mlflow]"``: mlflow-skinny with SQLAlchemy and Alembic
for the SQLite store). Arguments (``tracker.args.NAME=VALUE``):

* ``tracking_uri``: where to log. Default: ``$MLFLOW_TRACKING_URI``, else ``sqlite:///./mlflow.db``
  (resolved to an absolute path when the tracker is made, so every sweep job logs to the same file).
  A folder store (``file:./mlruns``) works too; MLflow 3 keeps it in maintenance mode, so choosing one
  sets ``MLFLOW_ALLOW_FILE_STORE=true`` for this process. ``mlflow ui --backend-store-uri URI`` (from
  the full ``mlflow`` package) opens either.
* ``experiment``: the MLflow experiment (default ``modulo``), created when missing; with a SQLite store
  its artifacts go to ``mlartifacts/`` beside the database file.
* ``artifacts``: store the run's files (default true).

Nothing leaves the machine unless ``tracking_uri`` names a server; what is logged comes from
:func:`modulo.trackers.tracked_run` (redacted configuration, never a key).
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlparse

from ..errors import ConfigError
from . import Tracker, tracked_run

DEFAULT_EXPERIMENT = "modulo"
_BATCH = 100  # MLflow's limit of params (and a safe number of metrics) per log_batch call


def _local_path(uri: str) -> Path | None:
    """The filesystem path of a sqlite:/// or file: URI (None for a server)."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :])
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme == "" and uri:
        return Path(uri)
    return None


class MLflowTracker(Tracker):
    name: ClassVar[str] = "mlflow"
    description: ClassVar[str] = "log each run or sweep job as an MLflow run (local SQLite or folder store)"

    def __init__(self, tracking_uri: str | None = None, experiment: str = DEFAULT_EXPERIMENT, artifacts: bool = True):
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
        needs = ["mlflow"]
        self._artifact_root: str | None = None
        local = _local_path(uri)
        if local is not None:
            local = local.expanduser()
            local = local if local.is_absolute() else Path.cwd() / local
        if uri.startswith("sqlite:///") and local is not None:
            needs += ["sqlalchemy", "alembic"]
            uri = f"sqlite:///{local}"
            self._artifact_root = (local.parent / "mlartifacts").as_uri()
        elif local is not None:
            uri = local.as_uri()
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # the user chose a folder store
        missing = [m for m in needs if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigError(
                f"tracker=mlflow needs {', '.join(missing)}: pip install -e '.[mlflow]' "
                "(mlflow-skinny, sqlalchemy, alembic)"
            )
        if not experiment:
            raise ConfigError("tracker.args.experiment must not be empty")
        self.tracking_uri = uri
        self.experiment = experiment
        self.artifacts = artifacts

    def _client(self) -> Any:
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.tracking_uri)

    def _experiment_id(self, client: Any) -> str:
        found = client.get_experiment_by_name(self.experiment)
        if found is not None:
            return str(found.experiment_id)
        try:
            return str(client.create_experiment(self.experiment, artifact_location=self._artifact_root))
        except Exception:  # another sweep job created it first
            found = client.get_experiment_by_name(self.experiment)
            if found is None:
                raise
            return str(found.experiment_id)

    def log_run(self, run_dir: Path, *, tags: Mapping[str, str] | None = None) -> str:
        from mlflow.entities import Metric, Param, RunTag

        data = tracked_run(run_dir)
        client = self._client()
        exp = self._experiment_id(client)
        run_tags = {**data.tags, **{str(k): str(v) for k, v in (tags or {}).items()}}
        run = client.create_run(exp, run_name=str(run_tags.get("modulo.job_name") or data.name), tags=run_tags)
        run_id = str(run.info.run_id)
        try:
            now = int(time.time() * 1000)
            params = [Param(k, v) for k, v in data.params.items()]
            metrics = [Metric(k, v, now, 0) for k, v in data.metrics.items()]
            for key, points in data.series.items():
                metrics += [Metric(key, value, now, step) for step, value in points]
            for i in range(0, len(params), _BATCH):
                client.log_batch(run_id, params=params[i : i + _BATCH])
            for i in range(0, len(metrics), _BATCH):
                client.log_batch(run_id, metrics=metrics[i : i + _BATCH])
            if data.notes:
                client.log_batch(run_id, tags=[RunTag("modulo.notes", " | ".join(data.notes)[:5000])])
            if self.artifacts:
                for path in data.artifacts:
                    client.log_artifact(run_id, str(path))
        except BaseException:
            client.set_terminated(run_id, status="FAILED")
            raise
        client.set_terminated(run_id, status="FINISHED")
        return f"{self.tracking_uri} experiment {self.experiment!r} run {run_id}"
