"""API keys come from the environment only, and a whole run never writes or prints one.

A real ``modulo run`` process gets a recognisable fake key in ``$OPENAI_API_KEY`` and runs against
the fake provider, which also meets faults, among them a 401 whose message echoes the key it was
sent (as a careless server might). Every file the run (report included), its resume and ``modulo
show`` write (run directory, Hydra's logs and saved config, response cache, home and temp folders,
all inside the test's folder) and everything they print is then searched for the key, and for a
fragment of it. A key put on the command line instead is refused before anything is written.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from modulo.testing.drills import Launcher, cli_command, records
from modulo.types import ProblemResult

from .conftest import DrillFactory

KEY = "sk-modulo-reliability-SECRET-5e1f0c2b9a7d"
NEEDLES = [KEY, KEY[-14:], KEY[3:20]]


def isolated_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    for name in ("home", "xdg-cache", "tmp", "default-cache"):
        (tmp / name).mkdir(exist_ok=True)
    env.update(
        HOME=str(tmp / "home"),
        XDG_CACHE_HOME=str(tmp / "xdg-cache"),
        TMPDIR=str(tmp / "tmp"),
        MODULO_CACHE_DIR=str(tmp / "default-cache"),
        **extra,
    )
    return env


def run_with_a_401(
    modulo: Launcher, overrides: list[str], tmp_path: Path, outputs: list[str]
) -> dict[str, ProblemResult]:
    """``modulo run OVERRIDES`` into ``tmp_path/run`` (its console output appended to ``outputs``): the
    problems that met a 401 end in error (exit status 1); the records of its 6 problems by id."""
    code, out = modulo(["run", *overrides], tmp_path / "console-run.txt")
    outputs.append(out)
    assert code == 1, out[-3000:]
    by_id = records(tmp_path / "run")
    assert len(by_id) == 6
    return by_id


def leaks(root: Path, outputs: list[str]) -> list[str]:
    found = [f"console output {i}" for i, out in enumerate(outputs) for n in NEEDLES if n in out]
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [str(path) for n in NEEDLES if n.encode() in data]
    return found


@pytest.mark.slow
def test_a_whole_run_never_writes_or_prints_the_key(drill: DrillFactory, tmp_path: Path) -> None:
    d = drill(retry_after_s=0.01)
    work = tmp_path / "work"
    work.mkdir()
    overrides = d.overrides("run", n=6, max_retries=3, concurrency=2, report=True, extra=["hydra.verbose=true"])
    overrides = [o for o in overrides if not o.startswith("hydra.run.dir")] + [f"hydra.run.dir={tmp_path / 'run'}"]
    d.script(overrides)
    # one problem meets a 401 that echoes the key (a permanent error, recorded), others transient faults
    d.fake.push_faults("server_error", "ok", "auth", "rate_limit", "reset", "ok", "empty")
    # each command is its own process (children of a fork server started with the key in its environment)
    modulo = Launcher(fork=True, env=isolated_env(tmp_path, OPENAI_API_KEY=KEY), cwd=work)
    outputs = []
    try:
        by_id = run_with_a_401(modulo, overrides, tmp_path, outputs)
        assert any("auth" in (r.error or "") or "401" in (r.error or "") for r in by_id.values())
        # the key really went to the server (so this test can fail)...
        assert {r.api_key for r in d.fake.requests} == {KEY}

        # ...resume it (which writes the report again) and show a problem too...
        code, out = modulo(["run", *overrides], tmp_path / "console-resume.txt")
        outputs.append(out)
        assert code == 0 and "resumed" in out
        code, out = modulo(["show", str(tmp_path / "run"), sorted(by_id)[0]], tmp_path / "console-show.txt")
        outputs.append(out)
        assert code == 0, out[-2000:]
    finally:
        modulo.close()

    # ...and find it nowhere: not in a file under the test's folder, not on the console
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "llm-cache.sqlite" for p in written) and any(p.suffix == ".log" for p in written)
    assert (tmp_path / "run" / "report.md").exists()
    assert leaks(tmp_path, outputs) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "override",
    [
        f"llm.api_key_env={KEY}",  # the key where the name of its variable belongs
        f"++llm.args.api_key={KEY}",  # a key as a backend argument
        f"++llm.args.extra_headers.Authorization=Bearer {KEY}",  # a key anywhere else
    ],
)
def test_a_key_on_the_command_line_is_refused_before_anything_is_written(
    drill: DrillFactory, tmp_path: Path, override: str
) -> None:
    d = drill()
    overrides = [*d.overrides("cli-key", n=2), override]
    proc = subprocess.run(
        cli_command(overrides), env=isolated_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    code, out = proc.returncode, proc.stdout + proc.stderr
    assert code == 2 and "Traceback" not in out
    assert "environment" in out  # it says where keys belong
    assert d.fake.stats().requests == 0
    assert leaks(tmp_path, [out]) == []


TOKEN = "hf_tok3n-0f-the-reliability-drill-77c1"


def token_forms(token: str) -> list[str]:
    """The token raw, URL-encoded, JSON-escaped, and base64-encoded alone, as user:token, and inside a header."""
    import base64
    import json
    from urllib.parse import quote

    forms = {token, quote(token, safe=""), json.dumps(token)[1:-1], token[4:20], token[-16:]}
    for text in (token, f"user:{token}", f"Bearer {token}", f"x:{token}"):
        encoded = base64.b64encode(text.encode()).decode()
        forms.add(encoded)
        forms.add(encoded.rstrip("="))
    forms.add(base64.b64encode(token.encode()).decode()[:-4])  # the part of base64(token) that is the token's alone
    return sorted(forms)


@pytest.mark.slow
def test_a_token_in_a_header_a_url_and_extra_body_is_written_nowhere_in_any_form(
    drill: DrillFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14 item 1: a token read from the environment into a header, the base URL's password and
    extra_body, against a server that echoes everything it got (raw, URL-encoded, base64) in 401
    bodies and in 200 replies, appears in no file of the run, the cache and Hydra's output, nor on the
    console."""
    d = drill(retry_after_s=0.01)
    work = tmp_path / "work"
    work.mkdir()
    url = d.fake.openai_base_url.replace("http://", "http://user:${oc.env:DRILL_TOKEN}@")
    overrides = d.overrides(
        "run",
        n=6,
        max_retries=3,
        concurrency=2,
        report=True,
        extra=[
            "+llm.args.extra_headers.X-Api-Token=${oc.env:DRILL_TOKEN}",
            '+llm.args.extra_headers.api-key="Bearer ${oc.env:DRILL_TOKEN}"',
            "+llm.args.extra_body.api_token=${oc.env:DRILL_TOKEN}",
            "hydra.verbose=true",
        ],
    )
    overrides = [o for o in overrides if not o.startswith("llm.base_url=")] + [f"llm.base_url='{url}'"]
    monkeypatch.setenv("DRILL_TOKEN", TOKEN)
    d.script(overrides)
    d.fake.push_faults("auth_echo", "echo", "ok", "echo", "auth", "ok", "echo", "auth_echo")
    env = isolated_env(tmp_path, OPENAI_API_KEY=KEY, DRILL_TOKEN=TOKEN)
    modulo = Launcher(fork=True, env=env, cwd=work)
    outputs = []
    try:
        by_id = run_with_a_401(modulo, overrides, tmp_path, outputs)
        # the token really went out in all three places, and came back in the server's echoes (so this can fail)
        sent = d.fake.requests
        assert any(r.headers.get("x-api-token") == TOKEN for r in sent)
        assert any(r.headers.get("api-key") == f"Bearer {TOKEN}" for r in sent)
        assert any(r.body.get("api_token") == TOKEN for r in sent)
        assert {r.fault for r in sent} >= {"auth_echo", "echo"}
        show = ["show", str(tmp_path / "run"), sorted(by_id)[0], "--replies"]
        code, out = modulo(show, tmp_path / "console-show.txt")
        outputs.append(out)
        assert code == 0, out[-2000:]
    finally:
        modulo.close()
    text = (tmp_path / "run" / "records.jsonl").read_text()
    assert "[redacted]" in text  # the echoes were recorded, redacted
    found = []
    for needle in [*token_forms(TOKEN), KEY]:
        found += [f"console {i}: {needle}" for i, o in enumerate(outputs) if needle in o]
        for path in tmp_path.rglob("*"):
            if path.is_file() and not path.is_symlink() and needle.encode() in path.read_bytes():
                found.append(f"{path}: {needle}")
    assert found == []
    stored = (tmp_path / "run" / "config.yaml").read_text() + (tmp_path / "run" / "run.json").read_text()
    assert "//user:" not in stored and "@127.0.0.1" not in stored  # URLs are stored without userinfo


