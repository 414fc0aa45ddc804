"""No bare ``g`` format in a user-facing line of flopsweep/, analysis/ or hydra_plugins/: ``{x:g}``,
``{x:.4g}``, ``{x:+.3g}``, ``%.4g`` (any expression, any precision) print an exponent from 1e6 or below 1e-4
(``under 1e-05 s``, ``timeout_s=1e+06``). A figure in prose goes through ``text.figure``, a value to type
back through ``config.typed_form``. Reliability row #844 (docs/reliability-12.md); session 40's test
(test_figures_40.py) saw only ``{name:.3g}``/``{name:.4g}`` of a plain name."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BRACE = re.compile(r"\{[^{}]*:[+\- ]?#?0?\d*,?(?:\.\d+)?g\}")
PERCENT = re.compile(r"%[+\-#0 ]?\d*(?:\.\d+)?g\b")
KEPT = {
    "flopsweep/text.py": "the figure helpers themselves",
    "flopsweep/job/planrender.py": "the plan table's own figure helper (session 40's list)",
    "flopsweep/job/dryrun.py": "plan.csv's exact model_flops_per_step (session 40's list)",
    "flopsweep/checks.py": "a bound rounded to 3 figures, then typed_form",
    "flopsweep/tune.py": "a fix rounded to 2 figures (float), then typed_form",
    "flopsweep/memory_bandwidth.py": "the table's lookup keys, never shown",
    "flopsweep/job/planfit.py": "a docstring naming %g",
    "hydra_plugins/flopsweep_slurm/__init__.py": "the argument of coreutils timeout, which reads 1e+06",
}
PRICE = "{price:.15g}"
"""A price typed back into ``plan_clusters=[...@PRICE]`` or ``cost.usd_per_gpu_hour=``: exact, as typed (a
price under $0.0001 or over $1e15 an hour is refused by its bounds)."""


def _found() -> list[str]:
    hits = []
    for folder in ("flopsweep", "analysis", "hydra_plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            if name in KEPT:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                spec = BRACE.search(line)
                if spec and ".15g}" in spec.group(0):  # a price typed back, exact
                    continue
                if spec or (PERCENT.search(line) and ('"' in line or "'" in line)):
                    hits.append(f"{name}:{n}: {line.strip()}")
    return hits


def test_no_user_line_formats_with_a_bare_g() -> None:
    assert _found() == []


def test_the_scan_sees_each_form_it_forbids() -> None:
    """The patterns match what they are for (a scan that matches nothing passes vacuously)."""
    for line in ('f"{x:g} s"', "f\"{a['b']:.4g}\"", 'f"{per * 1e12:+.3g} ps"', 'f"{v:.6g}"'):
        assert BRACE.search(line), line
    assert PERCENT.search('"give %.4g, more than"') and PERCENT.search('"%g"')
    assert not BRACE.search('f"{x:.3f} s"') and not BRACE.search('f"{x:,.0f}"')


def test_lines_that_printed_an_exponent_read_plainly() -> None:
    """``plausible``'s shortest step was ``under 1e-05 s``; a timeout of 1e7 s was ``timeout_s=1e+07``, now as
    typed (``typed_form``: ``1e7``, which Hydra reads back); a TFLOPs mismatch of 3.2e-05 read ``3.2e-05``."""
    from flopsweep.config import typed_form
    from flopsweep.outcome import timeout_message
    from flopsweep.plausible import MIN_STEP_S
    from flopsweep.text import figure

    assert f"{MIN_STEP_S:.5f}" == "0.00001" and float(f"{MIN_STEP_S:.5f}") == MIN_STEP_S
    line = timeout_message(1e7, 2, "measure")
    assert "timeout_s=1e7 s (the ranks were in measure)" in line and "e+" not in line
    assert typed_form(1e30) == "1e30" and figure(3.2e-5, 4) == "3.2e-5" and figure(2.5e6, 4) == "2,500,000"
