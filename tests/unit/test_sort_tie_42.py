"""The ``tie?`` verdict holds under every ``--sort`` (docs/reliability-13.md #975): ``python -m analysis DIR
--sort tokens_per_s`` dropped the ``tie?`` flags and the ``Not significant`` line the default order shows.
Now the verdict judges the sort column where it has a 95% interval, else the ranking metric
(:func:`analysis.notes.verdict_metric`)."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

from analysis.notes import spread_lines, verdict_metric


def _runs() -> pd.DataFrame:
    """Two rows whose intervals overlap on both rates, and a third well below."""
    rows = []
    for name, tps, low, high in (
        ("a", 1000.0, 800.0, 1200.0),
        ("b", 950.0, 700.0, 1100.0),
        ("c", 10.0, 9.0, 11.0),
    ):
        rows.append(
            {
                "backend": name,
                "status": "ok",
                "tokens_per_s": tps,
                "tokens_per_s_ci_low": low,
                "tokens_per_s_ci_high": high,
                "model_tflops_per_device": tps / 1000,
                "model_tflops_per_device_ci_low": low / 1000,
                "model_tflops_per_device_ci_high": high / 1000,
                "iteration_time_s_mean": 1 / tps,
            }
        )
    return pd.DataFrame(rows)


def _args(sort: str | None) -> argparse.Namespace:
    return argparse.Namespace(
        metric="model_tflops_per_device", format="table", frontier=False, pivot=None, sort=sort
    )


@pytest.mark.parametrize(
    ("sort", "judged"),
    [
        (None, "model_tflops_per_device"),
        ("tokens_per_s", "tokens_per_s"),
        ("tokens/s:asc", "tokens_per_s"),
        ("iteration_time_s_mean", "model_tflops_per_device"),  # no interval: the ranking metric's verdict
        ("backend", "model_tflops_per_device"),
    ],
)
def test_every_sort_keeps_the_verdict_and_its_flags(sort: str | None, judged: str) -> None:
    assert verdict_metric("model_tflops_per_device", sort) == judged
    runs, lines = spread_lines(_runs(), _args(sort))
    assert runs["not_significant"].tolist() == [True, True, False]
    assert any(line.startswith(f"Not significant: the best two by {judged}, ") for line in lines), lines
