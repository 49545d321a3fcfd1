"""``modulo view`` without a browser: what goes into the page, escaping, chunking, sweeps and the server."""

from __future__ import annotations

import base64
import json
import re
import shutil
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import Field

from modulo.cli.main import cli
from modulo.types import IterationRecord, Message, Outcome, ProblemResult, Verdict
from modulo.view import ViewOptions, build_view
from modulo.view.build import script_json
from modulo.view.data import PREFIX_MIN, TextTable, problem_detail
from modulo.view.serve import make_server

from .conftest import HOSTILE_FIELD, HOSTILE_REPLY

STATIC = Path(__file__).resolve().parents[2] / "modulo" / "view" / "static"


def resolve(entries: list[Any], i: int) -> str:
    e = entries[i]
    return e if isinstance(e, str) else resolve(entries, e[0])[: e[1]] + e[2]


def blocks(html: str) -> dict[str, Any]:
    """The page's JSON blocks by element id, decoded."""
    found = re.findall(r'<script type="application/json" id="([^"]+)">(.*?)</script>', html, flags=re.S)
    return {k: json.loads(v) for k, v in found}


def test_script_json_cannot_close_the_script_element() -> None:
    value = {"x": "</script><script>alert(1)</script>", "y": "a&b\u2028c<!--"}
    text = script_json(value)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == value


def test_text_table_interns_and_shares_prefixes() -> None:
    table = TextTable()
    base = "context " * 200
    a = table.add(base + "first plan")
    b = table.add(base + "second plan")
    again = table.add(base + "first plan")
    short = table.add("ok")
    assert a == again and table.add(None) is None
    assert a is not None and b is not None and short is not None
    assert isinstance(table.entries[b], list) and table.entries[b][1] >= PREFIX_MIN
    assert len(json.dumps(table.entries[b])) < 100
    for i, text in ((a, base + "first plan"), (b, base + "second plan"), (short, "ok")):
        assert resolve(table.entries, i) == text


def test_viewer_script_never_parses_data_as_html() -> None:
    js = (STATIC / "viewer.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in js, sink


def test_run_page_is_one_self_contained_file(tp_run: Path, tmp_path: Path) -> None:
    run = shutil.copytree(tp_run, tmp_path / "run")
    result = CliRunner().invoke(cli, ["view", str(run)])
    assert result.exit_code == 0, result.output
    page = run / "view.html"
    assert result.output.strip() == str(page)
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("view")) == ["view.html"]
    html = page.read_text()
    # nothing from outside the file: no URL to load, no external script or stylesheet
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html)
    assert "<link" not in html
    # hostile text from the model is data, never markup
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    data = blocks(html)
    meta = data["modulo-meta"]
    assert meta["mode"] == "embedded"
    assert [r[0] for r in meta["index"]["rows"]] == ["validation-12", "validation-22"]
    row = meta["index"]["rows"][0]
    detail = data[f"modulo-p-{row[7]}"]
    assert detail["id"] == "validation-12" and row[8] == 0
    texts = detail["texts"]
    replies = [resolve(texts, it["reply"]) for it in detail["iterations"]]
    assert replies[0] == HOSTILE_REPLY
    feedback = [
        resolve(texts, v["feedback"])
        for v in detail["iterations"][1]["verdicts"]
        if v["critic"] == "within_sandbox" and v["feedback"] is not None
    ]
    assert any(HOSTILE_FIELD in f for f in feedback)
    # the verdict matrix: within_sandbox FAIL at 1, pass at 2, flagged as a flip
    ws = detail["critics"].index("within_sandbox")
    assert [row[ws] for row in detail["matrix"]] == ["gated", "FAIL", "pass"]
    assert [f[ws] for f in detail["flips"]] == [False, True, True]
    # the plan as the benchmark renders it: TravelPlanner's day-by-day table
    table = detail["iterations"][2]["plan_table"]
    assert table["columns"][:3] == ["Day", "Current City", "Transportation"]
    assert len(table["rows"]) == 3
    assert detail["iterations"][2]["diff_against"] == 1
    assert "+" in resolve(texts, detail["iterations"][2]["diff"])


