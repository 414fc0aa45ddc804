"""The analysis's verdict judges like with like: one device kind (docs/reliability-14.md #1066)."""

from __future__ import annotations

import pandas as pd

from analysis.significance import like_kinds, verdict

METRIC = "model_tflops_per_device"


def _runs(rows: list[tuple[str, str, float, float, float]]) -> pd.DataFrame:
    frame = pd.DataFrame(
        rows, columns=["model", "device_name", METRIC, f"{METRIC}_ci_low", f"{METRIC}_ci_high"]
    )
    frame["status"] = "ok"
    return frame


def test_a_cpu_run_beside_an_h200_record_is_not_judged_against_it() -> None:
    """Was: ``Significant: the best by model_tflops_per_device, ... do not overlap.`` of an H200 record
    against a CPU llama-tiny run."""
    runs = _runs(
        [("llama-tiny", "cpu", 0.002, 0.0019, 0.0021), ("gpt-1.3b", "NVIDIA H200", 519.2, 512.5, 525.9)]
    )
    tied, line = verdict(runs, METRIC, pd.Series(True, index=runs.index))
    assert tied == [] and line == (
        "Not judged: the best by model_tflops_per_device (NVIDIA H200) has no other run of its device kind; "
        "the folder mixes 2: NVIDIA H200; cpu."
    )


def test_a_mixed_folder_is_judged_within_the_best_s_kind_and_says_so() -> None:
    runs = _runs(
        [
            ("gpt-1.3b", "NVIDIA H200", 519.2, 512.5, 525.9),
            ("llama-tiny", "cpu", 510.0, 505.0, 530.0),  # overlaps the best, but no like of it
            ("gpt-1.3b", "NVIDIA H200", 498.6, 487.7, 509.9),
        ]
    )
    tied, line = verdict(runs, METRIC, pd.Series(True, index=runs.index))
    assert tied == [] and line.startswith(
        "Significant: the best by model_tflops_per_device, 519.2 [512.5, 525.9] and 498.6 [487.7, 509.9]"
    )
    assert line.endswith("(the folder mixes 2 device kinds: NVIDIA H200; cpu; judged within the best's)")
    alike = runs[runs["device_name"] == "NVIDIA H200"]
    assert "mixes" not in verdict(alike, METRIC, pd.Series(True, index=alike.index))[1]
    assert list(like_kinds(runs)) == ["NVIDIA H200", "cpu", "NVIDIA H200"]


def test_two_models_on_one_device_kind_are_judged_against_each_other() -> None:
    """Which model uses the GPU best is a comparison the table makes: no ``mixes`` note, a verdict."""
    runs = _runs(
        [
            ("gpt-1.3b", "NVIDIA H200", 519.2, 512.5, 525.9),
            ("llama3.2-1b", "NVIDIA H200", 498.6, 487.7, 509.9),
        ]
    )
    tied, line = verdict(runs, METRIC, pd.Series(True, index=runs.index))
    assert tied == [] and line == (
        "Significant: the best by model_tflops_per_device, 519.2 [512.5, 525.9] and 498.6 [487.7, 509.9] "
        "(95% intervals), do not overlap."
    )
