"""The sweep objective: the one float a job returns to Hydra, so that any sweeper (Optuna's
included) can optimise it.

``objective=`` names a figure of merit of :data:`flopsweep.record.METRIC_SPECS`: a spec with a
``better`` direction (every such figure is a number). It is the spec's analysis column
(``model_tflops_per_device``, ``iteration_time_s_mean``, ``peak_cuda_allocated_gib``) or, for a
spec with no path, its metric key (``peak_cuda_allocated_bytes``). The direction comes from the
spec: ``higher`` is Optuna's ``maximize``, ``lower`` its ``minimize``.

Torch-free: ``run.py`` checks the key before Hydra starts, and the sweep process resolves the
Optuna direction (``${flopsweep_direction:${objective}}`` in ``conf/hydra/sweeper/optuna_objective.yaml``).
"""

from __future__ import annotations

import math
from typing import Any

from flopsweep.config import ConfigError
from flopsweep.record import METRIC_SPECS, MetricSpec

DEFAULT = "model_tflops_per_device"
DIRECTIONS = {"higher": "maximize", "lower": "minimize"}
"""``MetricSpec.better`` -> the direction Optuna (and ``hydra.sweeper.direction``) takes."""


def choices() -> dict[str, MetricSpec]:
    """Every name ``objective=`` takes, with its spec: the columns of the figures of merit, and
    the metric keys of those that are not nested."""
    out: dict[str, MetricSpec] = {}
    for spec in METRIC_SPECS:
        if spec.better in DIRECTIONS:
            out[spec.name] = spec
            if spec.path is None:
                out.setdefault(spec.key, spec)
    return out


def spec_of(name: str) -> MetricSpec:
    """The spec that ``objective=name`` names.

    Raises:
        ConfigError: ``name`` is not a figure of merit (a text or structured key, a count without a
            direction, or no metric at all); the message lists the choices.
    """
    spec = choices().get(name)
    if spec is None:
        known = {s.key for s in METRIC_SPECS} | {s.name for s in METRIC_SPECS}
        why = "has no better direction or is not a number" if name in known else "is not a metric"
        raise ConfigError(
            "objective",
            name,
            f"{why}; the objective must be a figure of merit of flopsweep.record.METRIC_SPECS",
            _near_fix(name) or f"pick one of {', '.join(choices())} (default {DEFAULT})",
        )
    return spec


def _near_fix(name: str) -> str | None:
    """ "did you mean" the choices nearest a typo (:func:`flopsweep.near_keys.ranked`), those that begin
    with its first word first (``usd_per_mtok``: ``usd_per_million_tokens`` before ``joules_per_token``),
    with the keys the first's figure needs (:data:`NEEDS`); None when none is near."""
    from flopsweep.near_keys import ranked

    if not isinstance(name, str):
        return None
    near = ranked(name, choices(), n=3)
    near.sort(key=lambda c: not c.startswith(name.split("_")[0] + "_"))  # stable: the rank breaks ties
    if not near:
        return None
    extra = "".join(f" {EXAMPLES[k][0]}" for k in NEEDS.get(near[0], ()))
    others = "".join(f" or objective={c}" for c in near[1:])
    return f"did you mean objective={near[0]}{extra}{others}? (default {DEFAULT})"


def direction(name: str) -> str:
    """``maximize`` or ``minimize``: the direction in which ``objective=name`` gets better.

    Raises:
        ConfigError: as :func:`spec_of`.
    """
    return DIRECTIONS[spec_of(name).better]


def value(record: dict[str, Any], name: str) -> float:
    """What a job returns to Hydra: the record's value of ``objective=name`` as a float (scaled as
    its analysis column when named by its column), NaN when the run is not ``ok``, was only
    planned, or has no value for it (``mfu_fp8`` of a bf16 run).

    Args:
        record: the job's record (``metrics.json``) or ``{"status": "plan", ...}``.

    Raises:
        ConfigError: as :func:`spec_of`.
    """
    spec = spec_of(name)
    metrics = record.get("metrics") if record.get("status") == "ok" else None
    raw: Any = metrics
    for part in spec.path if spec.path and name == spec.name else (spec.key,):
        raw = raw.get(part) if isinstance(raw, dict) else None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return math.nan
    scale = spec.scale if spec.scale and name == spec.name else 1.0
    return float(raw) / scale


