"""Spread: 95% confidence intervals of the rates and repeats pooled into one row (whether the best
two set-ups can be told apart by these intervals: :mod:`analysis.significance`).

Every interval is a step time's, turned into rates. Tokens/s, TFLOPs, MFU and HFU are each a
constant (tokens, FLOPs, FLOPs over the peak per step: ``flopsweep.metrics``) over the mean step
time ``m``, so a rate's interval follows from the step's half width ``h`` on the log scale (a rate is
positive): ``(work / m) exp(-+ h / m)`` (:func:`rate_ends`; ``h / m`` the t quantile times the standard
error of ``ln m``, the delta method). It holds the figure ``work / m``, is ``work / (m +- h)`` to within
``(h / m)**2 / 2`` for a small ``h / m``, and is finite for every ``h``: with 2 rounds (t(0.975, 1) =
12.71) two steps 16% apart give ``h >= m``, where ``work / (m - h)`` had no upper bound (``inf``, before
session 33). The step's interval is the Student-t interval of a mean, ``m +- t(0.975, n - 1) s / sqrt(n)``
(``s`` the sample standard deviation; NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.5.2 "Confidence
limits for the mean"; the quantile from ``scipy.stats.t.ppf``):

- **over repeats** (``ci_over="repeats"``: a set-up measured in ``repeats=N`` rounds, N >= 2 ok
  rounds): over the N rounds' mean step times (``iteration_time_s_mean``), n - 1 degrees of
  freedom. The pooled row's step is their mean, the figure that interval is about (their median
  need not lie in it: five rounds of 1.0 s and four of 1.5 s give [1.02, 1.42] s), and its rates
  follow from that step (:data:`MEAN_STEP_RATES`; the costs :data:`STEP_COSTS` too). Every figure
  ``objective=`` names is :func:`pooled_figure`'s, the tuner's figure for the same runs; every other
  number is the mean over the rounds (the energy too), the checks are derived again from those, and
  text is the rounds' shared value or blank (:func:`pool_repeats`): no column is one round's.
- **over steps** (``ci_over="steps"``: one run): over the measured step times of the run
  (``metrics.iteration_time_s.values``), whose mean the record's rates are over (:func:`step_factors`).
  Steps of one run are not independent samples of the machine's state (drift within the window is
  shared), so this interval is narrower than the one over repeats: measure with ``repeats=`` to compare.

No interval has an unbounded end: one run with fewer than two step times has none (NaN, blank).
"""

from __future__ import annotations

import logging
import math
import os
import statistics
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from analysis.catalogue import CI_COLUMNS, CI_METRICS, SETUP_NAMES
from flopsweep.identity import differing_keys, edited_setup_key, setup_config
from flopsweep.objective import choices as objective_choices

log = logging.getLogger("analysis")

__all__ = [
    "CI_COLUMNS",
    "CI_LEVEL",
    "CI_METRICS",
    "Pooled",
    "pool_repeats",
    "pooled_figure",
    "rate_ends",
]

CI_LEVEL = 0.95
"""The confidence level of every interval."""


@lru_cache(maxsize=128)
def t_quantile(dof: int) -> float:
    """The two-sided :data:`CI_LEVEL` Student-t quantile for ``dof`` degrees of freedom (12.71 for 1,
    2.776 for 4)."""
    from scipy.stats import t  # imported when the first interval is made

    return float(t.ppf(0.5 + CI_LEVEL / 2, dof))


def half_width(values: Sequence[float]) -> tuple[float, float] | None:
    """``(mean, h)``: the mean of ``values`` and the half width of its t-interval; None for fewer
    than two finite values."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if len(xs) < 2:
        return None
    return statistics.fmean(xs), t_quantile(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))


def interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The t-interval ``(low, high)`` of the mean of ``values`` (None for fewer than two)."""
    got = half_width(values)
    return None if got is None else (got[0] - got[1], got[0] + got[1])