@pytest.mark.parametrize(
    "override",
    [
        "+llm.args.extra_headers.X-Api-Token=hf_abcdefghijklmnop",
        "+llm.args.extra_headers.Authorization=Bearer hf_abcdefghijklmnop",
        "+llm.args.extra_body.api_token=hf_abcdefghijklmnop",
        "++llm.args.extra_headers={api-key: hf_abcdefghijklmnop}",
        "llm.base_url=http://user:hf_abcdefghijklmnop@127.0.0.1:9/v1",
        "+llm.args.password=hf_abcdefghijklmnop",
    ],
)
def test_a_literal_secret_in_any_shape_is_refused_before_anything_is_written(override: str) -> None:
    from modulo.errors import ConfigError
    from modulo.llm.keys import reject_secret_overrides

    with pytest.raises(ConfigError) as info:
        reject_secret_overrides([override])
    assert "hf_abcdefghijklmnop" not in str(info.value) and "oc.env" in str(info.value)


@pytest.mark.parametrize(
    "override",
    [
        "+llm.args.extra_body.top_k=5",
        "llm.max_tokens=100",
        "llm.api_key_env=MY_KEY",
        "+llm.args.extra_headers.X-Api-Token=${oc.env:TOKEN}",
        "llm.base_url=http://127.0.0.1:9/v1",
    ],
)
def test_ordinary_settings_and_environment_references_are_accepted(override: str) -> None:
    from modulo.llm.keys import reject_secret_overrides

    reject_secret_overrides([override])


def test_a_literal_secret_in_a_config_file_is_refused() -> None:
    from modulo.errors import ConfigError
    from modulo.redact import check_config

    with pytest.raises(ConfigError, match=r"llm\.args\.extra_headers\.X-Token"):
        check_config({"llm": {"args": {"extra_headers": {"X-Token": "abcdefgh12345"}}}})
    check_config({"llm": {"args": {"extra_headers": {"X-Token": "${oc.env:T}"}}}})


def test_redaction_covers_every_form() -> None:
    import base64
    import json
    from urllib.parse import quote, quote_plus

    from modulo.redact import redact, register

    secret = "s3cr3t value/with+odd chars"
    register(secret)
    for form in (
        secret,
        quote(secret, safe=""),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        base64.b64encode(secret.encode()).decode(),
        base64.b64encode(f"alice:{secret}".encode()).decode(),
        base64.b64encode(f"ab:{secret}".encode()).decode(),
        base64.urlsafe_b64encode(secret.encode()).decode(),
    ):
        out = redact(f"before {form} after")
        assert form not in out and "[redacted]" in out, form