PLANNED: dict[str, str] = {
    "iteration_time_s_mean": "predicted_iteration_time_s",
    "iteration_time_s_median": "predicted_iteration_time_s",
    "tokens_per_s": "predicted_tokens_per_s",
    "tokens_per_s_per_device": "predicted_tokens_per_s_per_gpu",
    "model_tflops_per_device": "predicted_tflops_per_gpu",
    "mfu": "predicted_mfu",
    "peak_cuda_allocated_gib": "est_peak_gib_per_rank",
    "peak_cuda_allocated_bytes": "est_peak_gib_per_rank",
    "peak_cuda_reserved_gib": "est_peak_gib_per_rank",
    "peak_cuda_reserved_bytes": "est_peak_gib_per_rank",
    "joules_per_token": "predicted_joules_per_token",
    "usd_per_million_tokens": "predicted_usd_per_million_tokens",
    "budget_gpu_hours": "budget_gpu_hours",
    "budget_days": "budget_days",
    "budget_usd": "budget_usd",
    "budget_energy_kwh": "budget_energy_kwh",
}
"""``objective=`` -> the ``plan.csv`` column ``plan=true plan_clusters=[...]`` ranks by
(:func:`planned`): the figures a plan predicts (tokens/s, MFU, J/token, dollars per million tokens,
the budget's days, GPU-hours, dollars and energy, the step time, the memory per rank)."""


def planned(name: str) -> tuple[str, str]:
    """``(column, better)`` a plan ranks by for ``objective=name``: a :data:`PLANNED` column of
    ``plan.csv`` and ``higher`` or ``lower`` (the metric's own direction).

    Raises:
        ConfigError: ``name`` is no figure of merit (:func:`spec_of`), or one a plan cannot predict
            (``hfu``, ``cuda_alloc_retries``...); the message lists those it can.
    """
    spec = spec_of(name)
    if name not in PLANNED:
        raise ConfigError(
            "objective",
            name,
            "is measured by a run but not predicted by plan=true, which ranks set-ups by it",
            f"pick one of {', '.join(PLANNED)} for plan=true (e.g. objective=usd_per_million_tokens)",
        )
    return PLANNED[name], spec.better


NEEDS: dict[str, tuple[str, ...]] = {
    "usd_per_million_tokens": ("cost.usd_per_gpu_hour",),
    "budget_gpu_hours": ("budget.tokens",),
    "budget_days": ("budget.tokens",),
    "budget_energy_kwh": ("budget.tokens",),
    "budget_usd": ("budget.tokens", "cost.usd_per_gpu_hour"),
}
"""``objective=`` -> the config keys its figure is computed from (:func:`flopsweep.cost.budget`,
:func:`flopsweep.cost.usd_per_million_tokens`): unset, every run and plan row has none (NaN to the
tuner; a plan found "no set-up fits" with every row ``ok``), so :func:`inputs_problem` refuses it."""

EXAMPLES: dict[str, tuple[str, str]] = {
    "cost.usd_per_gpu_hour": ("cost.usd_per_gpu_hour=2.5", "your price per GPU-hour"),
    "budget.tokens": ("budget.tokens=15e12", "the tokens to train on"),
}
"""A key of :data:`NEEDS` -> the override that sets it, as a fix writes it, and what its value is."""


def _typed_null(value: Any) -> bool:
    """Whether ``value`` is a command line's null (``null``, ``NULL``: Hydra's grammar reads any case)."""
    return isinstance(value, str) and value.strip().strip("'\"").lower() == "null"


def _set_words(keys: list[str], values: dict[str, Any]) -> str:
    """The fix's words that set ``keys`` (:data:`EXAMPLES`): ``add KEY=VALUE`` for a key the command line
    leaves out, ``replace KEY=null with KEY=VALUE`` for one it gives as null (adding it again would give the
    key twice, which is refused): ``add budget.tokens=15e12 and replace cost.usd_per_gpu_hour=null with
    cost.usd_per_gpu_hour=2.5``."""
    added = [EXAMPLES[k][0] for k in keys if not _typed_null(values.get(k))]
    swaps = [f"{k}={values[k]} with {EXAMPLES[k][0]}" for k in keys if _typed_null(values.get(k))]
    words = [f"add {' '.join(added)}"] if added else []
    return " and ".join([*words, *(["replace " + ", ".join(swaps)] if swaps else [])])


