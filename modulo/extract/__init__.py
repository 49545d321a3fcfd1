"""``modulo critics extract``: LLM-extracted critics, admitted only through a test gate.

LLM-Modulo applied to writing critics (the LLM-Modulo paper, section 4.3): for each constraint of a
benchmark the model is asked for a critic (a Python function of a fixed shape, :mod:`.runtime`); the
candidate runs in the sandbox (:mod:`modulo.sandbox`) against a gate set the benchmark labels with its
own oracle (:meth:`~modulo.benchmark.Benchmark.gate_cases`); the gate's failures on the training part
go back to the model as feedback, up to a budget (:mod:`.loop`); a candidate is admitted only with zero
false rejections and recall at or above the threshold on the training part *and* on a held-out part
the model never saw (:mod:`.gate`). Admitted critics become an installable plugin package with their
gate reports inside (:mod:`.package`), untrusted, so they always run in the sandbox.

The benchmark supplies everything domain-specific through hooks: ``extraction_constraints``,
``critic_view`` and ``gate_cases``; this package names no benchmark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GateSettings", "run_extraction"]


def __getattr__(name: str) -> Any:  # the CLI imports this package's defaults without the whole machinery
    if name == "run_extraction":
        from .run import run_extraction

        return run_extraction
    if name == "GateSettings":
        from .gate import GateSettings

        return GateSettings
    raise AttributeError(name)
