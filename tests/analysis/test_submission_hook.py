"""The default ``Benchmark.write_submission`` refuses with a clear error and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from modulo.errors import ConfigError
from tests.core.toy import Toy


def test_default_benchmark_has_no_submission_format(tmp_path: Path) -> None:
    bench = Toy()
    assert bench.submission_formats == ()
    out = tmp_path / "sub.jsonl"
    with pytest.raises(ConfigError, match=r"no submission format 'official' \(its submission formats: none\)"):
        bench.write_submission("official", bench.load("dev"), {}, out)
    assert not out.exists()