def inputs_problem(name: str, values: dict[str, Any]) -> ConfigError | None:
    """The refusal of ``objective=name`` whose figure needs a key of :data:`NEEDS` that ``values``
    (key -> its value; a key left out counts as unset) leaves unset (None), else None.

    The fix adds each missing key (:data:`EXAMPLES`) or picks :data:`DEFAULT`, which needs none.
    ``values`` may hold the text of a command line's override (``"null"``, any case, is unset there:
    the fix then says to replace it, ``replace cost.usd_per_gpu_hour=null with cost.usd_per_gpu_hour=2.5``,
    since a key given twice is refused, :func:`_set_words`). A plan's
    ``plan_clusters`` (``values["plan_clusters"]``: a list, or a command line's text) stands for
    ``cost.usd_per_gpu_hour`` where each of its clusters names its own ``@PRICE``
    (:mod:`flopsweep.cluster_prices`); where some do not, the line names them. A bad price
    (:func:`flopsweep.cluster_prices.check_prices`) is returned first, the plan's own line."""
    from flopsweep.cluster_prices import check_prices, entries, unpriced

    missing = [key for key in NEEDS.get(name, ()) if values.get(key) is None or _typed_null(values.get(key))]
    clusters = entries(values.get("plan_clusters"))
    if "cost.usd_per_gpu_hour" in missing:
        try:  # a bad price is named first, as the plan names it (H100:8@ 2 is no H100:8@ and 2)
            check_prices([c for c in clusters if "${" not in c])
        except ConfigError as exc:
            return exc
    bare = unpriced(clusters)
    if "cost.usd_per_gpu_hour" in missing and clusters and not bare:
        missing.remove("cost.usd_per_gpu_hour")  # every cluster prices its own rows
    if not missing:
        return None
    each = ",".join(f"{c}@2.5" if c in bare else c for c in clusters)  # every cluster priced: pasteable
    if "cost.usd_per_gpu_hour" in missing and clusters and len(bare) < len(clusters):
        others = [k for k in missing if k != "cost.usd_per_gpu_hour"]
        said = f"{', '.join(bare)} {'names' if len(bare) == 1 else 'name'} no @PRICE"
        return ConfigError(
            "objective",
            name,
            f"needs a price for every cluster, and {said}, with cost.usd_per_gpu_hour unset"
            + (f" ({' and '.join(others)} unset too)" if others else "")
            + ": their rows would have no dollars to rank by",
            f"{_set_words(['cost.usd_per_gpu_hour', *others], values)} "
            "(the price of those without one), or give each its own, USD per GPU-hour: "
            f"plan_clusters=[{each}]"
            + "".join(f" {EXAMPLES[k][0]}" for k in others)
            + f"; or objective={DEFAULT}",
        )
    own = (
        f", or a price in each cluster's name: plan_clusters=[{each}]"
        if "cost.usd_per_gpu_hour" in missing and clusters
        else ""
    )
    return ConfigError(
        "objective",
        name,
        f"needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} unset "
        "(no run or plan row would have a value to rank by)",
        f"{_set_words(missing, values)} ({'; '.join(EXAMPLES[k][1] for k in missing)})"
        f"{own}, or objective={DEFAULT}",
    )


def objective_value(row: Any, name: str) -> float | None:
    """The value of ``objective=name`` a judged row predicts (:class:`flopsweep.plan_assess.Row`):
    its :data:`PLANNED` column, as ``plan=true`` ranks by (tokens/s, MFU, TFLOPs per GPU, J/token,
    dollars per million tokens, the step time...); None for an objective no prediction gives (``hfu``)
    or a row without a prediction. The tuner's (:mod:`hydra_plugins.flopsweep_tune.tuning`)."""
    column = PLANNED.get(name)
    value = getattr(row, column) if column and row.status == "ok" else None
    return float(value) if isinstance(value, int | float) and value == value else None
