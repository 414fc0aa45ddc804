"""Every committed probe-sourced record's prediction recomputed from its stored pieces with this
checkout's step model, against its measured step (issue 41; reads records only, starts nothing):
``python benchmarks/probe_recompute.py [ROOT ...] [--rows]`` (default ``benchmarks/results``).

A record counts when it is ``ok``, its ``metrics.predicted.compute_source`` is ``probe`` and it ran
on one rank (every committed one does; the link and overlap of several are not stored pieces). Its
prediction is rebuilt as the job builds it (:func:`flopsweep.forecast.prediction`'s probe path):
:func:`flopsweep.compute_time.compute_from_probe` over ``metrics.predicted.probe``, DeepSpeed ZeRO-3's
one-GPU floor (:mod:`flopsweep.zero3_floor`), FSDP2 ``cpu_offload``'s state copies
(:mod:`flopsweep.state_copies`), and :func:`flopsweep.steptime.predict`. A probe recorded
before the pieces named their parameter counts and the optimizer's device (method 3) gets them from
the record (:func:`probe_pieces`). Printed: per backend (ZeRO stage apart) the number of records and
the median, p90 (nearest rank) and worst error of the stored prediction and of the recomputed one, error =
(predicted - measured) / measured mean step, and the recomputed one's against the median step (a step that
stalled once moves the mean); ``--rows`` adds one line per record.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from flopsweep import compute_time, state_copies, steptime, zero3_floor
from flopsweep.backend_specs import backend_spec
from flopsweep.predict import workload_from_record


def probe_pieces(record: dict[str, Any]) -> dict[str, Any]:
    """``metrics.predicted.probe`` with ``optimizer_device``, ``block_params`` and ``head_params``
    filled from the record where the probe predates them: the host where the backend steps on it
    (FSDP2's ``cpu_offload``, ZeRO-Offload), and the embedding and head's parameters (``vocab x
    n_embd``, twice untied, plus the final norm's ``n_embd``) with each block's the rest over
    ``n_layer`` (an ``hf`` model of several layer kinds gets none: its mean block is not this)."""
    pieces = dict(record["metrics"]["predicted"]["probe"])
    backend = record["config"]["backend"]
    spec = backend_spec(backend.get("name"))
    host = bool(spec and spec.offload(backend).steps_on_host)
    pieces.setdefault("optimizer_device", "cpu" if host else "cuda")
    model = record.get("model") or {}
    vocab, width, layers, total = (model.get(k) for k in ("vocab_size", "n_embd", "n_layer", "n_params"))
    kinds = pieces.get("layers_per_kind") or [layers]
    if "head_params" not in pieces and all(isinstance(v, int) for v in (vocab, width, layers, total)):
        if len(kinds) == 1:
            head = vocab * width * (1 if model.get("tie_embeddings", True) else 2) + width
            pieces["head_params"], pieces["block_params"] = head, (total - head) / layers
    return pieces


def recomputed(record: dict[str, Any]) -> float:
    """The record's step (s) predicted from its stored probe pieces by this checkout's model."""
    w = workload_from_record(record)
    compute = compute_time.compute_from_probe(w, compute_time.ProbeTimes.of(probe_pieces(record)))
    if zero3_floor.applies(record):
        compute = zero3_floor.with_floor(compute, w.n_params)
    device_name = (record.get("system") or {}).get("device_name")
    compute = state_copies.with_state_copies(record["config"]["backend"], w, compute, device_name)
    return steptime.predict(w, compute, steptime.Link(), gpus_per_node=1).iteration_time_s


def rows(roots: list[Path]) -> list[dict[str, Any]]:
    out = []
    for root in roots:
        for path in sorted(root.rglob("metrics.json")):
            r = json.loads(path.read_text())
            p = (r.get("metrics") or {}).get("predicted") or {}
            if r.get("status") != "ok" or p.get("compute_source") != "probe":
                continue
            if (r.get("system") or {}).get("world_size") != 1:
                continue
            b = r["config"]["backend"]
            steps = r["metrics"]["iteration_time_s"]
            measured, median = steps["mean"], steps.get("median") or steps["mean"]
            new = recomputed(r)
            out.append(
                {
                    "run": str(path.parent),
                    "backend": b["name"] + (f"-{b.get('zero_stage')}" if b["name"] == "deepspeed" else ""),
                    "measured_s": round(measured, 4),
                    "stored_err": round((p["iteration_time_s"] - measured) / measured, 4),
                    "recomputed_s": round(new, 4),
                    "recomputed_err": round((new - measured) / measured, 4),
                    "median_err": round((new - median) / median, 4),
                }
            )
    return out


def summary(errors: list[float]) -> str:
    """``median / p90 / worst`` of signed errors (median and p90 of their magnitudes), percent."""
    mags = sorted(abs(e) for e in errors)
    p90 = mags[min(len(mags) - 1, round(0.9 * (len(mags) - 1)))]
    worst = max(errors, key=abs)
    return f"{statistics.median(mags):.1%} / {p90:.1%} / {worst:+.1%}"


def main(argv: list[str]) -> None:
    roots = [Path(a) for a in argv if not a.startswith("--")] or [Path("benchmarks/results")]
    found = rows(roots)
    if "--rows" in argv:
        for row in found:
            print(json.dumps(row))
    groups: dict[str, list[dict[str, Any]]] = {"all": found}
    for row in found:
        groups.setdefault(row["backend"], []).append(row)
    print(
        "| backend | records | stored: median / p90 / worst | recomputed: median / p90 / worst "
        "| recomputed, against the median step |"
    )
    print("|---|---|---|---|---|")
    for name, got in sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0])):
        stored = summary([g["stored_err"] for g in got])
        new, robust = (summary([g[k] for g in got]) for k in ("recomputed_err", "median_err"))
        print(f"| {name} | {len(got)} | {stored} | {new} | {robust} |")


if __name__ == "__main__":
    main(sys.argv[1:])
