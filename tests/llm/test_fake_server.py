"""The fake provider itself: routes, counters, seeded faults, scripts, generated replies and its CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from modulo.testing import FAULT_KINDS, FakeProvider
from tests.cli_support import modulo

from .support import ProviderFactory

SCHEMA = {
    "type": "object",
    "properties": {
        "days": {"type": "array", "minItems": 2, "items": {"$ref": "#/$defs/Day"}},
        "mode": {"enum": ["train", "car"]},
    },
    "required": ["days", "mode"],
    "$defs": {"Day": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}},
}


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def chat(fake: FakeProvider, text: str = "hi", **body: Any) -> tuple[int, dict[str, Any]]:
    payload = {"model": "m", "messages": [{"role": "user", "content": text}], **body}
    return post(fake.openai_base_url + "/chat/completions", payload)


def content(reply: dict[str, Any]) -> str:
    return str(reply["choices"][0]["message"]["content"])


def test_stats_endpoint_and_control_routes(provider: ProviderFactory) -> None:
    fake = provider(["a", "b"])
    assert chat(fake)[0] == 200
    assert post(fake.url + "/_faults", {"faults": ["server_error"]})[0] == 200
    assert chat(fake)[0] == 500
    with urllib.request.urlopen(fake.url + "/_stats", timeout=10) as resp:
        stats = json.loads(resp.read())
    assert stats["requests"] == 2 and stats["by_fault"] == {"ok": 1, "server_error": 1}
    assert stats["by_path"] == {"/v1/chat/completions": 2} and stats["by_status"] == {"200": 1, "500": 1}
    assert post(fake.url + "/_faults", {"faults": ["no_such_fault"]})[0] == 400
    assert post(fake.url + "/nowhere", {})[0] == 404
    post(fake.url + "/_reset", {})
    assert fake.stats().requests == 0 and fake.requests == []
    assert content(chat(fake)[1]) == "b"  # the faulted request consumed no reply


def test_seeded_fault_rates_are_reproducible(provider: ProviderFactory) -> None:
    rates = {"server_error": 0.2, "rate_limit": 0.2, "empty": 0.1}
    runs = []
    for _ in range(2):
        fake = provider(fault_rates=rates, seed=11)
        statuses = [chat(fake, f"q{i}")[0] for i in range(60)]
        runs.append(statuses)
        stats = fake.stats()
        assert sum(stats.by_fault.values()) == 60
        assert 3 <= stats.fault("server_error") <= 25 and 3 <= stats.fault("rate_limit") <= 25
        fake.stop()
    assert runs[0] == runs[1]
    with pytest.raises(ValueError, match="unknown fault"):
        FakeProvider(fault_rates={"gremlins": 0.1})
    with pytest.raises(ValueError, match="add up"):
        FakeProvider(fault_rates={"empty": 0.6, "reset": 0.6})


def test_rate_limit_headers(provider: ProviderFactory) -> None:
    fake = provider(faults=["rate_limit"], retry_after_s=0.25)
    req = urllib.request.Request(
        fake.openai_base_url + "/chat/completions",
        data=json.dumps({"messages": []}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=10)
    assert info.value.code == 429
    assert info.value.headers["Retry-After"] == "0.25" and info.value.headers["retry-after-ms"] == "250"


def test_content_faults(provider: ProviderFactory) -> None:
    fake = provider(
        ['{"days": [{"n": 1}, {"n": 2}], "mode": "car"}'] * 8,
        faults=["invalid_json", "truncated_json", "ignore_schema", "empty", "truncated", "refusal", "slow"],
        slow_s=0.2,
    )
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
    replies = []
    for _ in range(6):
        status, body = chat(fake, response_format=fmt)
        assert status == 200
        replies.append(body["choices"][0])
    with pytest.raises(json.JSONDecodeError):
        json.loads(replies[0]["message"]["content"])
    with pytest.raises(json.JSONDecodeError):
        json.loads(replies[1]["message"]["content"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(replies[2]["message"]["content"]), SCHEMA)
    assert replies[3]["message"]["content"] == ""
    assert replies[4]["finish_reason"] == "length"
    assert replies[5]["message"]["content"] is None and "can't help" in replies[5]["message"]["refusal"]
    started = time.monotonic()
    status, body = chat(fake, response_format=fmt)
    assert time.monotonic() - started >= 0.19
    jsonschema.validate(json.loads(content(body)), SCHEMA)
    assert fake.stats().by_fault["slow"] == 1


def test_generated_replies_follow_the_schema_and_are_deterministic(provider: ProviderFactory) -> None:
    fake = provider(seed=5)
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
    first = content(chat(fake, "same prompt", response_format=fmt)[1])
    again = content(chat(fake, "same prompt", response_format=fmt)[1])
    assert first == again
    jsonschema.validate(json.loads(first), SCHEMA)
    llamacpp = content(chat(fake, "other", response_format={"type": "json_object", "schema": SCHEMA})[1])
    jsonschema.validate(json.loads(llamacpp), SCHEMA)
    assert isinstance(json.loads(content(chat(fake, response_format={"type": "json_object"})[1])), dict)
    assert content(chat(fake, "free text")[1]).endswith(".")


def test_problem_id_from_header_or_message(provider: ProviderFactory) -> None:
    fake = provider({"p1": ["one-a", "one-b"], "p2": ["two"]})
    url = fake.openai_base_url + "/chat/completions"
    by_header = post(url, {"messages": [{"role": "user", "content": "x"}]}, {"X-Modulo-Problem-Id": "p1"})
    assert content(by_header[1]) == "one-a"
    assert content(chat(fake, "Solve this. problem_id: p2")[1]) == "two"
    assert content(chat(fake, "problem_id=p1 again")[1]) == "one-b"
    status, body = chat(fake, "problem_id: p2")
    assert status == 400 and "script exhausted for problem 'p2'" in body["error"]["message"]
    status, body = chat(fake, "no id at all")
    assert status == 400 and "no script for problem ''" in body["error"]["message"]
    assert fake.stats().by_fault["script_exhausted"] == 2


def test_script_entries_can_inject_faults(provider: ProviderFactory) -> None:
    fake = provider([{"fault": "server_error"}, {"fault": "truncated", "text": "abcdefgh"}, "plain"])
    assert chat(fake)[0] == 500
    status, body = chat(fake)
    assert status == 200 and content(body) == "abcd" and body["choices"][0]["finish_reason"] == "length"
    assert content(chat(fake)[1]) == "plain"


def test_anthropic_shapes(provider: ProviderFactory) -> None:
    fake = provider(["hello"], faults=["overloaded"])
    url = fake.anthropic_base_url + "/v1/messages"
    body = {"model": "claude", "max_tokens": 10, "system": "sys", "messages": [{"role": "user", "content": "hi"}]}
    status, error = post(url, body)
    assert status == 529 and error["type"] == "error" and error["error"]["type"] == "overloaded_error"
    status, reply = post(url, body)
    assert status == 200 and reply["content"] == [{"type": "text", "text": "hello"}]
    assert reply["stop_reason"] == "end_turn" and reply["usage"] == {"input_tokens": 2, "output_tokens": 2}
    assert fake.requests[-1].messages[0] == {"role": "system", "content": "sys"}


def test_every_fault_kind_is_handled(provider: ProviderFactory) -> None:
    fake = provider(["reply"] * 40, hang_s=0.1, slow_s=0.01)
    for kind in FAULT_KINDS:
        fake.push_faults(kind)
        try:
            chat(fake)
        except (urllib.error.URLError, ConnectionError, OSError):
            assert kind in ("reset", "timeout")
        except json.JSONDecodeError:
            assert kind == "garbled"
    stats = fake.stats()
    assert stats.requests == len(FAULT_KINDS)
    assert all(stats.fault(kind) == 1 for kind in FAULT_KINDS)


def test_cli_rejects_bad_arguments() -> None:
    bare = modulo("fake-server", "--rate", "server_error")
    assert bare.exit_code == 2 and "KEY=VALUE" in bare.stderr and "--rate" in bare.stderr
    assert "FAULT=P" in modulo("fake-server", "--rate", "server_error=often").stderr
    bogus = modulo("fake-server", "--faults", "bogus")
    assert bogus.exit_code == 2 and "unknown fault kind(s) bogus" in bogus.stderr
    assert modulo("fake-server", "--help").exit_code == 0


def test_cli_serves_until_interrupted(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["from the cli"]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "modulo.cli.main",
            "fake-server",
            "--port-file",
            str(port_file),
            "--script",
            str(script),
            "--faults",
            "ok",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a shell's background job (or nohup, or a CI runner) starts pytest with SIGINT ignored, and
        # an ignored signal stays ignored across exec: give the server the default Ctrl-C behaviour
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port_file.read_text()}"
        status, reply = post(base + "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
        assert status == 200 and content(reply) == "from the cli"
        with urllib.request.urlopen(base + "/_stats", timeout=10) as resp:
            assert json.loads(resp.read())["requests"] == 1
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:  # never leave the server running, whatever went wrong
            proc.kill()
            proc.communicate()
            raise
    assert proc.returncode == 0 and "listening on http://127.0.0.1:" in out


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
