"""The sandbox executor runs its critics in their workers beside one batch of the in-process critics,
and gives the outcomes back in order, up to a stop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from modulo.critic import Critic, critic
from modulo.errors import CriticError
from modulo.executor import FrozenPlan, ThreadExecutor
from modulo.sandbox import SandboxExecutor, SandboxSpec
from modulo.types import Problem, Verdict

PROBLEM = Problem(id="p", benchmark="synth/tasks", query="q")


def _critic(name: str) -> Critic:
    @critic(name)
    def fn(problem: Problem, plan: Any) -> Verdict:
        return Verdict.ok()

    return fn()


class Recording(ThreadExecutor):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    async def run_all(self, critics: Sequence[Critic], *args: Any, **kwargs: Any) -> Any:
        self.batches.append([c.name for c in critics])
        return await super().run_all(critics, *args, **kwargs)


class FakeSandbox(SandboxExecutor):
    """Sandboxed critics answer here instead of in a worker: ``bad`` fails, the others pass."""

    async def run(self, critic: Critic, problem: Problem, frozen: FrozenPlan, timeout_s: float) -> Verdict:
        if critic.name not in self.sandboxed:
            return await self.inner.run(critic, problem, frozen, timeout_s)
        if critic.name == "bad":
            raise CriticError(critic.name, RuntimeError("boom"))
        return Verdict.ok().model_copy(update={"critic": critic.name})


def test_in_process_critics_go_as_one_batch_and_outcomes_come_back_in_order() -> None:
    critics = [_critic(n) for n in ("a", "b", "s1", "c", "bad", "d")]
    inner = Recording()
    ex = FakeSandbox(["s1", "bad"], SandboxSpec(benchmark="synth/tasks"), inner=inner)
    frozen = FrozenPlan.of({})
    outcomes = asyncio.run(ex.run_all(critics, PROBLEM, frozen, [5.0] * len(critics)))
    assert [getattr(o, "critic", None) for o in outcomes] == ["a", "b", "s1", "c", "bad", "d"]
    assert isinstance(outcomes[4], CriticError)
    assert inner.batches == [["a", "b", "c", "d"]]
    inner.batches.clear()
    stopped = asyncio.run(
        ex.run_all(critics, PROBLEM, frozen, [5.0] * len(critics), stop=lambda c, o: isinstance(o, CriticError))
    )
    assert len(stopped) == 5 and isinstance(stopped[-1], CriticError)
    ex.close()
