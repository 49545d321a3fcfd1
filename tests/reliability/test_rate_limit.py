"""The request rate limit holds where it matters, at the server, retries included.

A short version of ``benchmarks/reliability_rate.py`` (which measures over more than a minute):
a whole run with faults against the fake provider, ``llm.requests_per_minute`` set, and the
arrival times counted in sliding windows.
"""

from __future__ import annotations

import pytest

from modulo.testing.drills import fault_rates, max_in_window, run_in_process

from .conftest import DrillFactory

RPM = 1200.0  # 20 a second; the limiter allows a burst of one second's worth


@pytest.mark.slow
def test_requests_per_minute_hold_at_the_server_with_retries(drill: DrillFactory) -> None:
    d = drill(retry_after_s=0.0, fault_rates=fault_rates(0.2, ("server_error", "rate_limit_bare", "reset")))
    overrides = d.overrides("rate", n=32, concurrency=8, extra=[f"llm.requests_per_minute={RPM}"])
    d.script(overrides)
    run_in_process(overrides)
    stats = d.fake.stats()
    arrivals = stats.arrivals
    faults = sum(v for k, v in stats.by_fault.items() if k != "ok")
    assert len(arrivals) > 100 and faults > 10  # long enough to matter, retries included
    rate, burst = RPM / 60.0, RPM / 60.0
    for window in (0.5, 1.0, 2.0, 4.0):
        assert max_in_window(arrivals, window) <= burst + rate * window + 1, window
    span = arrivals[-1] - arrivals[0]
    assert (len(arrivals) - burst) / span <= rate * 1.05  # beyond the first burst, the rate is the limit
