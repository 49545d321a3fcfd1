"""A wrong value for an LLM setting is a clear configuration error, not a traceback (issue 14 item 6)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow  # modulo in a subprocess
def test_a_wrong_structured_output_value_is_a_clear_error_naming_the_key() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "modulo.cli.main", "check", "llm=scripted", "llm.structured_output=maybe"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "llm.structured_output" in out and "one of schema, json, off" in out
    assert "Traceback" not in out