def rate_ends(work: float, mean: float, h: float) -> tuple[float, float]:
    """``(low, high)``: the 95% interval of the rate ``work / mean`` from the step's t half width ``h``
    (s), on the log scale: ``(work / mean) exp(-h / mean)`` to ``(work / mean) exp(h / mean)``, ``h / mean``
    being the t quantile times the standard error of ``ln mean`` (the delta method: ``s / (mean sqrt(n))``).
    Finite and above 0 for every ``h``: two runs 16% apart have ``h >= mean`` (t(0.975, 1) = 12.71), where
    ``work / (mean - h)`` had no upper bound (``inf``). ``work`` is what one step does (tokens, FLOPs, or
    FLOPs over the peak for MFU), ``mean > 0``, ``h >= 0``; the interval holds ``work / mean``; for a
    small ``h / mean`` it is ``work / (mean +- h)`` (within ``(h / mean)**2 / 2``)."""
    rate = work / mean
    spread = math.exp(min(h / mean, 700.0))  # exp(700) is finite; a wider step interval says no more
    return rate / spread, rate * spread


def step_factors(step_times: object) -> tuple[float, float] | None:
    """``(low, high)`` factors that turn a rate computed from the mean of ``step_times`` (s) into
    the ends of its interval over steps: ``exp(-h / mean)`` and ``exp(h / mean)`` (:func:`rate_ends` with
    ``work = mean``; finite). None when there are fewer than two valid step times."""
    if not isinstance(step_times, list):
        return None
    try:
        got = half_width([float(v) for v in step_times if isinstance(v, (int, float))])
    except (TypeError, ValueError, OverflowError):
        return None
    if got is None or got[0] <= 0:
        return None
    mean, h = got
    return rate_ends(mean, mean, h)


def step_columns(out: dict, step_times: object) -> None:
    """Set ``out``'s interval columns over steps from its rates, ``ci_over`` ``steps`` (or None
    when there is no interval) and ``repeats`` 1."""
    factors = step_factors(step_times) if out.get("status") == "ok" else None
    for m in CI_METRICS:
        value = out.get(m)
        known = factors is not None and isinstance(value, (int, float)) and value is not None
        out[f"{m}_ci_low"] = value * factors[0] if known else None
        out[f"{m}_ci_high"] = value * factors[1] if known else None
    out["ci_over"] = "steps" if factors is not None else None
    out["repeats"] = 1


POOL_KEYS = ["repeat_group", "setup_id", "world_size"]
"""What makes records rounds of one measurement: the sweep's ``run.repeat_group``, the set-up
(``setup_id``) and the world size; and, within those, the same :data:`TAG_KEY` and :data:`PROBE_KEYS`."""
TAG_KEY = "tag"
"""The run's ``config.tag`` (blank and null: no tag). ``setup_id`` leaves the tag out, so that runs tagged
differently still scale against each other and keep their ids; but a user who tags runs differently means
them apart (``-m tag=a,b repeats=2``: two rows of two rounds each, not one row of four)."""
PROBE_KEYS = ["predict_probe", "layer_probe"]
"""The step-time probes a round ran (``config.predict.probe``, ``config.predict.layer_probe``; blank,
from before the key: off). ``setup_id`` leaves ``predict.*`` out, as a probe does not change the step;
but it lengthens the job (``run_wall_s``, ``probe_s``, ``probe_share``) and sets the prediction
(``predicted_iteration_time_s``, ``prediction_error``), so a probed and an unprobed round of one set-up
are two rows, each pooled from its own rounds, not one row of both: their step times stay
apart too, and the two rows' intervals say whether the probe changed the step (docs/analysis.md)."""


