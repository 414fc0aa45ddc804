"""How far the step time predicted before each run was from the step measured (issue 41's figure).

``python -m analysis DIR --predict`` ends its table with :func:`error_summary` and
``--prediction-errors`` shows it alone (``benchmarks/RESULTS.md`` carries it over every committed
record). A row is one backend (a ZeRO stage named) and one source of the predicted compute:

- ``layers``, ``probe``, ``calibration``, ``nearest`` or ``flops``: ``metrics.predicted.compute_source``, made
  before the run (:mod:`flopsweep.steptime`, :mod:`flopsweep.layer_probe`); records from before
  that key say ``calibration`` when their source names one and ``flops`` otherwise;
- ``... (by the analysis)``: ``--predict`` filled it after the run, from the other records, so it is
  not a prediction made before the run and is kept apart.

The error is ``(predicted - measured) / measured`` mean step time
(:func:`analysis.fields.prediction_error`); ``median abs. error`` and ``p90 abs. error`` are of its
absolute value, ``worst`` the signed error of largest magnitude. Rows that are not ``ok`` or have
no prediction are left out. ``probe share`` is what the probes cost of the job's wall time (median and
largest), so issue 41's "at most 10% of the run" is read from the same table; ``step cv`` the
measured steps' own spread (:data:`COLUMNS`).
"""

from __future__ import annotations

import pandas as pd

from analysis.display import to_json
from flopsweep.text import figure

COLUMNS = [
    "backend",
    "source",
    "runs",
    "median_abs_error",
    "p90_abs_error",
    "worst_error",
    "median_probe_share",
    "worst_probe_share",
    "median_step_cv",
]
"""The summary's columns, in order (errors and shares as fractions; the people formats show percent).
``median_step_cv`` is the median over the group of each run's measured-step coefficient of variation
(``iteration_time_s_cv``, standard deviation over mean of its measured steps): the measurement's own
noise, beside which an error is read (one H100, 2026-12-05: ZeRO-3's median 9.1% where its prediction
missed by a median 12.0%; FSDP2's 0.9% and 1.4%), NaN when no row of the group has one.
``median_probe_share`` and ``worst_probe_share`` (the largest) are of the ``probe_share`` column:
the share of each job's wall time its step-time probes took (:func:`analysis.fields.probe_share`;
issue 41 asks for at most 10%), NaN when no row of the group has one."""

BY_ANALYSIS = "analysis --predict:"
"""How ``metrics.predicted.source`` begins when ``--predict`` made it after the run."""


def _source(compute: object, text: object) -> str:
    text = text if isinstance(text, str) else ""
    after = text.startswith(BY_ANALYSIS)
    if isinstance(compute, str) and compute:
        kind = compute
    else:
        kind = "calibration" if "calibrat" in text and "uncalibrated" not in text else "flops"
    return f"{kind} (by the analysis)" if after else kind


def _backend(backend: object, stage: object) -> str:
    name = str(backend)
    if name == "deepspeed" and pd.notna(stage):
        return f"ZeRO-{int(stage)}"
    return name


