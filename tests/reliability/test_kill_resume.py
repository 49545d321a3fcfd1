"""A run killed with SIGKILL at ten random moments, resumed each time, ends as an uninterrupted run,
and no request whose reply was recorded is ever sent again.

Each ``modulo run`` process is a child of a fork server (the real command line, started in
milliseconds instead of seconds of imports). A kill comes a random number of requests into a
process, right away (the request is in flight) or up to 50 ms later (the client is parsing
replies, writing the cache, running critics or fsync'ing a record). After each kill the requests
whose replies were recorded (response cache, run records) are noted; every later request is then
classified at the server: first send, retry after a fault, or re-send of a request that was in
flight at a kill. Re-sending a recorded request is a repeated paid request: there must be none.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from modulo.runs import RECORDS, read_records
from modulo.testing.drills import (
    KillSwitch,
    Launcher,
    comparable,
    fault_rates,
    kill_drill,
    records,
    request_digest,
    run_in_process,
)

from .conftest import DrillFactory

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out

N, KILLS = 20, 10


def test_ten_sigkills_and_resumes_end_as_an_uninterrupted_run(drill: DrillFactory) -> None:
    d = drill(wrap=KillSwitch, retry_after_s=0.01)
    reference = d.overrides("reference", n=N, concurrency=4)
    d.script(reference)
    run_in_process(reference)
    ref_requests = list(d.fake.requests)
    ref_digests = {request_digest(r.messages) for r in ref_requests}
    assert len(ref_digests) == len(ref_requests)  # every request of the uninterrupted run is distinct

    # the killed run also meets transient faults, so that retries are told apart from repeats
    d.fake.fault_rates = fault_rates(0.1, ("rate_limit", "server_error", "reset"))
    overrides = d.overrides("killed", n=N, concurrency=4)
    launcher = Launcher(fork=True, preload=["critics.synth.benchmark"])
    try:
        switch = d.fake.replies
        assert isinstance(switch, KillSwitch)
        report = kill_drill(
            d.fake,
            switch,
            overrides,
            run_dir=d.tmp / "killed",
            cache_file=d.tmp / "killed-cache" / "llm-cache.sqlite",
            kills=KILLS,
            expected_requests=len(ref_requests),
            seed=7,
            launcher=launcher,
        )
    finally:
        launcher.close()

    assert report.kills == KILLS, [p.returncode for p in report.phases]
    assert report.phases[-1].returncode == 0 and "resumed" in report.output
    kinds = Counter(s.kind for s in report.sends)
    # no request whose reply was recorded was sent again, nor any answered one within a process
    assert report.repeated_paid == 0, [s for s in report.sends if s.kind.startswith("repeated")]
    # every distinct request of the uninterrupted run was sent once for the first time, and no other
    assert kinds["first"] == len(ref_digests) and report.digests == ref_digests
    # the extra requests are retries after faults and re-sends of requests in flight at a kill
    assert report.requests == kinds["first"] + kinds["retried_after_fault"] + kinds["resent_after_kill"]
    assert kinds["resent_after_kill"] >= 1 and kinds["retried_after_fault"] >= 1
    # and the run ends exactly as the uninterrupted one
    assert comparable(d.tmp / "killed") == comparable(d.tmp / "reference")
    assert len(list(read_records(d.tmp / "killed"))) == N  # each problem recorded once


def test_a_record_cut_off_by_a_kill_is_dropped_on_resume(drill: DrillFactory) -> None:
    # a kill in the middle of writing a record leaves half a line; the resumed run must not append
    # the next record to it (that record would be lost) but start on a fresh line
    d = drill()
    overrides = d.overrides("torn", n=4)
    d.script(overrides)
    run_in_process(overrides)
    path: Path = d.tmp / "torn" / RECORDS
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    assert len(records(d.tmp / "torn")) == 3
    requests = d.fake.stats().requests

    result = run_in_process(overrides)
    assert result.state.resumed == 3
    assert d.fake.stats().requests == requests  # the cut-off problem is re-run from the cache
    assert len(list(read_records(d.tmp / "torn"))) == 4
    assert path.read_bytes().endswith(b"\n") and len(path.read_bytes().splitlines()) == 4
    assert comparable(d.tmp / "torn") == comparable(records(d.tmp / "torn"))
