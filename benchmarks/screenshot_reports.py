"""Screenshots of the HTML report (``python -m analysis DIR --format html``) as a new user's browser
draws it: the committed H200 backend sweep and the CPU layout sweep, rendered by headless Chromium
into ``benchmarks/screenshots/NAME.png`` (issue 46, item 7: the verdict above the first chart, a bar
per set-up, readable labels). Not a test: CI has no Chromium.

    apt-get install -y chromium                     # Debian's package
    python benchmarks/screenshot_reports.py         # from the repository root; about 30 s

Each step has a deadline (:data:`ANALYSIS_TIMEOUT_S`, :data:`BROWSER_TIMEOUT_S`); the report and the
browser's profile live in a private temporary folder; each PNG is stored with a 256-colour palette
(:func:`analysis.png_bytes`' quantizer) so that it stays under 400 KB.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "screenshots"
SWEEPS = {
    "report-backends-h200": "benchmarks/results/h200/backends-v2",
    "report-layouts-cpu": "benchmarks/results/cpu/layouts",
}
"""Screenshot name -> the sweep folder (relative to the repository root) whose report it shows."""
WINDOW = (1280, 2000)
"""The browser window in CSS pixels (width, height): the top of the page a user sees first."""
ANALYSIS_TIMEOUT_S = 300
BROWSER_TIMEOUT_S = 120
MAX_BYTES = 400_000


def browser() -> str:
    """The Chromium executable; SystemExit naming the install command when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    raise SystemExit("no chromium on PATH: install it (Debian: apt-get install -y chromium), then run again")


def report(folder: str, html: Path) -> None:
    """Write the HTML report of ``folder`` to ``html`` with this checkout's analysis."""
    subprocess.run(
        [sys.executable, "-m", "analysis", folder, "--format", "html", "--output", str(html), "--force"],
        cwd=ROOT,
        check=True,
        timeout=ANALYSIS_TIMEOUT_S,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(html.parent)},
    )


def screenshot(chromium: str, html: Path, png: Path, profile: Path) -> None:
    """Headless Chromium's screenshot of ``html`` at :data:`WINDOW` into ``png``."""
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # root in a container has no user namespace for the sandbox
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            html.as_uri(),
        ],
        check=True,
        timeout=BROWSER_TIMEOUT_S,
        capture_output=True,
    )


def palette_png(png: Path) -> bytes:
    """``png`` again with a 256-colour palette (Pillow's median cut): the same picture, fewer bytes."""
    from PIL import Image

    with Image.open(png) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=True)
    return out.getvalue()


def main() -> int:
    sys.path.insert(0, str(ROOT))  # this checkout's analysis (its atomic writer)
    from analysis.output import write_atomic

    chromium = browser()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flopsweep-shots-") as tmp:
        work = Path(tmp)
        for name, folder in SWEEPS.items():
            html, raw = work / f"{name}.html", work / f"{name}.png"
            report(folder, html)
            screenshot(chromium, html, raw, work / "profile")
            data = palette_png(raw)
            if len(data) > MAX_BYTES:
                raise SystemExit(f"{name}.png is {len(data)} bytes, over {MAX_BYTES}: shrink WINDOW")
            write_atomic(OUT / f"{name}.png", data)
            print(f"wrote {(OUT / f'{name}.png').relative_to(ROOT)} ({len(data) // 1000} KB) from {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
