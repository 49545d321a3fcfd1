"""A headless Chromium from the system's packages, driven by selenium (no downloaded browser or driver).

:func:`start_browser` returns a driver or raises :class:`BrowserUnavailable` with the reason, which the
tests turn into a skip. The flags keep Chromium from reaching for the network (this machine has none).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMEDRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


class BrowserUnavailable(RuntimeError):
    pass


def _first(paths: tuple[str, ...]) -> str | None:
    return next((p for p in paths if Path(p).is_file()), None)


def start_browser(profile: Path | None = None) -> Any:
    binary, driver = _first(CHROMIUM), _first(CHROMEDRIVER)
    if binary is None or driver is None:
        raise BrowserUnavailable(
            "no system Chromium/chromedriver (apt-get install -y chromium chromium-driver); "
            f"looked for {CHROMIUM} and {CHROMEDRIVER}"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        raise BrowserUnavailable(f"selenium is not installed ({exc}); pip install -e '.[dev]'") from exc
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    user_data = Path(tempfile.mkdtemp(prefix="modulo-chromium-")) if profile is None else profile
    options.add_argument(f"--user-data-dir={user_data}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        return webdriver.Chrome(options=options, service=Service(executable_path=driver))
    except Exception as exc:  # any failure to start is a reason to skip, reported verbatim
        shutil.rmtree(user_data, ignore_errors=True)
        raise BrowserUnavailable(f"Chromium did not start: {str(exc).splitlines()[0]}") from exc


def console_errors(driver: Any) -> list[str]:
    """Console messages at error level (SEVERE) since the last call."""
    return [str(e.get("message")) for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
