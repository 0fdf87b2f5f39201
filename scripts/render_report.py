"""Render a report's HTML headless with Debian's chromium to a PNG (not run in CI).

    python scripts/render_report.py REPORT_DIR/report.html out.png

Needs ``chromium`` (``apt-get install -y chromium``). The flags keep chromium
off the network and away from the user's profile.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def render(html: Path, png: Path, width: int = 1400, height: int = 3000) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("chromium not found: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                f"--screenshot={png.resolve()}",
                f"--window-size={width},{height}",
                html.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    render(Path(sys.argv[1]), Path(sys.argv[2]))
    print(sys.argv[2])