def setup_text(df: pd.DataFrame) -> pd.Series:
    """One text per row naming its measurement's set-up, the one place that says whether two rows measure
    the same set-up: :data:`POOL_KEYS` but the sweep's ``repeat_group`` (``setup_id``, world size), the
    :data:`TAG_KEY` and the :data:`PROBE_KEYS`; ``""`` where ``setup_id`` or the world size is blank.
    :func:`pool_repeats` pools the rows of one text within one ``repeat_group``;
    :func:`analysis.significance.verdict` never judges a row against another of its text (an Optuna
    study that drew one set-up twice: two rows, no repeat group, were called a tie between set-ups)."""
    if df.empty:
        return pd.Series("", index=df.index, dtype=object)
    parts = [
        df[k]
        .astype(object)
        .map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
        if k in df
        else pd.Series("", index=df.index)
        for k in POOL_KEYS[1:]
    ]
    known = parts[0].ne("") & parts[1].ne("")
    tags = (
        df[TAG_KEY].astype(object).fillna("").astype(str) if TAG_KEY in df else pd.Series("", index=df.index)
    )
    probes = [  # a probed and an unprobed round are not one measurement of the job (PROBE_KEYS)
        df[k].astype(object).fillna(False).astype(bool).astype(str)
        if k in df
        else pd.Series("False", index=df.index)
        for k in PROBE_KEYS
    ]
    text = parts[0]
    for part in (parts[1], tags, *probes):
        text = text + "|" + part
    return text.where(known, "")


STEP_COLUMN = "iteration_time_s_mean"
"""The step time (s) that the :data:`MEAN_STEP_RATES` of a row follow from. In a pooled row it is the
mean of the rounds' mean steps (the figure their t-interval is about), not their median."""
MEAN_STEP_RATES = (
    "tokens_per_s",
    "tokens_per_s_per_device",
    "model_tflops_per_device",
    "hardware_tflops_per_device",
    "tflops_per_device",
    "mfu",
    "hfu",
    "mfu_fp8",
)
"""The rates a record computes as a constant over its mean step time (``flopsweep.metrics``: tokens,
FLOPs, FLOPs over the peak). In a pooled row each is that constant (the median over the rounds of
rate x step) over the pooled :data:`STEP_COLUMN`, as its legend says ("from the mean step"), and its
interval follows from the step's (:func:`rate_ends`). The median of the rounds' rates is not: over an
even number of rounds it is the mean of the middle two, and the mean of two rates is not the rate of
the mean of their steps (steps of 0.21 s and 2.14 s: 1,325 tokens/s of 512-token steps beside a
1.18 s step, three times 435)."""


STEP_COSTS = ("usd_per_million_tokens", "budget_gpu_hours", "budget_days", "budget_usd")
"""The costs a record computes as a constant times its mean step time (``flopsweep.cost``: a price times
the world size over the tokens of a step, or a token budget's hours, days and dollars). In a pooled row
each is that constant (the median over the rounds of cost / step) times the pooled :data:`STEP_COLUMN`,
and its interval the constant times the step's t-interval, its low end at least 0 (:func:`pooled_figure`)."""
FIGURES = tuple(dict.fromkeys((*MEAN_STEP_RATES, *STEP_COSTS, *objective_choices())))
"""The columns a pooled row takes from :func:`pooled_figure`: the rates, the step costs, and every
figure ``objective=`` can name (``flopsweep.objective.choices``: the step times, J/token, memory...),
so that the tuner (``hydra/sweeper=tune``), which ranks by the same function, shows the same figure."""


class Pooled(NamedTuple):
    """The figure of one set-up's rounds (:func:`pooled_figure`) and its 95% interval."""

    value: float
    """The figure: what a pooled row shows and the tuner ranks by."""
    low: float
    """The interval's low end; NaN with no interval (fewer than two rounds, or a rate without steps)."""
    high: float
    """The interval's high end (finite); NaN with no interval."""
    rounds: int
    """How many rounds it is over (those with a finite value, and for a rate or cost a step > 0)."""


