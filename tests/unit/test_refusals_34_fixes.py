"""Session 34's fixes (docs/reliability-5.md, rows 298 on): a look-alike letter inside a sweep, a speedup
interval's end that was ``inf``, a sweep stopped by a refused job said to be stopped by ``fail_fast``, and
an objective's fix that said to add a key the command line gave as ``null``."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from analysis.query import compare
from analysis.significance import speedup_interval
from run import refusal

ASCII_SWEEP = ["-m", "plan=true", "model=gpt-tiny"]
EN = "'Н' (U+041D CYRILLIC CAPITAL LETTER EN) looks like ASCII 'H'"


@pytest.mark.parametrize(
    ("given", "meant", "then"),
    [
        (
            "plan_gpu=H100,Н100",
            "plan_gpu=H100,H100",
            " (then: plan_gpu=H100,H100: lists H100 more than once, so the same job would run twice. "
            "Fix: give each value once: plan_gpu=H100.)",
        ),
        ("plan_gpu=A100-80GB,Н100", "plan_gpu=A100-80GB,H100", ""),
        ("plan_gpu=choice(A100-80GB,Н100)", "plan_gpu=choice(A100-80GB,H100)", ""),
    ],
)
def test_a_look_alike_inside_a_sweep_names_its_item_and_the_fix_runs(given, meant, then):
    """#298: ``plan_gpu=H100,Н100`` (a Cyrillic Н in the second item) was told "quote the value as one string,
    'plan_gpu="H100,Н100"'", and that quoted form "is no device of the peak table ... use one of those"."""
    assert refusal([*ASCII_SWEEP, given]) == (
        f"Invalid config: {given}: Hydra's override grammar cannot read it (its item Н100: {EN} (H100 in "
        f"ASCII)). Fix: did you mean {meant}?{then}"
    )
    assert (refusal([*ASCII_SWEEP, meant]) is None) is not then  # the fix as written runs, or is refused
    assert refusal([*ASCII_SWEEP, "plan_gpu=H100"]) is None  # with a fix that runs
    line = refusal([*ASCII_SWEEP, "steps.mеasure=3,4"])  # a look-alike in the key: no item to name
    assert line is not None and line.endswith("Fix: did you mean steps.measure=3,4?"), line


UNBOUNDED = "(a ratio over 0 or less has no bound)"
RUN_AT_0 = f"no high end: the run's 95% interval reaches 0 {UNBOUNDED}"
BASE_AT_0 = f"no high end: the baseline's 95% interval reaches 0 {UNBOUNDED}"
BOTH = f"no low end: the baseline's 95% interval reaches 0 {UNBOUNDED}; " + BASE_AT_0.replace("0 (", "-1 (")
PAST = "no high end: 2 / 1e-320 is past the largest float (the baseline's end is near 0)"


@pytest.mark.parametrize(
    ("run", "base", "lower", "want"),
    [
        ((0.0, 2.0), (4.0, 8.0), True, (2.0, None, RUN_AT_0)),  # a time's interval clipped at 0 s
        ((1.0, 2.0), (0.0, 8.0), False, (0.125, None, BASE_AT_0)),
        ((1.0, 2.0), (1e-320, 8.0), False, (0.125, None, PAST)),
        ((1.0, 2.0), (-1.0, 0.0), False, (None, None, BOTH)),
        (
            (1.0, 2.0),
            (math.nan, 1.0),
            False,
            (1.0, None, "no high end: an end of the intervals is not a number"),
        ),
        ((1.0, 2.0), (1.0, math.inf), False, (0.0, 2.0, None)),  # the infimum: finite
    ],
)
def test_a_speedup_interval_end_is_finite_or_none_with_the_reason(run, base, lower, want):
    """#299: an end at ``inf`` (a baseline's or a time's interval reaching 0, or near it) or NaN."""
    got = speedup_interval(run, base, lower)
    assert got == want
    assert all(end is None or math.isfinite(end) for end in got[:2])


