"""Results where researchers analyse them: runs and sweeps as pandas DataFrames.

::

    import modulo.analysis as a

    r = a.load("multirun/2026-11-24/10-00-00")     # a run directory, a sweep root, or several of either
    r.problems()     # one row per finished problem: outcome, best iteration, usage, cost, eval.* columns
    r.iterations()   # one row per iteration: critic.<name> status, flips, tokens, cache hits, timings
    r.verdicts()     # one row per critic per iteration: status, feedback level, feedback, details
    r.calls()        # one row per model call: stage, faults, tokens, cost
    r.runs()         # one row per run: labels, outcome counts, metrics, full configuration (cfg.*)
    r.problems().groupby(["critics", "strategy"])["certified"].mean()

Every frame carries the run's labels (``run``, ``method``, ``model``, ``critics``, ``strategy``,
``budget``, ...) and a ``cfg.<key>`` column for each configuration key the loaded runs differ in.
Records are streamed one line at a time (:func:`iter_records`), never held as objects.
"""

from .frames import GRAINS, STATUSES, Results, build_frame, load, varying_params
from .records import iter_records
from .runs import LABEL_COLUMNS, RunMeta, flatten, load_metas

__all__ = [
    "GRAINS",
    "LABEL_COLUMNS",
    "STATUSES",
    "Results",
    "RunMeta",
    "build_frame",
    "flatten",
    "iter_records",
    "load",
    "load_metas",
    "varying_params",
]