def _number(x: object) -> float | None:
    """``x`` as a finite float, else None (None, NaN, inf, text)."""
    try:
        f = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def pooled_figure(name: str, values: Sequence[float], steps: Sequence[float] | None = None) -> Pooled | None:
    """The figure of the column ``name`` over one set-up's rounds (a ``repeats=`` group, or the tuner's
    runs of a set-up) and its 95% interval, the one function both a pooled row (:func:`pool_repeats`) and
    the tuner (``flopsweep.tune.Candidate.pooled``) take it from.

    Args:
        name: the analysis column (= the ``objective=`` name), e.g. ``tokens_per_s``.
        values: each round's value of it; a None, NaN or inf round is left out.
        steps: each round's mean step time (s, :data:`STEP_COLUMN`), in the order of ``values``;
            needed for a rate or a step cost.

    Returns:
        None when no round has a value. Else, with ``m +- h`` the Student-t interval of the mean of
        the rounds' steps (:func:`half_width`; NIST/SEMATECH 1.3.5.2):

        - a rate (:data:`MEAN_STEP_RATES`, ``v = work / step``): ``work / m``, ``work`` the median of
          ``v x step``, its interval :func:`rate_ends` (finite: ``work / m`` times ``exp(-+ h / m)``);
        - a step cost (:data:`STEP_COSTS`, ``v = k x step``): ``k x m``, ``k`` the median of
          ``v / step``, its interval ``k x max(m - h, 0)`` to ``k x (m + h)``;
        - anything else (a step time, J/token, memory): the mean of the values and its t-interval, the
          low end at least 0 for a quantity that is never negative.

        One round: its value, no interval (NaN ends). A rate or cost with no round that has a step:
        the median of the values, no interval (no made-up step).
    """
    nan = math.nan
    vs = [_number(v) for v in values]
    ok = [v for v in vs if v is not None]
    if not ok:
        return None
    if name in MEAN_STEP_RATES or name in STEP_COSTS:
        ss = [_number(s) for s in steps] if steps is not None and len(steps) == len(vs) else [None] * len(vs)
        pairs = [(v, s) for v, s in zip(vs, ss, strict=True) if v is not None and s is not None and s > 0]
        if not pairs:
            return Pooled(statistics.median(ok), nan, nan, len(ok))
        got = half_width([s for _, s in pairs])
        if got is None:
            return Pooled(pairs[0][0], nan, nan, 1)
        m, h = got
        if name in MEAN_STEP_RATES:
            work = statistics.median(v * s for v, s in pairs)  # per step: tokens, FLOPs, FLOPs / peak
            return Pooled(work / m, *rate_ends(work, m, h), len(pairs))
        per_s = statistics.median(v / s for v, s in pairs)
        return Pooled(per_s * m, per_s * max(m - h, 0.0), per_s * (m + h), len(pairs))
    got = half_width(ok)
    if got is None:
        return Pooled(ok[0], nan, nan, 1)
    m, h = got
    low = m - h if m - h > 0 or min(ok) < 0 else 0.0
    return Pooled(m, low, m + h, len(ok))


