"""A run with 20% of its requests faulted ends exactly like a fault-free run over the same answers.

Both runs drive the real stack (configuration, OpenAI backend with the official SDK, response cache,
run directory) against the fake provider. Every fault the client retries (429 with and without
Retry-After, 500, 503, 529, dropped connections, timeouts, empty replies) is injected, one request
in five. The faulted run must lose no problem, end with the same outcomes, plans, replies and
verdicts, record every fault in the traces under its class, and send no answered request twice.
Faults that change what the model says (cut-off, refused or broken answers) are not retried: they
become format failures, recorded, and the loop goes on.
"""

from __future__ import annotations

from collections import Counter

import pytest

from modulo.testing.drills import (
    TRACE_CLASS,
    comparable,
    expected_trace_faults,
    fault_pattern,
    paid_repeats,
    records,
    run_in_process,
    trace_faults,
)
from modulo.types import Outcome

from .conftest import DrillFactory

N = 32


@pytest.mark.slow
def test_twenty_percent_faults_change_nothing_but_the_traces(drill: DrillFactory) -> None:
    d = drill(retry_after_s=0.01, hang_s=4.0)
    clean = d.overrides("clean", n=N)
    kinds = d.script(clean)
    assert set(kinds.values()) == {"first", "second", "wrong", "none"}
    run_in_process(clean)
    clean_requests = d.fake.stats().requests

    d.fake.reset_stats()
    d.fake.push_faults(*fault_pattern(5 * clean_requests, 0.2, seed=3))
    faulted = d.overrides("faulted", n=N, timeout_s=3.0)
    result = run_in_process(faulted)
    stats = d.fake.stats()

    # one request in five was faulted, with every retried kind
    faults = {k: v for k, v in stats.by_fault.items() if k != "ok"}
    assert sum(faults.values()) == stats.requests // 5 or sum(faults.values()) == stats.requests // 5 + 1
    assert set(faults) == set(TRACE_CLASS), faults
    # no problem lost, none ended in error, and each ended exactly as in the fault-free run
    assert len(records(d.tmp / "faulted")) == N
    assert Outcome.ERROR.value not in result.summary["counts"]
    assert comparable(d.tmp / "faulted") == comparable(d.tmp / "clean")
    assert result.summary["counts"] == {"certified": N // 2, "exhausted": N // 4, "failed": N // 4}
    # every fault is in the traces, under its class
    assert trace_faults(result.results) == expected_trace_faults(stats.by_fault)
    # the extra requests are exactly the retries of faulted ones; no answered request was sent again
    assert stats.requests == clean_requests + sum(faults.values())
    assert paid_repeats(d.fake.requests) == []
    usage = result.summary["usage"]
    assert usage["failed_calls"] == sum(faults.values())


def test_faults_in_the_answers_become_recorded_format_failures(drill: DrillFactory) -> None:
    # cut-off, empty-after-retries, refused, broken or schema-ignoring answers are what the model said:
    # not retried, they become format verdicts and the loop asks again
    d = drill()
    overrides = d.overrides("content", n=8, max_retries=1)
    d.script(overrides)
    content = ["truncated", "refusal", "invalid_json", "truncated_json", "ignore_schema"]
    d.fake.push_faults(*content)
    result = run_in_process(overrides)
    assert len(result.results) == 8 and result.aborted is None
    faulted = [it for r in result.results for it in r.iterations if it.format_error is not None]
    assert len(faulted) >= len(content) - 1  # a faulted generate reply may still carry the plan
    for it in faulted:
        assert it.verdicts[0].critic == "format" and not it.verdicts[0].passed
        assert "Your answer could not be read as a plan" in it.verdicts[0].feedback
        assert it.backprompt is None or "HTTP" not in it.backprompt
    assert Counter(r.outcome.value for r in result.results)[Outcome.ERROR.value] == 0
