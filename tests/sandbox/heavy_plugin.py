"""CPU-heavy test critics (``heavy=True``): one that judges, and ones that crash, exit, change the plan or
hang. Importing it registers them in-process; a heavy-critic worker imports it the same way."""

from __future__ import annotations

import os
import time
from typing import Any

from modulo import components
from modulo.critic import critic
from modulo.types import Problem, Verdict


@critic("heavy_count", heavy=True, description="the plan's JSON holds fewer than 5 values")
def heavy_count(problem: Problem, plan: Any) -> Verdict:
    values = len(plan) if isinstance(plan, (list, dict)) else 1
    pid = os.getpid()
    if values < 5:
        return Verdict.ok(values=values, pid=pid)
    return Verdict.fail(f"{problem.id}: the plan holds {values} values", values=values, pid=pid)


@critic("heavy_raise", heavy=True, description="raises")
def heavy_raise(problem: Problem, plan: Any) -> Verdict:
    raise ValueError("heavy critic bug")


@critic("heavy_exit", heavy=True, description="kills its own process")
def heavy_exit(problem: Problem, plan: Any) -> Verdict:
    os._exit(3)


@critic("heavy_mutate", heavy=True, description="changes its copy of the plan")
def heavy_mutate(problem: Problem, plan: Any) -> Verdict:
    plan.append(99)
    return Verdict.ok()


@critic("heavy_hang", heavy=True, description="sleeps for a minute")
def heavy_hang(problem: Problem, plan: Any) -> Verdict:
    time.sleep(60)
    return Verdict.ok()


@critic("heavy_slow", heavy=True, description="takes a second, then passes")
def heavy_slow(problem: Problem, plan: Any) -> Verdict:
    time.sleep(1.0)
    return Verdict.ok()


@critic("heavy_thread", heavy="thread", description="a GIL-releasing critic: runs in its own thread")
def heavy_thread(problem: Problem, plan: Any) -> Verdict:
    return Verdict.ok(pid=os.getpid())


for _factory in (heavy_count, heavy_raise, heavy_exit, heavy_mutate, heavy_hang, heavy_slow, heavy_thread):
    components.critics.register(_factory.name, _factory, replace=True)