def test_a_resumed_or_killed_run_reads_as_it_is(tp_run: Path, tmp_path: Path) -> None:
    run = shutil.copytree(tp_run, tmp_path / "run")
    lines = (run / "records.jsonl").read_text().splitlines(keepends=True)
    # a problem recorded again (a resume), then a line cut short by a kill
    (run / "records.jsonl").write_text(lines[0] + lines[1] + lines[0] + lines[1][:200])
    meta = blocks(build_view(run).page.read_text())["modulo-meta"]
    notes = meta["overview"]["notes"]
    again = json.loads(lines[0])["problem_id"]
    assert any(f"problem {again} recorded more than once" in n for n in notes)
    assert any("truncated last line (line 4" in n for n in notes)
    rows = {r[0]: r for r in meta["index"]["rows"]}
    assert len(rows) == 2 and rows[again][7] == 2


def test_a_run_with_an_error_says_so_and_shows_each_rates_counts(tp_run: Path, tmp_path: Path) -> None:
    """A run with an errored problem read '2 of 2 problems finished' on its page and in the sweep table,
    its rates with no denominator: nothing said the error was left out of them. Now the page and the
    sweep table carry the run's status and each rate its k/n."""
    run = shutil.copytree(tp_run, tmp_path / "sweep" / "1")
    shutil.copytree(tp_run, tmp_path / "sweep" / "0")
    lines = (run / "records.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec.update(outcome="error", stop_reason="llm_error", error="PermanentLLMError: bad request")
    (run / "records.jsonl").write_text("\n".join([lines[0], json.dumps(rec)]) + "\n")
    evaluation = json.loads((run / "evaluation.json").read_text())  # as the run writes it: the error left out
    evaluation["per_problem"] = [r for r in evaluation["per_problem"] if r["problem_id"] != rec["problem_id"]]
    (run / "evaluation.json").write_text(json.dumps(evaluation))
    overview = blocks(build_view(run).page.read_text())["modulo-meta"]["overview"]
    assert overview["status"] == "errors (1 of 2 problems)"
    final = {row[0]: row for row in overview["metrics"]["rows"]}["Final pass rate"]
    assert final[2][0] == 0.0 and final[4] == [0, 1]  # over the one problem scored
    clean = blocks(build_view(tmp_path / "sweep" / "0").page.read_text())["modulo-meta"]["overview"]
    assert clean["status"] == "complete"
    assert {row[0]: row for row in clean["metrics"]["rows"]}["Final pass rate"][4] == [0, 2]
    build_view(tmp_path / "sweep")
    jobs = blocks((tmp_path / "sweep" / "view.html").read_text())["modulo-meta"]["overview"]["jobs"]
    assert [j["status"] for j in jobs] == ["complete", "errors (1 of 2 problems)"]
    assert [j["counts"]["Final pass rate"] for j in jobs] == [[0, 2], [0, 1]]
    script = (STATIC / "viewer.js").read_text()
    assert "Status: ${o.status}" in script and "j.status" in script and "counts(kn)" in script


def test_a_skipped_problem_is_not_counted_finished(tp_run: Path, tmp_path: Path) -> None:
    """A problem recorded 'skipped' (never started: the run's dollar budget was spent) was counted among
    the finished ones ('2 of 2 problems finished' above a note saying 1 of 2)."""
    run = shutil.copytree(tp_run, tmp_path / "run")
    lines = (run / "records.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec.update(outcome="skipped", stop_reason="run_budget", iterations=[], best_plan=None, best_iteration=None)
    (run / "records.jsonl").write_text("\n".join([lines[0], json.dumps(rec)]) + "\n")
    overview = blocks(build_view(run).page.read_text())["modulo-meta"]["overview"]
    assert (overview["n_finished"], overview["n_problems"], overview["complete"]) == (1, 2, False)
    assert overview["status"].startswith("partial (1/2; 1 skipped")


def test_an_evaluation_the_records_outgrew_shows_no_metrics(tp_run: Path, tmp_path: Path) -> None:
    """The page showed the metrics of an evaluation.json that lacked a finished problem (written by an
    earlier process of a run resumed since) as the run's; it shows none, and says why."""
    run = shutil.copytree(tp_run, tmp_path / "run")
    evaluation = json.loads((run / "evaluation.json").read_text())
    evaluation["per_problem"] = evaluation["per_problem"][:1]
    (run / "evaluation.json").write_text(json.dumps(evaluation))
    overview = blocks(build_view(run).page.read_text())["modulo-meta"]["overview"]
    assert overview["metrics"]["rows"] == [] and overview["status"].startswith("incomplete (2/2")
    assert any("does not score 1 finished problem(s)" in n for n in overview["notes"])


def test_the_runs_figures_are_embedded(tp_run: Path, tmp_path: Path) -> None:
    run = shutil.copytree(tp_run, tmp_path / "run")
    png = b"\x89PNG\r\n\x1a\n" + b"figure"
    (run / "critic_firing.png").write_bytes(png)
    meta = blocks(build_view(run).page.read_text())["modulo-meta"]
    ((name, uri, caption),) = meta["overview"]["figures"]
    assert name == "critic_firing.png" and uri == "data:image/png;base64," + base64.b64encode(png).decode()
    assert caption.startswith("critic_firing.png, written into the run directory by its report at ")


def test_large_runs_go_to_chunk_files(tp_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "page.html"
    view = build_view(tp_run, out, ViewOptions(split_above=1, chunk_size=1))
    assert sorted(view.files) == ["page.html", "view-data/chunk-00000.js", "view-data/chunk-00001.js"]
    html = out.read_text()
    meta = blocks(html)["modulo-meta"]
    assert meta["mode"] == "split" and meta["chunk_size"] == 1
    assert "modulo-p-0" not in html
    for row in meta["index"]["rows"]:
        k, offset = row[7], row[8]
        chunk = (tmp_path / "out" / "view-data" / f"chunk-{k:05d}.js").read_text()
        prefix = f"window.moduloChunk({k},"
        assert chunk.startswith(prefix) and "<" not in chunk
        assert json.loads(chunk[len(prefix) : -3])[offset]["id"] == row[0]


def test_unknown_iteration_fields_are_kept_for_generic_rendering() -> None:
    class ToolIteration(IterationRecord):
        tool_calls: list[dict[str, Any]] = Field(default_factory=list)

    it = ToolIteration(
        index=0,
        prompt=[Message(role="user", content="plan")],
        raw_reply="x",
        verdicts=[Verdict(critic="format", passed=False, feedback="bad")],
        tool_calls=[{"name": "FlightSearch", "args": {"from": "A"}, "result": "<b>3 flights</b>"}],
    )
    rec = ProblemResult(
        problem_id="p", benchmark="b", outcome=Outcome.FAILED, stop_reason="iterations", iterations=[it]
    )
    detail = problem_detail(rec, ["format"], None)
    assert detail["iterations"][0]["extra"] == {"tool_calls": it.tool_calls}
    assert detail["iterations"][0]["plan_table"] is None


def test_a_question_turn_is_no_flip() -> None:
    """A question turn (no critic states) marked every critic as flipped, and the next plan again; the
    matrix now marks a flip against the last plan iteration only."""
    fail = Verdict(critic="c", passed=False, feedback="no")
    its = [
        IterationRecord(
            index=0, prompt=[], raw_reply="a", plan={"x": 1}, verdicts=[Verdict(critic="format", passed=True), fail]
        ),
        IterationRecord(index=1, prompt=[], raw_reply="?", act="question", question="which x?"),
        IterationRecord(
            index=2,
            prompt=[],
            raw_reply="b",
            plan={"x": 2},
            verdicts=[Verdict(critic="format", passed=True), Verdict(critic="c", passed=True)],
        ),
    ]
    rec = ProblemResult(
        problem_id="p", benchmark="b", outcome=Outcome.CERTIFIED, stop_reason="all_passed", iterations=its
    )
    detail = problem_detail(rec, ["format", "c"], None)
    assert detail["flips"] == [[False, False], [False, False], [False, True]]


def test_sweep_page_links_every_job_and_compares_them(tp_run: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    for job in ("0", "1"):
        shutil.copytree(tp_run, sweep / job)
    result = CliRunner().invoke(cli, ["view", str(sweep)])
    assert result.exit_code == 0, result.output
    meta = blocks((sweep / "view.html").read_text())["modulo-meta"]
    jobs = meta["overview"]["jobs"]
    assert [j["link"] for j in jobs] == ["./0/view.html", "./1/view.html"]
    for job in jobs:
        assert (sweep / job["link"]).is_file()
    job_meta = blocks((sweep / "0" / "view.html").read_text())["modulo-meta"]
    assert job_meta["parent"] == "./../view.html"
    (cmp,) = meta["overview"]["comparisons"]
    assert cmp["n"] == 2 and cmp["only_a"] == 0 and cmp["only_b"] == 0


def test_sweep_comparisons_name_the_metric_they_compare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep page headed its paired comparisons 'final pass per problem' on every benchmark; on a
    synthesized one they compare 'success' (the primary metric's per-problem 'passed'), as the report says."""
    monkeypatch.setenv("MODULO_CACHE_DIR", str(tmp_path / "cache"))
    sweep = tmp_path / "sweep"
    for job, critics in (("0", "all"), ("1", "json")):
        args = ["llm=scripted", "benchmark=synth/calendar_small", "benchmark.n=2", f"critics={critics}"]
        args += ["metacontroller.max_iterations=1", "run.report=false", f"run.dir={sweep / job}"]
        assert CliRunner().invoke(cli, ["run", *args]).exit_code == 0
    build_view(sweep)
    (cmp,) = blocks((sweep / "view.html").read_text())["modulo-meta"]["overview"]["comparisons"]
    assert cmp["metric"] == "success" and cmp["n"] == 2
    script = (STATIC / "viewer.js").read_text()
    assert "final pass per problem" not in script and 'el("td", {}, c.metric)' in script


def test_sweep_table_names_what_sets_each_job_apart(tp_run: Path, tmp_path: Path) -> None:
    """Jobs of a sweep over run.sample read alike in every column of the sweep page (method, model,
    critics, backprompt, budget); a column now says what sets each job apart."""
    sweep = tmp_path / "sweep"
    for job in ("0", "1"):
        shutil.copytree(tp_run, sweep / job)
    info = json.loads((sweep / "1" / "run.json").read_text())
    (sweep / "1" / "run.json").write_text(json.dumps({**info, "sample": info["sample"] + 1}))
    build_view(sweep)
    jobs = blocks((sweep / "view.html").read_text())["modulo-meta"]["overview"]["jobs"]
    assert [j["differs"] for j in jobs] == [f"sample {info['sample']}", f"sample {info['sample'] + 1}"]
    assert '"what differs"' in (STATIC / "viewer.js").read_text()


def test_view_errors_are_clear(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["view", str(tmp_path / "nothing")])
    assert result.exit_code == 2
    assert "no such file or directory" in result.output
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(cli, ["view", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "no run directories found" in result.output


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body: bytes = resp.read()
        return body


def test_server_rebuilds_when_the_run_writes(tp_run: Path, tmp_path: Path) -> None:
    run = shutil.copytree(tp_run, tmp_path / "live")
    lines = (run / "records.jsonl").read_text().splitlines(keepends=True)
    (run / "records.jsonl").write_text(lines[0])
    server, live = make_server(run, ViewOptions(), port=0)
    live.min_interval = live.build_factor = 0.0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        meta = blocks(_get(base).decode())["modulo-meta"]
        assert meta["live"] is True and meta["mode"] == "split"
        assert [r[0] for r in meta["index"]["rows"]] == [json.loads(lines[0])["problem_id"]]
        first = json.loads(_get(base + "__version"))["version"]
        assert _get(base + "view-data/chunk-00000.js").startswith(b"window.moduloChunk(0,")
        with (run / "records.jsonl").open("a") as fh:
            fh.write(lines[1])
        assert json.loads(_get(base + "__version"))["version"] != first
        meta = blocks(_get(base).decode())["modulo-meta"]
        assert [r[0] for r in meta["index"]["rows"]] == ["validation-12", "validation-22"]
        with pytest.raises(urllib.error.HTTPError):
            _get(base + "../run.json")
    finally:
        server.shutdown()
        server.server_close()
        live.close()
    assert not live.view.base.exists()
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("view")) == []


def test_serve_on_a_busy_port_is_a_clear_error(tp_run: Path) -> None:
    server, live = make_server(tp_run, ViewOptions(), port=0)
    try:
        result = CliRunner().invoke(cli, ["view", str(tp_run), "--serve", "--port", str(server.server_address[1])])
    finally:
        server.server_close()
        live.close()
    assert result.exit_code == 2
    assert "cannot listen on 127.0.0.1" in result.output


def test_without_a_browser_the_browser_tests_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from . import browser

    monkeypatch.setattr(browser, "CHROMIUM", ("/nonexistent/chromium",))
    with pytest.raises(browser.BrowserUnavailable, match="apt-get install -y chromium chromium-driver"):
        browser.start_browser()


@pytest.mark.slow  # a served view in a subprocess, terminated
def test_modulo_view_serve_runs_until_terminated(tp_run: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "modulo.cli.main", "view", str(tp_run), "--serve", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("building the view of")
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        html = _get(f"http://127.0.0.1:{match.group(1)}/").decode()
        assert blocks(html)["modulo-meta"]["live"] is True
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0
