"""Leave-one-set-up-out check of the nearest-set-up prediction (docs/prediction-nearest.md).

Usage (CPU, no torch; from anywhere)::

    python benchmarks/nearest_loo.py [DIR] [--list] [--from SOURCE] [--rates-from RATES]

Reads every record under ``DIR`` (default ``benchmarks/results/h200``, relative paths from the
current folder) as ``predict.calibration`` reads a folder
(:func:`flopsweep.calibration_files.calibration_records`), and predicts each ``ok`` one-GPU record's
step twice, from inputs that leave out every record of its
own set-up (its repeats, the same config less the rank count on the same GPU):

- ``flops``: the flat estimate the model falls back to, the hardware FLOPs at 0.6 of the record's
  measured GEMM rate (``UNCALIBRATED_GEMM_FRACTION``), or 0.45 of the datasheet peak where it measured
  none (``DATASHEET_GEMM_FRACTION``: the older records), an eager fp8 record's float8 casts on top
  (:mod:`flopsweep.fp8_cast`);
- ``nearest``: :func:`flopsweep.nearest.nearest_compute` over the other set-ups' records (its optimizer
  rate over them too), else the ``flops`` estimate (counted under ``fell back``).

A one-GPU ZeRO-3 record's predictions get its floor added, as the job's do (:mod:`flopsweep.zero3_floor`).
Each record is placed at the memory edge or off it by today's memory estimate of its config, as the job places
itself before it runs (:func:`flopsweep.nearest_measured.estimated_edge`; ``benchmarks/memory_estimate.py``'s
reading of old configs), so that a target off the edge takes a record that ran unsteady there last
(:func:`flopsweep.nearest.unsteady_edge`).

Prints one markdown table: per backend (a ZeRO stage named) and over all records, the records, and of
each prediction the median, 90th percentile and worst |error|, the error being
(predicted - measured) / measured mean step. ``--list`` prints each record's errors and source instead.
``--from SOURCE`` predicts ``DIR``'s records from ``SOURCE``'s only (nothing of ``DIR`` is left out
because nothing of it is used): run on ``results/h100 --from results/h200``, the error of a prediction
carried across GPU kinds (the nearest H200 set-up scaled by the datasheet peak ratio).
``--rates-from RATES`` adds ``RATES``'s profiled records (those with a ``metrics.breakdown``) to the
records the optimizer rate is taken over (:func:`flopsweep.predict.optimizer_rate`, each scaled by its
GPU's datasheet memory bandwidth over the predicted record's): run on ``results/h100/session27/grid1b
--rates-from results/h200``, an H100 grid without profiles, its optimizer separated by the H200 profiles.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import logging
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from flopsweep import forecast, fp8_cast, nearest, nearest_measured, zero3_floor  # noqa: E402 - after the path
from flopsweep import predict as pr  # noqa: E402

DEFAULT_DIR = HERE / "results" / "h200"


def _label(m: nearest_measured.Measured) -> str:
    name, group = m.backend[0], m.backend[1]
    return f"ZeRO-{group.rsplit('-', 1)[1]}" if name == "deepspeed" and "-" in group else name


def _flops(m: nearest_measured.Measured) -> float:
    """The flat estimate of ``m``'s step: compute only (one GPU), as
    :func:`flopsweep.predict_record.predict_record` makes it without a calibration; the datasheet's
    where the record measured no GEMM rate."""
    metrics = m.record.get("metrics") or {}
    measured = metrics.get("measured_matmul_tflops")
    cast = fp8_cast.cast_time(m.record, m.workload, pr.memory_tbps(nearest_measured.device_of(m)))
    if measured:
        return pr.compute_uncalibrated(m.workload, gemm_tflops=measured, cast=cast).compute_s
    return pr.compute_uncalibrated(
        m.workload, gemm_tflops=metrics.get("peak_tflops"), what="datasheet", cast=cast
    ).compute_s


def _edge(m: nearest_measured.Measured) -> bool | None:
    """Whether ``m``'s set-up is at the memory edge of its GPU by today's memory estimate of its config; None
    where the config cannot be read or the estimate fails."""
    from memory_estimate import run_config

    from flopsweep.layout import Layout
    from flopsweep.memory import peak_bytes

    system = m.record.get("system") or {}
    try:
        cfg = run_config(m.record["config"])
        layout = Layout(**(system.get("parallel") or {"dp_shard": system["world_size"]}))
        with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed's accelerator line
            peak = peak_bytes(cfg, layout)
    except Exception:  # noqa: BLE001 - an old config or an estimate that fails: the edge unknown
        return None
    return nearest_measured.estimated_edge(peak / 2**30, nearest_measured.device_of(m))


def evaluate(directory: Path, source: Path | None = None, rates_from: Path | None = None) -> list[dict]:
    """One row per ok one-GPU record of ``directory``: name, backend, measured, flops and nearest
    predictions (seconds) and the nearest's source (or why it fell back). With ``source`` (``--from``),
    each record is predicted from ``source``'s records only (another GPU kind's: the nearest set-up
    scaled by the datasheet peak ratio), none of ``directory``'s. With ``rates_from`` (``--rates-from``),
    that folder's profiled records join those the optimizer rates are taken over."""
    records = forecast.calibration_records(str(directory))
    profiles = []
    if rates_from is not None:
        names = {n for n, _ in records}
        profiles = [
            (n, r)
            for n, r in forecast.calibration_records(str(rates_from))
            if n not in names and isinstance((r.get("metrics") or {}).get("breakdown"), dict)
        ]
    pool = nearest_measured.pool_of(records)
    given = forecast.calibration_records(str(source)) if source is not None else None
    given_pool = nearest_measured.pool_of(given) if given is not None else None
    rows = []
    for m in pool:
        step = (m.record.get("metrics") or {}).get("iteration_time_s", {}).get("mean")
        if m.record.get("status") != "ok" or m.world != 1 or not isinstance(step, int | float):
            continue
        m = dataclasses.replace(m, edge=_edge(m))
        if given is not None and given_pool is not None:
            found, why, _ = nearest.nearest_compute(m, given_pool, given + profiles)
        else:
            others = [(n, r) for n, r in records if n != m.name]
            found, why, _ = nearest.nearest_compute(m, pool, others + profiles)
        flat = _flops(m)
        if zero3_floor.applies(
            m.record
        ):  # as the job: ZeRO-3's floor on one GPU added (flopsweep.zero3_floor)
            flat += zero3_floor.floor_s(m.workload.n_params)
            found = zero3_floor.with_floor(found, m.workload.n_params) if found else None
        made = found.compute_s + found.optimizer_s if found else flat
        rows.append(
            {
                "name": m.name,
                "backend": _label(m),
                "measured": float(step),
                "flops": flat,
                "nearest": made,
                "fell_back": found is None,
                "source": found.source if found else why,
            }
        )
    return rows


