"""The plan's days below 100 keep 3 significant digits (docs/reliability-9.md #524): ``budget.tokens=1e9``
on ``H100:64`` (a fine-tuning run of 26 minutes) showed ``0`` days beside 27.5 GPU-h and $68.8; the
figures of a row agree by hand: days = tokens / (tokens/s) / 86400, GPU-h = days x 24 x GPUs, dollars =
GPU-h x price."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("x", "said"),
    [
        (0.01791, "0.0179"),
        (1.41, "1.41"),
        (45.27, "45.3"),
        (99.4, "99.4"),
        (2106.4, "2,106"),
        (1.4e-10, "1.4e-10"),
    ],
)
def test_a_count_below_100_keeps_three_digits(x: float, said: str) -> None:
    from flopsweep.job.planrender import count_figure

    assert count_figure(x) == said


def test_a_short_budgets_row_says_its_days_and_they_agree_with_its_gpu_hours(
    hydra_compose, tmp_path: Path
) -> None:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = ["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:64]", "budget.tokens=1e9"]
    given += ["cost.usd_per_gpu_hour=2.5", "space.backends=[fsdp]", "space.checkpointing=[none]"]
    given += ["space.micro_batches=[4]", "space.layouts=[dp]"]
    out = decide_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given))
    best = out["best"][0]
    days = 1e9 / best["predicted_tokens_per_s"] / 86400
    assert best["budget_days"] == pytest.approx(days)
    assert best["budget_gpu_hours"] == pytest.approx(days * 24 * 64)
    assert best["budget_usd"] == pytest.approx(days * 24 * 64 * 2.5)
    row = next(line for line in out["plan_text"].splitlines() if "H100:8x8:ib400" in line and "fsdp" in line)
    cells = row.split()
    assert f"{days:.3g}" in cells and f"${days * 24 * 64 * 2.5:.3g}" in cells, row
    assert "0" not in cells
