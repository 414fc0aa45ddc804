"""Figures in user-facing lines as a reader expects them, never ``%g``'s exponent (reliability-11.md #724):
``estimated 1.05e+03 GiB per rank``, a plan table's ``USD 9.124e+06``, a ZeRO-3 bucket's ``5e+08``; the
exact value stays in json/csv."""

from __future__ import annotations

import pytest

from flopsweep.text import figure


@pytest.mark.parametrize(
    ("x", "digits", "shown"),
    [
        (1050.4, 3, "1,050"),  # %.3g: 1.05e+03
        (2.04e6, 3, "2,040,000"),  # %.3g: 2.04e+06
        (9124000.0, 4, "9,124,000"),
        (1604.3, 4, "1604"),  # no exponent in %g: as it was
        (0.0123, 3, "0.0123"),
        (169.0, 3, "169"),
        (2.72e16, 3, "2.72e16"),  # from 1e15 a power of ten, no +
        (5e-05, 3, "5e-5"),
        (float("inf"), 3, "inf"),
        (None, 3, "?"),
    ],
)
def test_a_figure_reads_as_a_reader_expects(x: float | None, digits: int, shown: str) -> None:
    assert figure(x, digits) == shown


def test_no_user_line_formats_with_an_exponent_prone_g() -> None:
    """Every ``{x:.3g}``/``{x:.4g}`` of a line of flopsweep/ and analysis/ goes through :func:`figure`, but
    the figure helpers themselves and a plan.csv value (its exact number)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    kept = {
        "flopsweep/text.py",
        "flopsweep/job/planrender.py",
        "flopsweep/checks.py",
        "flopsweep/job/dryrun.py",
    }
    pattern = re.compile(r"\{[^{}:'\"]+:\.[34]g\}")
    found = [
        f"{p.relative_to(root)}:{n}"
        for folder in ("flopsweep", "analysis", "hydra_plugins")
        for p in sorted((root / folder).rglob("*.py"))
        if str(p.relative_to(root)) not in kept
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and "abs(value) >= 1 or value == 0" not in line  # tune's GPU-s under 1
    ]
    assert found == [], found


def test_a_plan_tables_large_figures_are_grouped_not_exponents() -> None:
    import pandas as pd

    from flopsweep.job.planfit import fitted_markdown

    frame = pd.DataFrame(
        {"model": ["a", "b"], "predicted_budget_usd": [9124000.0, 2040000.0], "mfu": [0.5, 0.44]}
    )
    (table,) = fitted_markdown(
        frame, {"model": "model", "predicted_budget_usd": "USD", "mfu": "MFU"}, most=160
    )
    assert "9,124,000" in table and "2,040,000" in table and "e+06" not in table and "0.44" in table
