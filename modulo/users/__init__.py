"""The user in the loop: who answers the planner's questions and changes the problem mid-loop.

A *turn* of the loop (:mod:`modulo.metacontroller`) is one of:

* a plan iteration (generate -> reformulate -> critique -> backprompt), as always;
* a **question**: the generator's reply is a clarification question (``Generation.question``; the LLM
  generator reads it through the benchmark's :meth:`~modulo.benchmark.Benchmark.classify_reply`, a reply
  starting ``QUESTION:``), which the configured :class:`User` answers (:meth:`User.answer`);
* an **abstention**: the generator declines with a reason (``Generation.abstain``; a reply starting
  ``ABSTAIN:`` or ``[Unsolved]``). The loop stops with outcome ``abstained`` and records the benchmark's
  :meth:`~modulo.benchmark.Benchmark.check_abstention` of the reason.

After turn *k* the loop applies the :class:`~modulo.types.ProblemUpdate` s due then: those of
``user.updates`` (config, ``after: k``), those the benchmark scheduled on the problem
(``Problem.updates``), those the user yields (:meth:`User.updates`), and one an answer carried
(``UserAnswer.update``: a hidden constraint told when asked). Each goes through
:meth:`~modulo.benchmark.Benchmark.apply_update`, which returns the new problem the critics check from
then on; the next backprompt says what changed, and certification is judged against the constraints in
force at the end.

Hidden information lives in ``Problem.hidden`` and is read only by users: the loop hands the generator,
the reformulator and the backprompt strategy ``problem.planner_view()``, which has none.

Users are registered under the ``modulo.users`` entry-point group (``scripted``, ``llm``; ``modulo list
users``) and named in the config by ``user=NAME`` (the ``user`` group; ``user=none`` is the default).
"""

from __future__ import annotations

from ..types import ProblemUpdate, UserAnswer
from .base import (
    NO_MORE_QUESTIONS,
    NO_USER_REPLY,
    DialogueTurn,
    User,
    UserContext,
    UserReply,
    in_force,
    updates_from,
)

__all__ = [
    "NO_MORE_QUESTIONS",
    "NO_USER_REPLY",
    "DialogueTurn",
    "ProblemUpdate",
    "User",
    "UserAnswer",
    "UserContext",
    "UserReply",
    "in_force",
    "updates_from",
]