def _stats(errors: list[float]) -> tuple[str, str, str]:
    size = sorted(abs(e) for e in errors)
    n = len(size)
    median = size[n // 2] if n % 2 else (size[n // 2 - 1] + size[n // 2]) / 2
    rank = 0.9 * (n - 1)  # linear interpolation, as pandas' quantile
    lo = int(rank)
    p90 = size[lo] + (size[min(lo + 1, n - 1)] - size[lo]) * (rank - lo)
    worst = max(errors, key=abs)
    return f"{median:.1%}", f"{p90:.1%}", f"{worst:+.1%}"


def table(rows: list[dict]) -> str:
    """The markdown table of :func:`evaluate`'s rows (module docstring)."""
    head = (
        "| backend | records | flops median | flops p90 | flops worst | nearest median | nearest p90 "
        "| nearest worst | fell back |"
    )
    out = [head, "|---|---|---|---|---|---|---|---|---|"]
    groups = sorted({r["backend"] for r in rows})
    for group in [*groups, "all"]:
        part = [r for r in rows if group in ("all", r["backend"])]
        err = {k: [r[k] / r["measured"] - 1 for r in part] for k in ("flops", "nearest")}
        cells = [*_stats(err["flops"]), *_stats(err["nearest"])]
        name = f"**{group}**" if group == "all" else group
        out.append(f"| {name} | {len(part)} | {' | '.join(cells)} | {sum(r['fell_back'] for r in part)} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    p.add_argument("--list", action="store_true", help="each record's errors and source")
    p.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        help="predict DIR's records from this folder's records only (another GPU kind's)",
    )
    p.add_argument(
        "--rates-from",
        dest="rates_from",
        type=Path,
        default=None,
        help="also take the optimizer rates over this folder's profiled records (scaled by memory bandwidth)",
    )
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)  # the folder's skipped files: not this table's business
    rows = evaluate(args.directory, args.source, args.rates_from)
    if not rows:
        print(f"nearest_loo: no ok one-GPU record under {args.directory}", file=sys.stderr)
        return 1
    if args.list:
        for r in sorted(rows, key=lambda r: r["name"]):
            flops, near = r["flops"] / r["measured"] - 1, r["nearest"] / r["measured"] - 1
            print(
                f"{r['name']}\t{r['backend']}\t{r['measured']:.4g}\t{flops:+.1%}\t{near:+.1%}\t{r['source'][:200]}"
            )
        return 0
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
