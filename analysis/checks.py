"""The plausibility checks of a record, re-exported: they live in :mod:`flopsweep.plausible`, one
place for the analysis and for ``predict.calibration=`` (a record the analysis flags ``check?``
never calibrates a prediction)."""

from flopsweep.plausible import (  # noqa: F401 - re-exported: analysis.checks.<NAME> is public
    CHECK_TOLERANCE,
    MAX_SCALING_EFFICIENCY,
    MAX_STEP_S,
    MIN_STEP_S,
    MISMATCH_TOLERANCE,
    calibration_problems,
    recompute_tflops,
    record_problems,
    scaling_problem,
    tflops_problem,
)
