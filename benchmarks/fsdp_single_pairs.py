"""FSDP2 against ``single`` on one GPU, from the committed records (issue 41, session 39; reads records
only, starts nothing): ``python benchmarks/fsdp_single_pairs.py [ROOT ...] [--rows]`` (default
``benchmarks/results``).

A pair is an ``ok`` one-rank FSDP2 record (no ``cpu_offload``) and the ``ok`` one-rank ``single`` records
of the same set-up: model, kernel, precision, micro batch, grad accumulation, checkpointing, compile (and
its mode and scope), loss chunking, optimizer implementation, GPU and torch. A record is left out when
its steps are unsteady (coefficient of variation over :data:`MAX_CV`) or its allocator retried (steps
that synchronise): both move a step by more than the gap studied. ``gap`` = the FSDP2 record's median
step less the median of its twins' median steps, seconds. The compute probe runs one rank of FSDP2 under
autocast over fp32 weights, as ``single`` runs (:func:`flopsweep.compute_probe.casts_weights`), so the gap
is what the probe's pieces miss for FSDP2 on one GPU.

Printed per GPU and compile setting: the pairs, how many FSDP2 steps are slower, the gap's median
magnitude and range (ms), and three least-squares models of it with their residuals' median magnitude
and worst (ms): a cost per FSDP2 unit (``n_layer``), a cost per parameter (``n_params``), and a cost
per parameter less a saving per token and layer (``micro batch x grad accumulation x seq_len x
n_layer``). ``--rows`` adds one JSON line per pair. docs/prediction-host-optimizer.md reads it.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_CV = 0.05
"""Steps varying more than this (``iteration_time_s.cv``) leave the record out, as ``noisy_steps`` warns."""

Pair = dict[str, Any]


def setup_key(record: dict[str, Any]) -> str:
    """What must match between an FSDP2 record and its ``single`` twin (module docstring)."""
    c, s = record["config"], record.get("system") or {}
    optim = {k: c["optim"].get(k) for k in ("implementation", "in_backward", "overlap_forward")}
    parts = [c["model"], c["attention"], c["precision"], c["batch"]["micro_batch_size"]]
    parts += [c["batch"]["grad_accum"], c["activation_checkpointing"], c["compile"], c.get("compile_mode")]
    parts += [c.get("compile_scope"), c.get("loss"), optim, s.get("device_name"), s.get("torch")]
    return json.dumps(parts, sort_keys=True, default=str)


def usable(record: dict[str, Any]) -> str | None:
    """``single`` or ``fsdp`` for a record that can be paired (module docstring), else None."""
    c, m = record.get("config") or {}, record.get("metrics") or {}
    backend = (c.get("backend") or {}).get("name")
    if record.get("status") != "ok" or (record.get("system") or {}).get("world_size") != 1:
        return None
    if backend not in ("single", "fsdp") or c["backend"].get("cpu_offload"):
        return None
    steps = m.get("iteration_time_s") or {}
    if not steps.get("median") or (steps.get("cv") or 0) > MAX_CV or m.get("cuda_alloc_retries"):
        return None
    return backend


def pairs(roots: list[Path]) -> list[Pair]:
    """One row per FSDP2 record with a ``single`` twin: its set-up, sizes and ``gap_s``."""
    groups: dict[str, dict[str, list[tuple[Path, dict[str, Any]]]]] = {}
    for root in roots:
        for path in sorted(root.rglob("metrics.json")):
            record = json.loads(path.read_text())
            if backend := usable(record):
                groups.setdefault(setup_key(record), {}).setdefault(backend, []).append((path, record))
    out = []
    for group in groups.values():
        twins = [r["metrics"]["iteration_time_s"]["median"] for _, r in group.get("single", [])]
        for path, r in group.get("fsdp", []) if twins else []:
            c, model = r["config"], r.get("model") or r["config"]["model"]
            ac = c["activation_checkpointing"]
            single = statistics.median(twins)
            fsdp = r["metrics"]["iteration_time_s"]["median"]
            batch = c["batch"]["micro_batch_size"] * c["batch"]["grad_accum"]
            out.append(
                {
                    "run": str(path.parent),
                    "gpu": r["system"].get("device_name", ""),
                    "model": model["name"],
                    "checkpointing": ac.get("name") if isinstance(ac, dict) else str(ac),
                    "compile": bool(c["compile"]),
                    "micro_batch": c["batch"]["micro_batch_size"],
                    "n_layer": model["n_layer"],
                    "n_params": model.get("n_params"),
                    "token_layers": batch * model["seq_len"] * model["n_layer"],
                    "singles": len(twins),
                    "single_s": round(single, 4),
                    "fsdp_s": round(fsdp, 4),
                    "gap_s": round(fsdp - single, 5),
                }
            )
    return sorted(out, key=lambda p: (p["gpu"], p["compile"], p["model"], p["micro_batch"], p["run"]))


def fit(rows: list[Pair], terms: list[Callable[[Pair], float]]) -> tuple[list[float], list[float]]:
    """Least squares of ``gap_s`` over one or two ``terms`` (no intercept): ``(coefficients,
    residuals in seconds)``. Raises ZeroDivisionError on a singular system."""
    x = [[t(r) for t in terms] for r in rows]
    y = [r["gap_s"] for r in rows]
    if len(terms) == 1:
        coef = [sum(a[0] * b for a, b in zip(x, y, strict=True)) / sum(a[0] ** 2 for a in x)]
    else:  # the 2 x 2 normal equations
        s11, s12 = sum(a[0] ** 2 for a in x), sum(a[0] * a[1] for a in x)
        s22 = sum(a[1] ** 2 for a in x)
        t1, t2 = (sum(a[i] * b for a, b in zip(x, y, strict=True)) for i in (0, 1))
        det = s11 * s22 - s12**2
        coef = [(t1 * s22 - t2 * s12) / det, (s11 * t2 - s12 * t1) / det]
    residuals = [b - sum(c * v for c, v in zip(coef, a, strict=True)) for a, b in zip(x, y, strict=True)]
    return coef, residuals


def spread(values: list[float]) -> str:
    """``median |v| / worst |v|`` in ms."""
    mags = [abs(v) * 1e3 for v in values]
    return f"{statistics.median(mags):.1f} / {max(mags):.1f}"


def summary(rows: list[Pair]) -> str:
    """One markdown row of the group's gap and its three models (module docstring)."""
    rows = [r for r in rows if r["n_params"]]
    gaps = [r["gap_s"] for r in rows]
    (unit,), unit_res = fit(rows, [lambda r: r["n_layer"]])
    (param,), param_res = fit(rows, [lambda r: r["n_params"]])
    (p2, tok), two_res = fit(rows, [lambda r: r["n_params"], lambda r: -r["token_layers"]])
    slower = sum(g > 0 for g in gaps)
    return (
        f"| {len(rows)} | {slower} | {spread(gaps)} ({min(gaps) * 1e3:+.1f}..{max(gaps) * 1e3:+.1f}) "
        f"| {unit * 1e3:+.3f} ms: {spread(unit_res)} | {param * 1e12:+.2f} ps: {spread(param_res)} "
        f"| {p2 * 1e12:+.2f} ps, {tok * 1e9:+.1f} ns: {spread(two_res)} |"
    )


def main(argv: list[str]) -> None:
    roots = [Path(a) for a in argv if not a.startswith("--")] or [Path("benchmarks/results")]
    found = pairs(roots)
    if "--rows" in argv:
        for row in found:
            print(json.dumps(row))
    print(
        "| GPU | compile | pairs | FSDP2 slower | gap ms: median / worst (range) | per unit: fit: residual "
        "| per parameter | per parameter, less per token-layer |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for gpu in sorted({r["gpu"] for r in found}):
        for compiled in (False, True):
            group = [r for r in found if r["gpu"] == gpu and r["compile"] == compiled]
            if len(group) >= 3:
                print(f"| {gpu} | {compiled} {summary(group)}")


if __name__ == "__main__":
    main(sys.argv[1:])