def error_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per backend and prediction source (module docstring), then ``all`` per source;
    :data:`COLUMNS`. Empty (with those columns) when no row has an error."""
    if "prediction_error" not in runs.columns or runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    done = runs[(runs["status"] == "ok") & runs["prediction_error"].notna()]
    if done.empty:
        return pd.DataFrame(columns=COLUMNS)
    compute = done["predicted_compute_source"] if "predicted_compute_source" in done else [None] * len(done)
    frame = pd.DataFrame(
        {
            "backend": [_backend(b, z) for b, z in zip(done["backend"], done["zero_stage"], strict=True)],
            "source": [_source(c, t) for c, t in zip(compute, done["predicted_source"], strict=True)],
            "error": done["prediction_error"].astype("float64").to_numpy(),
            "share": pd.to_numeric(done["probe_share"], errors="coerce").to_numpy()
            if "probe_share" in done
            else float("nan"),
            "cv": pd.to_numeric(done["iteration_time_s_cv"], errors="coerce").to_numpy()
            if "iteration_time_s_cv" in done
            else float("nan"),
        }
    )
    rows = []
    groups = [*frame.groupby(["backend", "source"], sort=True)]
    groups += [(("all", source), part) for source, part in frame.groupby("source", sort=True)]
    for (backend, source), part in groups:
        errors = part["error"]
        size = errors.abs()
        rows.append(
            {
                "backend": backend,
                "source": source,
                "runs": len(part),
                "median_abs_error": float(size.median()),
                "p90_abs_error": float(size.quantile(0.9)),
                "worst_error": float(errors.loc[size.idxmax()]),
                "median_probe_share": float(part["share"].median()),
                "worst_probe_share": float(part["share"].max()),
                "median_step_cv": float(part["cv"].median()),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def probe_cost_line(loaded: pd.DataFrame) -> str | None:
    """What the probes cost, from pairs: over the set-ups (``setup_id``, which leaves ``predict.*``
    out) run ``ok`` both with a probe (``probe_s`` set) and without, the median over set-ups of the
    job's median wall time (``run_wall_s``) with the probes less without, in seconds and over the wall
    time without, and the largest such share. The probes' own ``probe_s`` counts work the run then
    skips (imports, the compile of the blocks' graphs), so this is the cost the 10% of issue 41 means.
    None when no set-up has both."""
    need = {"setup_id", "status", "probe_s", "run_wall_s"}
    if not need <= set(loaded.columns):
        return None
    ok = loaded[(loaded["status"] == "ok") & pd.to_numeric(loaded["run_wall_s"], errors="coerce").notna()]
    probed = pd.to_numeric(ok["probe_s"], errors="coerce").notna()
    walls = pd.to_numeric(ok["run_wall_s"], errors="coerce")
    with_probe = walls[probed].groupby(ok.loc[probed, "setup_id"]).median()
    without = walls[~probed].groupby(ok.loc[~probed, "setup_id"]).median()
    both = with_probe.index.intersection(without.index)
    if both.empty:
        return None
    extra = with_probe[both] - without[both]
    share = extra / without[both]
    own = pd.to_numeric(ok.loc[probed & ok["setup_id"].isin(both), "probe_s"], errors="coerce").median()
    return (
        f"probe cost from pairs: {len(both)} set-up(s) run with and without the probes: the job's wall time "
        f"{'+' if extra.median() >= 0 else ''}{figure(extra.median())} s (median; "
        f"{share.median():+.1%} of the job without them, "
        f"worst {share.max():+.1%}); "
        f"the probes' own probe_s {figure(own)} s (median), part of it work the run then skips"
    )


def render_summary(summary: pd.DataFrame, fmt: str) -> str:
    """``summary`` in ``fmt``: csv and json as numbers (fractions; json strict,
    :func:`analysis.display.to_json`); table and markdown with the
    errors in percent under a one-line heading; html a table."""
    if fmt == "csv":
        return summary.to_csv(index=False)
    if fmt == "json":
        return to_json(summary, indent=1)
    if summary.empty:
        return "prediction error: no ok record has both a prediction and a measured step"
    shown = summary.copy()
    for column in ("median_abs_error", "p90_abs_error", "worst_error"):
        shown[column] = [f"{v:+.1%}" if column == "worst_error" else f"{v:.1%}" for v in shown[column]]
    for column in ("median_probe_share", "worst_probe_share", "median_step_cv"):
        shown[column] = ["—" if pd.isna(v) else f"{v:.1%}" for v in shown[column]]
    names = {
        "median_abs_error": "median abs. error",
        "p90_abs_error": "p90 abs. error",
        "median_probe_share": "probe share (median)",
        "worst_probe_share": "probe share (worst)",
        "median_step_cv": "step cv (median)",
    }
    shown = shown.rename(columns={**names, "worst_error": "worst"})
    if fmt == "html":
        return shown.to_html(index=False, escape=True)
    heading = "Step time predicted before each run against the measured mean step, per backend and source:"
    body = shown.to_markdown(index=False) if fmt == "markdown" else shown.to_string(index=False)
    return f"{heading}\n\n{body}" if fmt == "markdown" else f"{heading}\n{body}"
