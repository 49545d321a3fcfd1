"""The viewer in a real headless Chromium (system packages, driven by selenium).

Skipped, with the reason, when Chromium, chromedriver or selenium are not installed. Screenshots go to
``.test-artifacts/view/`` (or ``$MODULO_TEST_ARTIFACTS/view/``).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modulo.view import ViewOptions, build_view
from modulo.view.serve import make_server

from .browser import BrowserUnavailable, console_errors, start_browser
from .conftest import HOSTILE_FIELD

pytestmark = pytest.mark.slow  # the fast lane (-m 'not slow') leaves this module out

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        browser = start_browser(tmp_path_factory.mktemp("chromium-profile"))
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    yield browser
    browser.quit()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    base = Path(os.environ.get("MODULO_TEST_ARTIFACTS") or ROOT / ".test-artifacts")
    path = base / "view"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def page(tp_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view-page") / "view.html"
    return build_view(tp_run, out).page


def wait_for(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {check}")
        time.sleep(0.05)


def css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def open_page(driver: Any, url: str, ready: str = "#problems tr.prow") -> None:
    driver.get(url)
    wait_for(lambda: css(driver, ready))


def test_page_loads_without_console_errors(driver: Any, page: Path, artifacts: Path) -> None:
    console_errors(driver)
    open_page(driver, page.as_uri())
    driver.save_screenshot(str(artifacts / "overview.png"))
    assert console_errors(driver) == []
    rows = css(driver, "#problems tr.prow")
    assert [r.get_attribute("data-problem") for r in rows] == ["validation-12", "validation-22"]
    assert "2 of 2 problems" in driver.find_element("id", "count").text
    assert "Final pass rate" in driver.find_element("id", "metrics").text


def test_clicking_a_problem_shows_its_iterations_and_verdict_matrix(driver: Any, page: Path, artifacts: Path) -> None:
    open_page(driver, page.as_uri())
    css(driver, "#problems tr.prow")[0].click()
    matrix = wait_for(lambda: css(driver, "#matrix"))[0]
    driver.save_screenshot(str(artifacts / "problem.png"))
    assert [s.get_attribute("id") for s in css(driver, "section.iteration")] == ["it-0", "it-1", "it-2"]
    critics = [r.get_attribute("data-critic") for r in css(driver, "#matrix tr[data-critic]")]
    assert critics[0] == "format" and "within_sandbox" in critics
    assert "Verdicts" in driver.page_source and matrix.is_displayed()
    # the plan as TravelPlanner renders it: a day-by-day table
    plan = css(driver, "#it-2 table.plan")[0]
    assert "Current City" in plan.text and len(css(driver, "#it-2 table.plan tr")) == 4
    plan_json = next(d for d in css(driver, "#it-2 details") if "plan JSON" in d.get_attribute("textContent"))
    assert '"current_city": ' in plan_json.get_attribute("textContent")
    assert console_errors(driver) == []


def test_a_verdict_flip_is_highlighted(driver: Any, page: Path, artifacts: Path) -> None:
    open_page(driver, page.as_uri() + "#/p/validation-12", "#matrix")
    cells = css(driver, '#matrix tr[data-critic="within_sandbox"] td')
    assert [c.get_attribute("data-state") for c in cells] == ["gated", "FAIL", "pass"]
    assert [c.get_attribute("data-flip") for c in cells] == [None, "1", "1"]
    outline = driver.execute_script("return getComputedStyle(arguments[0]).outlineStyle", cells[2])
    assert outline == "solid"
    plain = driver.execute_script("return getComputedStyle(arguments[0]).outlineStyle", cells[0])
    assert plain == "none"
    # diverse_restaurants fails at 1 and 2: the second FAIL is not a flip
    kept = css(driver, '#matrix tr[data-critic="diverse_restaurants"] td')[2]
    assert kept.get_attribute("data-state") == "FAIL" and kept.get_attribute("data-flip") is None
    driver.save_screenshot(str(artifacts / "flip.png"))


def test_filtering_by_a_critic_narrows_the_list(driver: Any, page: Path, artifacts: Path) -> None:
    open_page(driver, page.as_uri())
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", "critic-filter")).select_by_value("minimum_nights_stay")
    wait_for(lambda: len(css(driver, "#problems tr.prow")) == 1)
    assert css(driver, "#problems tr.prow")[0].get_attribute("data-problem") == "validation-22"
    assert "1 of 2 problems" in driver.find_element("id", "count").text
    driver.save_screenshot(str(artifacts / "filter.png"))
    Select(driver.find_element("id", "outcome-filter")).select_by_value("certified")
    wait_for(lambda: "0 of 2 problems" in driver.find_element("id", "count").text)


def test_model_text_is_shown_as_text_never_run(driver: Any, page: Path) -> None:
    open_page(driver, page.as_uri() + "#/p/validation-12", "#it-0")
    assert driver.execute_script("return window.__pwned === undefined")
    assert css(driver, "#pwn") == [] and css(driver, "section.iteration img") == []
    assert "<script>window.__pwned = 1</script>I cannot plan" in css(driver, "#it-0 pre.reply")[0].text
    assert HOSTILE_FIELD in driver.find_element("id", "it-1").text
    assert console_errors(driver) == []


def test_long_texts_are_folded(driver: Any, page: Path) -> None:
    open_page(driver, page.as_uri() + "#/p/validation-12", "#it-0")
    section = css(driver, "#it-0")[0]
    section.find_element("css selector", "details.prompt > summary").click()
    button = section.find_element("css selector", "details.prompt button.fold")
    pre = section.find_element("css selector", "details.prompt pre")
    shown = len(pre.get_attribute("textContent"))
    assert shown == 4000 and "show all" in button.text
    button.click()
    assert len(pre.get_attribute("textContent")) > shown


def test_chunked_page_loads_problems_from_disk(driver: Any, tp_run: Path, tmp_path: Path) -> None:
    out = build_view(tp_run, tmp_path / "split.html", ViewOptions(split_above=0, chunk_size=1)).page
    console_errors(driver)
    open_page(driver, out.as_uri() + "#/p/validation-22", "#matrix")
    assert "validation-22" in driver.find_element("css selector", "main h2").text
    assert console_errors(driver) == []


def test_served_page_refreshes_while_the_run_writes(driver: Any, tp_run: Path, tmp_path: Path, artifacts: Path) -> None:
    run = shutil.copytree(tp_run, tmp_path / "live")
    lines = (run / "records.jsonl").read_text().splitlines(keepends=True)
    (run / "records.jsonl").write_text(lines[0])
    server, live = make_server(run, ViewOptions(), port=0)
    live.min_interval = live.build_factor = 0.0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        console_errors(driver)
        open_page(driver, f"http://127.0.0.1:{server.server_address[1]}/#/problems")
        assert len(css(driver, "#problems tr.prow")) == 1
        with (run / "records.jsonl").open("a") as fh:
            fh.write(lines[1])
        wait_for(lambda: len(css(driver, "#problems tr.prow")) == 2, timeout=15)
        driver.save_screenshot(str(artifacts / "live.png"))
        css(driver, "#problems tr.prow")[1].click()
        wait_for(lambda: css(driver, "#matrix"))
        assert console_errors(driver) == []
    finally:
        server.shutdown()
        server.server_close()
        live.close()


def test_sweep_page_links_into_each_job(driver: Any, tp_run: Path, tmp_path: Path, artifacts: Path) -> None:
    sweep = tmp_path / "sweep"
    for job in ("0", "1"):
        shutil.copytree(tp_run, sweep / job)
    page = build_view(sweep).page
    console_errors(driver)
    open_page(driver, page.as_uri(), "#jobs")
    driver.save_screenshot(str(artifacts / "sweep.png"))
    assert len(css(driver, "#jobs tr")) == 3 and len(css(driver, "#comparisons tr")) == 2
    css(driver, "#jobs a")[1].click()
    wait_for(lambda: css(driver, "#problems tr.prow"))
    assert driver.current_url.startswith((sweep / "1" / "view.html").as_uri())
    driver.find_element("link text", "↑ sweep").click()
    wait_for(lambda: css(driver, "#jobs"))
    assert console_errors(driver) == []


def test_odd_problem_ids_open(driver: Any, tp_run: Path, tmp_path: Path) -> None:
    run = shutil.copytree(tp_run, tmp_path / "odd")
    odd = 'trip 1/<b>"x"</b>?&#'
    text = (
        (run / "records.jsonl")
        .read_text()
        .replace('"problem_id":"validation-12"', json.dumps({"problem_id": odd})[1:-1])
    )
    (run / "records.jsonl").write_text(text)
    info = json.loads((run / "run.json").read_text())
    info["problem_ids"] = [odd if i == "validation-12" else i for i in info["problem_ids"]]
    (run / "run.json").write_text(json.dumps(info))
    page = build_view(run).page
    console_errors(driver)
    open_page(driver, page.as_uri())
    row = next(r for r in css(driver, "#problems tr.prow") if r.get_attribute("data-problem") == odd)
    row.click()
    wait_for(lambda: css(driver, "#matrix"))
    assert odd in driver.find_element("css selector", "main h2").text
    assert css(driver, "main h2 b") == []
    assert console_errors(driver) == []


def test_a_dialogue_turn_and_an_update_are_shown(driver: Any, tmp_path: Path, artifacts: Path) -> None:
    """A synth/calendar problem whose planner asks the user, then meets an update: the page tells both."""
    import asyncio

    from modulo.build import build_session
    from modulo.config import ModuloConfig
    from modulo.runner import run_session
    from modulo.runs import RunDir

    cfg = ModuloConfig()
    cfg.benchmark.name, cfg.benchmark.args = "synth/calendar", {"n": 1, "seed": 0, "difficulty": "easy"}
    cfg.llm.name, cfg.reformulator.mode, cfg.cache.mode, cfg.run.progress = "scripted", "parser", "off", False
    slot = "Here is the proposed time: Monday, 13:00 - 14:00"
    cfg.llm.args = {"replies": ["QUESTION: Is <b>Monday</b> fine?", slot, slot]}
    cfg.user.name, cfg.user.args = "scripted", {"script": {"answers": [{"match": "Monday", "answer": "Yes."}]}}
    cfg.user.updates = [{"after": 1, "text": "Please keep it short."}]
    cfg.metacontroller.max_iterations = 3
    asyncio.run(run_session(build_session(cfg), RunDir(tmp_path / "run")))
    page = build_view(tmp_path / "run").page
    console_errors(driver)
    open_page(driver, page.as_uri())
    css(driver, "#problems tr.prow")[0].click()
    wait_for(lambda: css(driver, "#it-1"))
    driver.save_screenshot(str(artifacts / "dialogue.png"))
    first = css(driver, "#it-0")[0].text
    assert "Turn 0: question" in first and "Is <b>Monday</b> fine?" in first and "answer (scripted): Yes." in first
    second = css(driver, "#it-1")[0].text
    assert "Updates applied after this turn" in second and "Please keep it short." in second
    assert "questions 1" in driver.find_element("css selector", "main").text
    assert "certified after 2 turn(s)" in driver.find_element("css selector", "main").text
    assert console_errors(driver) == []


def test_a_run_whose_model_has_no_price_shows_its_cost_as_a_lower_bound(
    driver: Any, tp_run: Path, tmp_path: Path
) -> None:
    """summary.json names a model with no price: the run page and the sweep table say "at least $..." and
    name the model, instead of a bare $0.0000 that reads as a price."""
    sweep = tmp_path / "sweep"
    for job in ("0", "1"):
        shutil.copytree(tp_run, sweep / job)
    summary_path = sweep / "1" / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    summary_path.write_text(json.dumps({**summary, "unpriced_models": ["mystery-model-xyz"]}), encoding="utf-8")
    page = build_view(sweep).page
    console_errors(driver)
    open_page(driver, page.as_uri(), "#jobs")
    rows = css(driver, "#jobs tr")
    assert "at least $" not in rows[1].text and "$" in rows[1].text
    assert "at least $" in rows[2].text and "mystery-model-xyz" in rows[2].text
    open_page(driver, (sweep / "1" / "view.html").as_uri())
    assert "at least $" in driver.page_source and "no price known for mystery-model-xyz" in driver.page_source
    assert console_errors(driver) == []


def test_sweep_table_says_what_its_dollars_leave_out(driver: Any, tp_run: Path, tmp_path: Path) -> None:
    """A job answered from the response cache showed '$0.0000' under 'cost' next to jobs that paid, as if
    its method were free; the column is '$ paid' and says what the cache hits would have cost."""
    sweep = tmp_path / "sweep"
    shutil.copytree(tp_run, sweep / "0")
    job = shutil.copytree(tp_run, sweep / "1")
    records = []
    for line in (job / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["usage"].update(cached_calls=rec["usage"]["calls"], cost_usd=0.0, cached_cost_usd=0.5)
        records.append(json.dumps(rec))
    (job / "records.jsonl").write_text("\n".join(records) + "\n")
    open_page(driver, build_view(sweep).page.as_uri(), "#jobs")
    head = [th.text for th in css(driver, "#jobs th")]
    assert head[-1] == "$ paid (cache hits apart)"
    cells = [row.find_elements("css selector", "td")[-1].text for row in css(driver, "#jobs tr")[1:]]
    calls = sum(json.loads(line)["usage"]["calls"] for line in records)
    assert cells == ["$0.0000", f"$0.0000 (+ $1.0000 in {calls} cache hit(s))"]


def test_sweep_table_shows_a_count_as_a_count(
    driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The sweep table formatted every metric as a rate: a synthesized benchmark's 2 critic/Z3
    disagreements read '200.0'."""
    from tests.cli_support import modulo

    monkeypatch.setenv("MODULO_CACHE_DIR", str(tmp_path / "cache"))
    sweep = tmp_path / "sweep"
    for job in ("0", "1"):
        args = ["llm=scripted", "benchmark=synth/calendar_small", "benchmark.n=2", "metacontroller.max_iterations=1"]
        assert modulo("run", *args, "run.report=false", f"run.dir={sweep / job}").exit_code == 0
    evaluation = json.loads((sweep / "1" / "evaluation.json").read_text())
    evaluation["metrics"]["critic_z3_disagreements"] = 2.0
    (sweep / "1" / "evaluation.json").write_text(json.dumps(evaluation))
    open_page(driver, build_view(sweep).page.as_uri(), "#jobs")
    head = [th.text for th in css(driver, "#jobs th")]
    col = head.index("critic/Z3 disagreements")
    cells = [row.find_elements("css selector", "td") for row in css(driver, "#jobs tr")[1:]]
    assert [c[col].text for c in cells] == ["0", "2"]
    assert cells[0][head.index("success")].text == "0.0 [0.0, 0.0] (0/2)"
