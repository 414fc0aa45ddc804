"""ZeRO-3's host floor on one GPU: is a one-GPU DeepSpeed ZeRO-3 step its GPU work, the GPU work plus a
floor, or the larger of the two (issue 41, "DeepSpeed's own overheads per stage")?

Usage (CPU; torch only through Hydra's compose for ``--job``; from anywhere)::

    python benchmarks/zero3_floor.py [DIR ...] [--job]

Reads every record under each ``DIR`` (default ``benchmarks/results``) with
:func:`flopsweep.forecast.calibration_records`. For each ``ok`` one-rank ZeRO-3 record (backend
``deepspeed``, ``zero_stage`` 3, CUDA, no offload: :func:`flopsweep.zero3_floor.applies`) the GPU
work ``W`` is the mean step of the ``single`` records of the same set-up
(:func:`flopsweep.predict.calibration_key`: model, kernel, precision, policy, compile, micro batch) on
the same GPU kind (:func:`flopsweep.nearest_measured.gpu_kind`), their median; ``T`` is the ZeRO-3 mean step.
Printed (markdown):

1. per record: GPU, model, blocks, parameter tensors (:func:`flopsweep.zero3_floor.hooked_tensors`),
   micro batch, policy, compile, ``T``, ``W``, ``T/W``, ``T-W``, the fitted floor, and for a profiled
   record (``metrics.breakdown``) the GPU's idle share and seconds (scaled to ``T``);
2. per (GPU, model, compile) group whose ``W`` spans 50 ms or more: the least-squares slope of ``T`` on
   ``W``: a floor that the work hides (``max``) gives ~0 while ``W`` is below it, an added one ~1;
3. leave-one-model-out, per step model (``W`` alone; ``max`` and sum of ``W`` and a floor per parameter
   tensor or per parameter): fitted on the other models' records (every GPU), the error on the left-out
   model's, median, p90 and worst, and per model; the constant fitted on all;
4. ``W + c P`` fitted per GPU kind, per compile and per policy, each group predicted from the others' ``c``;
5. the prediction of every such record (:func:`flopsweep.predict_record.predict_record`, ``analysis
   --predict``) from the others less its own set-up, without the floor (``PER_PARAMETER_S`` 0 for the
   call) and with it, beside the records' own before-run predictions;
6. with ``--job``: the job's prediction (:func:`flopsweep.forecast.prediction` from the shipped records,
   each record's ``run.overrides`` composed by Hydra and placed on its GPU as ``plan=true`` places it),
   without and with the floor, over all and over the session 27/28 grids.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from flopsweep import forecast, identity, nearest_measured, zero3_floor  # noqa: E402 - after the path
from flopsweep import predict as pr  # noqa: E402
from flopsweep.record import value_at  # noqa: E402
from flopsweep.safe_read import read_json  # noqa: E402


def _policy(record: dict) -> str:
    value = value_at(record, ("config", "activation_checkpointing"))
    if isinstance(value, dict):
        return str(value.get("name"))
    return {True: "full", False: "none"}.get(value, str(value))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rows(directories: list[Path]) -> list[dict]:
    """One row per ok one-rank ZeRO-3 record of ``directories`` (each record once)."""
    records: dict[str, dict] = {}
    for d in directories:
        for name, r in forecast.calibration_records(str(d)):
            records.setdefault(name, r)
    singles: dict[tuple, list[float]] = defaultdict(list)
    for r in records.values():
        if r.get("status") == "ok" and value_at(r, ("config", "backend", "name")) == "single":
            kind = nearest_measured.gpu_kind(value_at(r, ("system", "device_name")))
            singles[(kind, pr.calibration_key(r))].append(
                value_at(r, ("metrics", "iteration_time_s", "mean"))
            )
    out = []
    for name, r in sorted(records.items()):
        if not zero3_floor.applies(r) or r.get("status") != "ok":
            continue
        kind = nearest_measured.gpu_kind(value_at(r, ("system", "device_name")))
        w = singles.get((kind, pr.calibration_key(r)))
        b = value_at(r, ("metrics", "breakdown"))
        idle = b["idle_s"] / b["step_s"] if isinstance(b, dict) and (b.get("step_s") or 0) > 0 else None
        step = value_at(r, ("metrics", "iteration_time_s", "mean"))
        out.append(
            {
                "name": name,
                "gpu": kind,
                "model": value_at(r, ("config", "model", "name")),
                "blocks": value_at(r, ("config", "model", "n_layer")),
                "tensors": zero3_floor.hooked_tensors(value_at(r, ("config", "model")) or {}),
                "params": value_at(r, ("model", "n_params")),
                "mb": value_at(r, ("config", "batch", "micro_batch_size")),
                "policy": _policy(r),
                "compile": bool(value_at(r, ("config", "compile"))),
                "T": step,
                "W": _median(w) if w else None,
                "idle": idle,
            }
        )
    return out


def _setup(record: dict) -> str | None:
    """The record's set-up (:func:`flopsweep.identity.setup_key`), None where it cannot be read."""
    try:
        return identity.setup_key(record)
    except Exception:  # noqa: BLE001 - an unknown schema: a set-up of its own
        return None


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def table(found: list[dict]) -> str:
    lines = [
        "| GPU | model | blocks | tensors | mb | policy | compile | T s | W s | T/W | T-W s | floor s | idle "
        "| idle s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in found:
        ratio = x["T"] / x["W"] if x["W"] else None
        gap = x["T"] - x["W"] if x["W"] else None
        lines.append(
            f"| {x['gpu']} | {x['model']} | {x['blocks']} | {x['tensors']} | {x['mb']} | {x['policy']} | "
            f"{'yes' if x['compile'] else 'no'} | {x['T']:.3f} | {_fmt(x['W'])} | {_fmt(ratio, '.2f')} | "
            f"{_fmt(gap)} | {_fmt(x['params'] and zero3_floor.floor_s(x['params']))} | "
            f"{_fmt(x['idle'], '.0%')} | {_fmt(x['idle'] and x['idle'] * x['T'])} |"
        )
    return "\n".join(lines)


def slopes(found: list[dict]) -> str:
    """Per (GPU, model, compile) group with two or more distinct ``W``: the least-squares slope of
    ``T`` on ``W``."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for x in found:
        if x["W"]:
            groups[(x["gpu"], x["model"], x["compile"])].append(x)
    lines = [
        "| GPU | model | compile | records | W range s | T range s | slope dT/dW |",
        "|---|---|---|---|---|---|---|",
    ]
    for (gpu, model, comp), xs in sorted(groups.items(), key=str):
        ws = [x["W"] for x in xs]
        if len(xs) < 2 or max(ws) - min(ws) < 0.05:
            continue
        ts = [x["T"] for x in xs]
        mw, mt = sum(ws) / len(ws), sum(ts) / len(ts)
        slope = sum((w - mw) * (t - mt) for w, t in zip(ws, ts, strict=True)) / sum((w - mw) ** 2 for w in ws)
        lines.append(
            f"| {gpu} | {model} | {'yes' if comp else 'no'} | {len(xs)} | {min(ws):.3f}-{max(ws):.3f} | "
            f"{min(ts):.3f}-{max(ts):.3f} | {slope:.2f} |"
        )
    return "\n".join(lines)


def _errors(errors: list[float]) -> str:
    if not errors:
        return "— | — | —"
    worst = max(errors, key=abs)
    absolute = [abs(e) for e in errors]
    return f"{_median(absolute):.1%} | {_quantile(absolute, 0.9):.1%} | {worst:+.1%}"


def _grid_fit(pts: list[tuple[float, float, float]], shape: Callable) -> float | None:
    """The ``c`` of ``shape(W, c, n)`` with the least sum of squared relative errors over ``(T, W, n)``,
    on a log grid (2% steps from 1e-14)."""
    if not pts:
        return None
    grid = [1e-14 * 1.02**i for i in range(2400)]
    return min(grid, key=lambda c: sum((shape(w, c, n) / t - 1) ** 2 for t, w, n in pts))


CANDIDATES: dict[str, tuple[str | None, Callable | None]] = {
    "W (no floor)": (None, None),
    "max(W, a x tensors)": ("tensors", lambda w, c, n: max(w, c * n)),
    "W + a x tensors": ("tensors", lambda w, c, n: w + c * n),
    "max(W, c x P)": ("params", lambda w, c, n: max(w, c * n)),
    "W + c x P (zero3_floor)": ("params", None),
}
"""The step models tested: ``W`` the single step, ``tensors`` :func:`flopsweep.zero3_floor.hooked_tensors`,
``P`` the model's parameters; the last fitted by :func:`flopsweep.zero3_floor.fit` (closed form)."""


def _fit(shape: Callable | None, pts: list[tuple[float, float, float]]) -> float | None:
    return zero3_floor.fit(pts) if shape is None else _grid_fit(pts, shape)


def _predict(shape: Callable | None, w: float, c: float, n: float) -> float:
    return w + c * n if shape is None else shape(w, c, n)


def leave_one_model_out(found: list[dict]) -> str:
    """Per candidate step model: fitted on every record with a ``W`` but the left-out model's (all its
    records, every GPU), its error on the left-out model's records; and fitted on all (the constant)."""
    usable = [x for x in found if x["W"] and x["tensors"] and x["params"]]
    models = len({x["model"] for x in usable})
    out = [
        f"Leave-one-model-out over {len(usable)} records with a W ({models} models):",
        "",
        "| step model | fitted on all | median abs. error | p90 abs. error | worst | per model (median) |",
        "|---|---|---|---|---|---|",
    ]
    for label, (key, shape) in CANDIDATES.items():
        errs, per = [], defaultdict(list)
        for x in usable:
            if key is None:
                e = x["W"] / x["T"] - 1
            else:
                c = _fit(shape, [(y["T"], y["W"], y[key]) for y in usable if y["model"] != x["model"]])
                e = _predict(shape, x["W"], c, x[key]) / x["T"] - 1
            errs.append(e)
            per[x["model"]].append(e)
        c_all = _fit(shape, [(y["T"], y["W"], y[key]) for y in usable]) if key else None
        unit = "ms per tensor" if key == "tensors" else "ps per parameter"
        said = "—" if c_all is None else f"{c_all * (1e3 if key == 'tensors' else 1e12):.3g} {unit}"
        per_model = ", ".join(f"{m} {_median(es):+.0%}" for m, es in sorted(per.items()))
        out.append(f"| {label} | {said} | {_errors(errs)} | {per_model} |")
    return "\n".join(out)


def per_group(found: list[dict]) -> str:
    """``c`` of ``W + c P`` fitted per GPU kind, per compile and per checkpointing policy, and each group
    predicted from the others' ``c`` (is the floor the host's? the compiler's? the checkpointing
    policy's? docs/prediction-zero3.md)."""
    usable = [x for x in found if x["W"] and x["params"]]
    lines = [
        "| records | n | c ps per parameter | the others' c | median abs. error | p90 abs. error | worst |",
        "|---|---|---|---|---|---|---|",
    ]
    keys = [("gpu", g) for g in sorted({x["gpu"] for x in usable})] + [("compile", c) for c in (False, True)]
    keys += [("policy", p) for p in sorted({x["policy"] for x in usable})]
    for field, value in keys:
        mine = [x for x in usable if x[field] == value]
        rest = [x for x in usable if x[field] != value]
        c_mine = zero3_floor.fit([(x["T"], x["W"], x["params"]) for x in mine])
        c_rest = zero3_floor.fit([(x["T"], x["W"], x["params"]) for x in rest])
        errs = [(x["W"] + c_rest * x["params"]) / x["T"] - 1 for x in mine] if c_rest else []
        lines.append(
            f"| {field}={value} | {len(mine)} | {_fmt(c_mine and c_mine * 1e12, '.3g')} | "
            f"{_fmt(c_rest and c_rest * 1e12, '.3g')} | {_errors(errs)} |"
        )
    return "\n".join(lines)


def predictions(directories: list[Path]) -> str:
    """``python -m analysis --predict``'s prediction (:func:`flopsweep.predict_record.predict_record`) of
    every ok one-GPU ZeRO-3 record from the others less its own set-up (its repeats), without the floor
    (``PER_PARAMETER_S`` 0 for the call) and with it; and the records' own before-run predictions
    (``metrics.predicted``, made by the job from the records shipped then)."""
    from flopsweep.predict_record import predict_record

    records: dict[str, dict] = {}
    for d in directories:
        for name, r in forecast.calibration_records(str(d)):
            records.setdefault(name, r)
    targets = [
        (n, r) for n, r in sorted(records.items()) if zero3_floor.applies(r) and r.get("status") == "ok"
    ]
    errs: dict[str, list[float]] = defaultdict(list)
    kept = zero3_floor.PER_PARAMETER_S
    for name, r in targets:
        setup = _setup(r)
        others = [(n, o) for n, o in records.items() if n != name and (setup is None or _setup(o) != setup)]
        measured = value_at(r, ("metrics", "iteration_time_s", "mean"))
        before = value_at(r, ("metrics", "predicted", "iteration_time_s"))
        if before:
            errs["recorded before the run (the job)"].append(before / measured - 1)
        for label, c in (
            ("analysis, own set-up left out, no floor", 0.0),
            ("analysis, own set-up left out, floor", kept),
        ):
            zero3_floor.PER_PARAMETER_S = c
            try:
                got = predict_record(name, r, others).get("iteration_time_s")
            finally:
                zero3_floor.PER_PARAMETER_S = kept
            if got:
                errs[label].append(got / measured - 1)
    lines = [
        f"Predicted step of the {len(targets)} ok one-GPU ZeRO-3 records:",
        "",
        "| prediction | records | median abs. error | p90 abs. error | worst |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {label} | {len(es)} | {_errors(es)} |" for label, es in errs.items()]
    return "\n".join(lines)


def _composed(overrides: list[str]) -> Any:
    """The validated plan (``cfg``, ``layout``) of ``overrides``, placed on ``plan_gpu`` as ``plan=true``."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from flopsweep.checkpointing import normalize_overrides
    from flopsweep.job.placement import plan_environment
    from flopsweep.plan import Environment, resolve, validate
    from flopsweep.store import register_configs

    register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "floor", replace=True)
    OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: None, replace=True)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        composed = compose(config_name="config", overrides=normalize_overrides(overrides))
    cfg, env, _ = plan_environment(validate(OmegaConf.to_object(composed)), Environment.detect())
    return resolve(cfg, env)


def job_predictions(directories: list[Path]) -> str:
    """The job's own prediction (:func:`flopsweep.forecast.prediction`, as ``flopsweep.job.records`` calls
    it: the shipped records, the record's GPU and measured GEMM rate) of every ok one-GPU ZeRO-3 record
    whose ``run.overrides`` compose, its own set-up left out of the shipped records, without the floor
    and with it."""
    records: dict[str, dict] = {}
    for d in directories:
        for path in sorted(Path(d).rglob("metrics.json")):
            r = read_json(path)
            if isinstance(r, dict):
                records.setdefault(str(path), r)
    shipped = forecast.shipped_records()
    errs: dict[str, list[float]] = defaultdict(list)
    grid: dict[str, list[float]] = defaultdict(list)
    skipped = 0
    kept = zero3_floor.PER_PARAMETER_S
    for name, r in sorted(records.items()):
        overrides = value_at(r, ("run", "overrides"))
        if not zero3_floor.applies(r) or r.get("status") != "ok" or not isinstance(overrides, list):
            continue
        try:
            gpu = (
                "H100"
                if nearest_measured.gpu_kind(value_at(r, ("system", "device_name"))) == "H100 SXM"
                else "H200"
            )
            kept_overrides = [o for o in overrides if not o.startswith(("resume=", "hydra."))]
            p = _composed([*kept_overrides, "plan=true", f"plan_gpu={gpu}"])  # placed on the GPU, not here
        except Exception:  # noqa: BLE001 - an old record's overrides that no longer compose
            skipped += 1
            continue
        setup = _setup(r)
        pool = [(n, o) for n, o in shipped if setup is None or _setup(o) != setup]
        measured = value_at(r, ("metrics", "iteration_time_s", "mean"))
        for label, c in (("job, no floor", 0.0), ("job, floor", kept)):
            zero3_floor.PER_PARAMETER_S = c
            try:
                made = forecast.prediction(
                    p.cfg,
                    p.layout,
                    pool,
                    gpus_per_node=1,
                    device_name=value_at(r, ("system", "device_name")),
                    gemm_tflops=value_at(r, ("metrics", "measured_matmul_tflops")),
                )
            finally:
                zero3_floor.PER_PARAMETER_S = kept
            if made.get("iteration_time_s"):
                e = made["iteration_time_s"] / measured - 1
                errs[label].append(e)
                if "/grid" in name:
                    grid[label].append(e)
    lines = [
        f"The job's prediction of the ok one-GPU ZeRO-3 records whose overrides compose ({skipped} did not),"
        " own set-up left out of the shipped records:",
        "",
        "| prediction | records | median abs. error | p90 abs. error | worst |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {label} | {len(es)} | {_errors(es)} |" for label, es in errs.items()]
    lines += [
        f"| {label}, the grids (session27/28) | {len(es)} | {_errors(es)} |" for label, es in grid.items()
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", type=Path, default=[HERE / "results"])
    parser.add_argument(
        "--job",
        action="store_true",
        help="also the job's prediction (Hydra composes each record's overrides)",
    )
    args = parser.parse_args(argv)
    found = rows(args.dirs)
    parts = [
        table(found),
        slopes(found),
        leave_one_model_out(found),
        per_group(found),
        predictions(args.dirs),
    ]
    if args.job:
        parts.append(job_predictions(args.dirs))
    for part in parts:
        print(part)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