def join_moved_sweeps(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with one ``repeat_group`` for the rounds of a sweep that was moved, then resumed.

    A round's ``run.repeat_group`` is a hash of its sweep folder's path when it ran
    (``flopsweep.job.lifecycle.repeat_fields``): after ``mv S T`` and ``resume=true`` in ``T``, the
    earlier rounds carry the hash of ``S`` and the new ones that of ``T``, and did not pool. Groups
    whose rounds lie in one sweep folder (the parent of their job folders, ``T/0``, ``T/1``) are one
    group, named by the smallest id; a group copied elsewhere keeps joining by its id."""
    if "repeat_group" not in df or df["repeat_group"].notna().sum() < 2:
        return df
    root: dict[str, str] = {}

    def find(group: str) -> str:
        while root.setdefault(group, group) != group:
            group = root[group]
        return group

    have = df["repeat_group"].notna()
    folders = df.loc[have, "run_dir"].astype(str).map(os.path.dirname)
    for _, groups in df.loc[have, "repeat_group"].astype(str).groupby(folders):
        first, *others = sorted({find(g) for g in groups})
        for other in others:
            root[other] = first
    df = df.copy()
    df["repeat_group"] = df["repeat_group"].map(lambda g: find(str(g)) if pd.notna(g) else g)
    return df


ROUND_MEANS = ("run_wall_s", "loss_first", "loss_last")
"""Numbers of a round outside the metrics with a unit that a pooled row takes the mean of, as it does
every ``numeric`` column of :func:`pool_repeats`: the job's wall time and the first and last loss."""
STEP_RATES_OF = {"predicted_tokens_per_s": "predicted_iteration_time_s"}
"""Rates of a step other than :data:`STEP_COLUMN`: in a pooled row each is its work per step (the median
over the rounds of rate x step) over the mean of that step, as the measured rates follow the measured
step (the prediction's tokens/s from the prediction's step)."""
JOINED = ("run_dir", "run_id")
"""Columns a pooled row lists every round's value of (comma-separated, in round order)."""
HIGHEST = ("loadavg_1m_start", "loadavg_1m_end")
"""Columns a pooled row takes the highest round's value of (the busiest the host was)."""
UNIONS = {"noise": ",", "warnings": "; ", "throttle_reasons": None}
"""Columns a pooled row takes every round's distinct items of: text joined by the separator (sorted for
``noise``), a list (``throttle_reasons``) as a list in the order seen."""
DERIVED = ("model_tflops_per_device_recomputed", "tflops_mismatch", "peak_memory_error", "prediction_error")
"""Columns one record derives from its figures; a pooled row derives them again from its pooled figures
(:func:`_derive`), never one round's."""
ROUND_ONLY = ("repeat",)
"""A round's own place in the sweep: blank in a pooled row (its rounds are ``run_dir``'s)."""


CODE_KEY = "code_id"
"""The code that measured a run (``flopsweep.identity.code_key``): what joins runs of no repeat group."""


def pool_group(df: pd.DataFrame) -> pd.Series:
    """What joins rows into rounds of one measurement, beside :func:`setup_text`: the sweep's
    ``repeat_group``; for a run of no repeat group (``repeats=1``: a single run, an Optuna study's draw),
    the code that measured it (:data:`CODE_KEY`: a clean checkout's commit and the torch, CUDA, DeepSpeed
    and Python versions), so that the same command run twice, into two folders, is one row of two rounds;
    ``""`` where neither is known (edited or installed code: a before and an after of an edit stay two
    rows). Was (session 43): runs of no repeat group were never pooled."""

    def text(v: object) -> str:
        return v if isinstance(v, str) else ""

    blank = pd.Series("", index=df.index, dtype=object)
    group = df["repeat_group"].map(text) if "repeat_group" in df else blank
    code = df[CODE_KEY].map(lambda v: f"code {v}" if text(v) else "") if CODE_KEY in df else blank
    return group.where(group.ne(""), code)


def pool_repeats(df: pd.DataFrame, pooled: pd.Series, numeric: Sequence[str]) -> pd.DataFrame:
    """``df`` with the rounds of each repeated measurement (:func:`pool_group`: a repeat group, or for runs
    of none the code that measured them; :func:`setup_text`: :data:`POOL_KEYS`, :data:`TAG_KEY`,
    :data:`PROBE_KEYS`) as one row.

    Only rows where ``pooled`` is true (ok rounds that pass their checks) are pooled; a failed
    round keeps its own row, with its status. A pooled row is the first round's row with every column
    set by one rule, so that no column shows one round's value as the pool's:

    - :data:`FIGURES`: :func:`pooled_figure` (the step, :data:`STEP_COLUMN`, the rounds' mean; the
      :data:`MEAN_STEP_RATES` and :data:`STEP_COSTS` from it; any other figure ``objective=`` names the
      rounds' mean), and the :data:`CI_METRICS` intervals over the rounds from the step's (``ci_over``
      ``repeats``);
    - every other ``numeric`` column (``analysis.load`` passes the metrics with a unit: energy, FLOPs,
      the prediction, ...) and :data:`ROUND_MEANS`: the mean over the rounds with a value, the step's
      rule (the energy ``energy_j`` as its ``joules_per_token``); :data:`STEP_RATES_OF` from their step;
    - :data:`DERIVED`: derived again from the pooled figures (:func:`_derive`);
    - :data:`JOINED` every round's, :data:`HIGHEST` the highest, :data:`UNIONS` the distinct items,
      ``duplicate_run_id`` any round's, :data:`ROUND_ONLY` blank, ``repeats`` the count of rounds;
    - any other column (the set-up, text, lists): the rounds' value where they agree, else blank;
      a set-up column that differs (``nproc_per_node``, ``nnodes``: ``setup_id`` leaves the rank count
      out) is named in ``warnings``.

    A group of one round keeps its row and its interval over steps. Rounds with the same ``run_id``
    (copies of one record) count once. Row order: each group at its first round. The rounds of a sweep
    moved and then resumed are one group (:func:`join_moved_sweeps`).
    """
    df = join_moved_sweeps(df)
    group, text = pool_group(df), setup_text(df)
    eligible = pooled & group.ne("") & text.ne("")
    if not eligible.any():
        return df
    by = [group[eligible], text[eligible]]
    groups = df[eligible].groupby(by, sort=False)
    keep = pd.Series(True, index=df.index)
    out = df.copy()
    for _, group in groups:
        # a copy of a round (the same run id, e.g. a results folder copied beside its original) is
        # one measurement: it counts once in the figures and the interval (and stays out of the table)
        rounds = group.drop_duplicates("run_id") if "run_id" in group else group
        keep[group.index.difference(rounds.index)] = False
        if len(rounds) < 2:
            continue
        keep[rounds.index[1:]] = False
        _pool_row(out, rounds.index[0], rounds, numeric)
    return out[keep].reset_index(drop=True)


def _pool_row(out: pd.DataFrame, first: int, rounds: pd.DataFrame, numeric: Sequence[str]) -> None:
    """Set the pooled row ``first`` of ``out`` from its ``rounds``, each column by its rule
    (:func:`pool_repeats`)."""
    means = [c for c in dict.fromkeys([*numeric, *ROUND_MEANS]) if c in out and c not in FIGURES]
    for column in means:
        values = pd.to_numeric(rounds[column], errors="coerce")
        values = values[values.abs().lt(math.inf)]  # NaN and inf rounds have no value
        _set_number(out, first, column, values.mean() if len(values) else math.nan)
    for rate, step in STEP_RATES_OF.items():
        if rate in out and step in out:
            out.at[first, rate] = _rate_of_mean_step(rounds[rate].tolist(), rounds[step].tolist())
    _pool_figures(out, first, rounds)
    done = {*means, *STEP_RATES_OF, *FIGURES, *CI_COLUMNS, *DERIVED, *JOINED, *HIGHEST, *UNIONS, *ROUND_ONLY}
    done |= {*POOL_KEYS, CODE_KEY, TAG_KEY, *PROBE_KEYS, "ci_over", "repeats", "duplicate_run_id", "status"}
    differ = [c for c in out.columns if c not in done and not _agree(rounds[c].tolist())]
    for column in [*differ, *(c for c in ROUND_ONLY if c in out)]:
        _set_blank(out, first, column)
    out.at[first, "ci_over"] = "repeats"
    out.at[first, "repeats"] = len(rounds)
    if "duplicate_run_id" in out:
        out.at[first, "duplicate_run_id"] = bool(rounds["duplicate_run_id"].fillna(False).astype(bool).any())
    for column in JOINED:
        if column in out:
            out.at[first, column] = ", ".join(str(v) for v in rounds[column] if not _blank(v)) or None
    for column in HIGHEST:
        if column in out:
            out.at[first, column] = pd.to_numeric(rounds[column], errors="coerce").max()
    for column, sep in UNIONS.items():
        if column in out:
            out.at[first, column] = _union(rounds[column].tolist(), sep, column == "noise")
    setup = [c for c in differ if c in SETUP_NAMES]
    if setup:  # the rounds are not the same set-up in a column setup_id leaves out: say so
        said = out.at[first, "warnings"] if "warnings" in out else None
        shown = (
            f"{c} ({', '.join(dict.fromkeys(str(v) for v in rounds[c] if not _blank(v)))})" for c in setup
        )
        note = f"pooled rounds differ in {', '.join(shown)}: left blank"
        out.at[first, "warnings"] = f"{said}; {note}" if isinstance(said, str) and said else note
    _derive(out, first)


def _set_number(out: pd.DataFrame, first: int, column: str, value: float) -> None:
    """``out.at[first, column] = value``, the column made float64 first where it holds whole numbers
    (``Int64``: a loss recorded as ``11``) and ``value`` is not one."""
    if pd.api.types.is_integer_dtype(out[column]) and not (math.isfinite(value) and value.is_integer()):
        out[column] = out[column].astype("float64")
    out.at[first, column] = value


def _set_blank(out: pd.DataFrame, first: int, column: str) -> None:
    """Blank ``out.at[first, column]``, a numpy bool or integer column made nullable first (``boolean``,
    ``Int64``: numpy's cannot hold a blank)."""
    kind = out[column].dtype.kind if isinstance(out[column].dtype, np.dtype) else ""
    if kind and kind in "biu":
        out[column] = out[column].astype("boolean" if kind == "b" else "Int64")
    out.at[first, column] = None


def _blank(value: object) -> bool:
    """Whether a cell is blank (None, NaN, ``pd.NA``); a list or dict cell never is."""
    return value is None or (not isinstance(value, (list, tuple, dict)) and bool(pd.isna(value)))


def _agree(values: list) -> bool:
    """Whether the rounds' cells are one value (blanks alike; lists and dicts by their items)."""
    return len({None if _blank(v) else repr(v) for v in values}) <= 1


def _union(values: list, sep: str | None, sort: bool) -> object:
    """The distinct items of the rounds' cells: a text cell split at ``sep`` and joined by it (sorted
    when ``sort``), or with ``sep`` None a list cell's items as a list; blank when there are none."""
    if sep is None:
        items = list(dict.fromkeys(x for v in values if isinstance(v, list) for x in v))
        return items if any(isinstance(v, list) for v in values) else None
    parts = list(dict.fromkeys(p for v in values if isinstance(v, str) for p in v.split(sep) if p))
    return sep.join(sorted(parts) if sort else parts) or None


def _rate_of_mean_step(values: list, steps: list) -> float:
    """``work / mean(step)`` with ``work`` the median over the rounds of ``rate x step`` (rounds with both
    a finite rate and a step > 0); NaN when none has."""
    pairs = [(v, s) for v, s in zip(map(_number, values), map(_number, steps), strict=True) if v is not None]
    pairs = [(v, s) for v, s in pairs if s is not None and s > 0]
    if not pairs:
        return math.nan
    return statistics.median(v * s for v, s in pairs) / statistics.fmean(s for _, s in pairs)


def _derive(out: pd.DataFrame, first: int) -> None:
    """Set the pooled row's :data:`DERIVED` columns from its pooled figures, by the rules one record's
    follow: ``model_tflops_per_device_recomputed`` the pooled ``model_flops_per_iteration`` over the
    pooled step x the world size (:func:`flopsweep.plausible.recompute_tflops`), ``tflops_mismatch``
    whether the pooled TFLOPs are more than :data:`flopsweep.plausible.MISMATCH_TOLERANCE` from it,
    ``peak_memory_error`` and ``prediction_error`` from the pooled estimate and measurement
    (:func:`analysis.fields.peak_memory_error`, :func:`analysis.fields.prediction_error`)."""
    from analysis.fields import peak_memory_error, prediction_error
    from flopsweep.plausible import MISMATCH_TOLERANCE, recompute_tflops

    row = out.loc[first]
    world = row.get("world_size")
    view = {
        "metrics": {
            "model_flops_per_iteration": _number(row.get("model_flops_per_iteration")),
            "iteration_time_s": {"mean": _number(row.get(STEP_COLUMN))},
        },
        "system": {"world_size": None if _blank(world) else int(world)},
    }
    expected = recompute_tflops(view)
    if "model_tflops_per_device_recomputed" in out:
        out.at[first, "model_tflops_per_device_recomputed"] = math.nan if expected is None else expected
    recorded = _number(row.get("model_tflops_per_device"))
    if "tflops_mismatch" in out:
        out.at[first, "tflops_mismatch"] = bool(
            recorded is not None
            and expected is not None
            and abs(recorded - expected) > MISMATCH_TOLERANCE * expected
        )
    pairs = {
        "peak_memory_error": (peak_memory_error, "predicted_peak_gib", "peak_cuda_allocated_gib"),
        "prediction_error": (prediction_error, "predicted_iteration_time_s", STEP_COLUMN),
    }
    for column, (rule, predicted, measured) in pairs.items():
        if column in out:
            got = rule(_number(row.get(predicted)), _number(row.get(measured)))
            out.at[first, column] = math.nan if got is None else got


def _pool_figures(out: pd.DataFrame, first: int, rounds: pd.DataFrame) -> None:
    """Set the pooled row ``first`` of ``out``: each of :data:`FIGURES` its :func:`pooled_figure` over
    the ``rounds`` (the step the mean of their mean steps, the rates and step costs from it), and the
    :data:`CI_METRICS` intervals its ends; NaN where a rate or the step is missing (no made-up end)."""
    steps = rounds[STEP_COLUMN].tolist() if STEP_COLUMN in rounds else None
    for m in FIGURES:
        if m not in out or not pd.api.types.is_numeric_dtype(out[m]):
            if m in CI_METRICS:
                out.at[first, f"{m}_ci_low"], out.at[first, f"{m}_ci_high"] = math.nan, math.nan
            continue
        got = pooled_figure(m, rounds[m].tolist(), steps)
        out.at[first, m] = got.value if got is not None else math.nan
        if m in CI_METRICS:
            ends = (got.low, got.high) if got is not None else (math.nan, math.nan)
            out.at[first, f"{m}_ci_low"], out.at[first, f"{m}_ci_high"] = ends


def edited_round(
    record: dict[str, Any], out: dict[str, Any], configs: dict[tuple, Any], edited: list
) -> None:
    """A round of a ``repeats=`` sweep whose config was edited after it ran (its stored
    ``run.setup_key`` names another set-up: :func:`flopsweep.identity.edited_setup_key`) takes in
    ``out["setup_id"]`` the set-up id of its config, so it is never pooled with that set-up's rounds,
    and goes into ``edited`` for :func:`warn_edited_rounds`; ``configs`` keeps one set-up config per
    ``(repeat_group, setup_id)`` of the rounds that agree with their key."""
    if out.get("repeat_group") is None:
        return
    own = edited_setup_key(record)
    config = setup_config(record["config"])
    if own is None:
        configs.setdefault((out["repeat_group"], out["setup_id"]), config)
        return
    edited.append((out["run_dir"], (out["repeat_group"], out["setup_id"]), config))
    out["setup_id"] = own


def warn_edited_rounds(edited: list, configs: dict[tuple, Any]) -> None:
    """One warning per edited round of :func:`edited_round`, naming the config keys that differ from a
    round of the set-up its ``run.setup_key`` names (at most 8)."""
    for run_dir, claimed, config in edited:
        other = configs.get(claimed)
        keys = ", ".join(differing_keys(other, config)[:8]) if other is not None else "no other round read"
        log.warning(
            "%s: its config differs from its set-up's other rounds (%s; edited after it ran?): not pooled",
            run_dir,
            keys,
        )
