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
no prediction are left out.
"""

from __future__ import annotations

import pandas as pd

COLUMNS = ["backend", "source", "runs", "median_abs_error", "p90_abs_error", "worst_error"]
"""The summary's columns, in order (errors as fractions; the people formats show percent)."""

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
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def render_summary(summary: pd.DataFrame, fmt: str) -> str:
    """``summary`` in ``fmt``: csv and json as numbers (fractions); table and markdown with the
    errors in percent under a one-line heading; html a table."""
    if fmt == "csv":
        return summary.to_csv(index=False)
    if fmt == "json":
        return summary.to_json(orient="records", indent=1)
    if summary.empty:
        return "prediction error: no ok record has both a prediction and a measured step"
    shown = summary.copy()
    for column in ("median_abs_error", "p90_abs_error", "worst_error"):
        shown[column] = [f"{v:+.1%}" if column == "worst_error" else f"{v:.1%}" for v in shown[column]]
    names = {"median_abs_error": "median abs. error", "p90_abs_error": "p90 abs. error"}
    shown = shown.rename(columns={**names, "worst_error": "worst"})
    if fmt == "html":
        return shown.to_html(index=False, escape=True)
    heading = "Step time predicted before each run against the measured mean step, per backend and source:"
    body = shown.to_markdown(index=False) if fmt == "markdown" else shown.to_string(index=False)
    return f"{heading}\n\n{body}" if fmt == "markdown" else f"{heading}\n{body}"
