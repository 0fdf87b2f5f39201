"""Headless Chromium for the tests that open a page in a real browser (the
report, the trace viewer): Debian's ``chromium`` and ``chromedriver``, driven
by selenium. Missing, the test skips saying what is missing; under
``CI=true`` (which installs them, ``.ci/run``) it fails."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)


def browser(tmp_path: Path) -> Any:
    """Headless Chromium driven by selenium and Debian's chromedriver, or a
    skip saying what is missing (a failure under CI=true: CI installs them)."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package (pip install '.[test]')")
    if missing:
        why = f"no browser to test in: {', '.join(missing)} missing (.ci/run installs them)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium fetch a driver
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")  # type: ignore[assignment]
    for flag in (*BROWSER_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(shutil.which("chromedriver"))
    return webdriver.Chrome(options=options, service=service)


def console_errors(driver: Any) -> list[Any]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