def test_compare_leaves_an_unbounded_speedup_end_blank_and_says_why():
    """#299 through ``--baseline``: a time whose interval reaches 0 s gave ``speedup_ci_high`` inf."""
    from analysis.blanks import speedup_ci_lines

    rows = [
        {"model": "gpt-tiny", "backend": b, "status": "ok", "run_dir": f"m/{i}", "iteration_time_s_mean": m}
        | {"iteration_time_s_mean_ci_low": lo, "iteration_time_s_mean_ci_high": hi}
        for i, (b, m, lo, hi) in enumerate([("ddp", 1.0, 0.0, 2.5), ("fsdp", 2.0, 1.5, 2.5)])
    ]
    out = compare(pd.DataFrame(rows), {"backend": "fsdp"}, metric="iteration_time_s_mean")
    assert out["speedup_ci_low"].tolist() == pytest.approx([0.6, 0.6])
    assert math.isnan(out["speedup_ci_high"].iloc[0]) and out["speedup_ci_high"].iloc[1] == pytest.approx(
        2.5 / 1.5
    )
    line = f"the speedup's 95% interval has a blank end for 1 run (gpt-tiny ddp): {RUN_AT_0}"
    assert speedup_ci_lines(out) == [line]
    assert speedup_ci_lines(out.iloc[::-1].reset_index(drop=True)) == [line]  # renumbered: still that run


def _stopped_sweep(tmp_path: Path, capsys, stop) -> str:
    """The summary line :class:`flopsweep.callbacks.SweepSummary` prints when job 0 of a non-plan sweep of
    two ends with ``stop`` (its ``on_job_end``, as Hydra calls it)."""
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf

    from flopsweep.callbacks import SweepSummary

    sweep = tmp_path / "sweep"
    sweep.mkdir(parents=True)
    config = OmegaConf.create(
        {
            "hydra": {
                "sweep": {"dir": str(sweep)},
                "job": {"num": 0},
                "runtime": {"output_dir": str(sweep / "0")},
            }
        }
    )
    summary = SweepSummary()
    summary.started, summary.pid, summary.total, summary.kept = time.monotonic(), os.getpid(), 2, set()
    ended = JobReturn()
    ended.status, ended._return_value = JobStatus.FAILED, stop
    with pytest.raises(SystemExit):
        summary.on_job_end(config, ended)
    return next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("flopsweep summary:")
    )


def test_a_sweep_stopped_by_a_refused_job_says_so_not_fail_fast(tmp_path: Path, capsys):
    """#300: ``-m 'steps.measure=${oc.env:HOME},3'`` (job 0 refused once Hydra composed it, fail_fast unset)
    ended ``(stopped early by fail_fast)``."""
    from flopsweep.callbacks import FAIL_FAST_NOTE, SweepStopped

    refused = SweepStopped(
        "Invalid config: steps.measure=...", note="stopped: job 0 was refused before it ran"
    )
    line = _stopped_sweep(tmp_path / "a", capsys, refused)
    assert line == (
        "flopsweep summary: 0 ok, 0 oom, 0 error, 0 invalid, 0 skipped (stopped: job 0 was refused before it "
        f"ran) ({tmp_path / 'a' / 'sweep'})"
    )
    assert FAIL_FAST_NOTE in _stopped_sweep(tmp_path / "b", capsys, SweepStopped("error: ..."))  # fail_fast's


@pytest.mark.parametrize(
    ("given", "fix", "fixed"),
    [
        (
            ["objective=usd_per_million_tokens", "cost.usd_per_gpu_hour=null"],
            "replace cost.usd_per_gpu_hour=null with cost.usd_per_gpu_hour=2.5 (your price per GPU-hour)",
            ["objective=usd_per_million_tokens", "cost.usd_per_gpu_hour=2.5"],
        ),
        (
            ["objective=budget_usd", "cost.usd_per_gpu_hour=NULL"],
            "add budget.tokens=15e12 and replace cost.usd_per_gpu_hour=NULL with cost.usd_per_gpu_hour=2.5",
            ["objective=budget_usd", "cost.usd_per_gpu_hour=2.5", "budget.tokens=15e12"],
        ),
        (
            ["objective=usd_per_million_tokens"],
            "add cost.usd_per_gpu_hour=2.5 (your price per GPU-hour)",
            ["objective=usd_per_million_tokens", "cost.usd_per_gpu_hour=2.5"],
        ),
    ],
)
def test_an_objective_s_fix_replaces_a_null_the_command_line_gave(given, fix, fixed):
    """#301: ``cost.usd_per_gpu_hour=null`` was told "add cost.usd_per_gpu_hour=2.5": followed, the key was
    given twice, refused in turn."""
    plan = ["plan=true", "plan_gpu=H100", "model=gpt-tiny"]
    line = refusal([*plan, *given])
    assert line is not None and f"Fix: {fix}" in line, line
    assert refusal([*plan, *fixed]) is None  # the fix as written runs
    if "replace" in fix:  # what "add" led to before
        assert "given twice" in refusal([*plan, *given, "cost.usd_per_gpu_hour=2.5"])
