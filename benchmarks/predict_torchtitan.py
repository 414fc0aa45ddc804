"""The step-time model on paper and on the committed records (``flopsweep.predict``; CPU, no torch).

Usage (from the repository root or anywhere)::

    python benchmarks/predict_torchtitan.py torchtitan   # torchtitan's 8- and 128-GPU Llama 3.1 8B rows
    python benchmarks/predict_torchtitan.py two-gpu      # every committed 2-GPU record from its 1-GPU one

``torchtitan``: torchtitan's published Llama 3.1 8B FSDP rows (``benchmarks/llama3_h100_202412_torchtitan.md``
in pytorch/torchtitan, tables 1 and 3: H100 at 500 W, 8 GPUs a node on NVLink, 400 Gb/s per GPU
between nodes, local batch 2 x 8192 tokens, selective activation checkpointing) predicted from our
one-GPU H200 Llama 3.1 8B records, with every assumption in :data:`ASSUMPTIONS`, printed under the
table. A sanity check, not a target.

``two-gpu``: each ok two-GPU gpt-1.3b and Llama record under ``benchmarks/results/h200x2`` predicted
from the one-GPU record of the same set-up (model, kernel, precision, checkpointing, compile, micro
batch, backend and its knobs; ``results/h200`` or ``h200x2``), the overlap and bus bandwidth fitted
per backend on the profiled gpt-1.3b records only and checked on the Llama ones, median and worst
absolute error per backend; a pair without such a one-GPU record is uncalibrated, listed apart with
what differs, and not counted.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from flopsweep import predict as pr  # noqa: E402
from flopsweep.safe_read import read_json  # noqa: E402
from flopsweep.text import OneLineParser  # noqa: E402

RESULTS = HERE / "results" / "h200"
CALIBRATIONS = {
    "compiled": RESULTS / "energy" / "llama3.1-8b" / "0" / "metrics.json",
    "eager": RESULTS / "peer-torchtitan" / "flopsweep" / "8b" / "8b_eager_fullac_bs2" / "0" / "metrics.json",
}
"""Our one-GPU H200 Llama 3.1 8B records (bf16, SDPA, micro batch 2 x 2048, full checkpointing)."""


@dataclass(frozen=True, kw_only=True)
class Row:
    gpus: int
    compiled: bool
    published_tps: float
    table: str


PUBLISHED = (
    Row(gpus=8, compiled=False, published_tps=5762, table="table 1, FSDP"),
    Row(gpus=8, compiled=True, published_tps=6667, table="table 1, FSDP + torch.compile"),
    Row(gpus=128, compiled=False, published_tps=5605, table="table 3, FSDP"),
    Row(gpus=128, compiled=True, published_tps=6514, table="table 3, FSDP + torch.compile"),
)
"""torchtitan's rows (TPS/GPU), from pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md."""

SEQ = 8192
MICRO = 2
GPUS_PER_NODE = 8
H100_SCALE = 835.0 / 989.4
"""H100 (HBM2e, 500 W) compute over our H200 (700 W): torchtitan says its peak lies between the SXM
(989.4 dense bf16) and the NVL (835); we take the NVL end, as the 500 W limit lowers clocks."""
INTRA_GBPS = 350.0
"""NVLink bus bandwidth in an H100 node for all-gather and reduce-scatter at 100+ MB (nccl-tests on
H100 SXM reach about 350-370 GB/s)."""
INTER_GBPS = 40.0
"""Across nodes: 400 Gb/s = 50 GB/s per GPU line rate; a ring reaches about 80% of it."""
HBM_BYTES_PER_S = 2.4e12
"""torchtitan's H100s: 2.4 TB/s HBM2e (AdamW is memory-bound)."""
ADAMW_BYTES_PER_PARAM = 28
"""Fused AdamW reads parameter, gradient, two moments (4 x 4 bytes) and writes three (3 x 4)."""
H200_HBM_BYTES_PER_S = 4.8e12

ASSUMPTIONS = (
    f"Compute: our one-GPU H200 record's achieved hardware FLOP rate (700 W, seq 2048, micro batch 2, "
    f"full checkpointing) applied to torchtitan's FLOPs per rank (seq {SEQ}, local batch {MICRO}): the "
    "attention term of the FLOPs grows with the sequence, the rate is assumed not to.",
    "Checkpointing: torchtitan's selective (op) checkpointing recomputes less than our full one: the "
    "prediction is given at full recompute (upper time) and at none (lower time); the truth is between.",
    f"GPU: H100 at 500 W computes at {H100_SCALE:.3f} x our H200's rate (the NVL/SXM datasheet ratio; "
    "torchtitan places its peak between them).",
    f"Optimizer: fused AdamW is memory-bound, {ADAMW_BYTES_PER_PARAM} bytes per parameter at 80% of the "
    f"HBM bandwidth ({H200_HBM_BYTES_PER_S / 1e12:.1f} TB/s H200 for the calibration, "
    f"{HBM_BYTES_PER_S / 1e12:.1f} TB/s H100 HBM2e), sharded over the FSDP ranks; our record has no profile.",
    f"Communication (FSDP2): bf16 parameters all-gathered forward and backward, fp32 gradients "
    f"reduce-scattered, at nccl-tests bus bandwidths of {INTRA_GBPS:g} GB/s in a node and {INTER_GBPS:g} "
    "GB/s per GPU across nodes; per-call latency ignored; overlap 0.8 (the model's assumed FSDP default: "
    "no profiled multi-GPU record exists to calibrate it).",
    "Data loading (torchtitan's numbers include its tokenizer and loader) is not modelled.",
)


def _per_token(record: dict) -> tuple[float, float, float]:
    """``(matmul FLOPs, attention FLOPs per sequence token, block-forward matmul FLOPs)`` per token
    of a Llama record, from its model and hardware FLOPs (flopsweep's convention:
    ``6 P_matmul + 12 l h s`` per token; full recompute adds ``2 P_block + 4 l h s``)."""
    m, metrics = record["model"], record["metrics"]
    tokens = metrics["tokens_per_step"]
    lh = m["n_layer"] * m["n_embd"]
    s = m["seq_len"]
    matmul = (metrics["model_flops_per_iteration"] / tokens - 12 * lh * s) / 6
    recompute = (metrics["hardware_flops_per_iteration"] - metrics["model_flops_per_iteration"]) / tokens
    return matmul, lh, (recompute - 4 * lh * s) / 2


def torchtitan_rows() -> list[dict]:
    """One dict per published row: the published TPS/GPU, the prediction at full and at no recompute."""
    out = []
    for row in PUBLISHED:
        cal = read_json(CALIBRATIONS["compiled" if row.compiled else "eager"])
        matmul, lh, block = _per_token(cal)
        m = cal["model"]
        cal_step = cal["metrics"]["iteration_time_s"]["mean"]
        cal_opt = m["n_params"] * ADAMW_BYTES_PER_PARAM / (0.8 * H200_HBM_BYTES_PER_S)
        rate = cal["metrics"]["hardware_flops_per_iteration"] / (cal_step - cal_opt)  # FLOP/s achieved
        tokens_rank = MICRO * SEQ
        model_tok = 6 * matmul + 12 * lh * SEQ
        preds = {}
        for label, hw_tok in (("full", model_tok + 2 * block + 4 * lh * SEQ), ("none", model_tok)):
            w = pr.Workload(
                backend="fsdp",
                precision="bf16",
                n_params=m["n_params"],
                n_layer=m["n_layer"],
                n_embd=m["n_embd"],
                seq_len=SEQ,
                micro_batch_size=MICRO,
                degrees={"dp_shard": row.gpus},
                model_flops=model_tok * tokens_rank * row.gpus,
                hardware_flops=hw_tok * tokens_rank * row.gpus,
            )
            opt = m["n_params"] / row.gpus * ADAMW_BYTES_PER_PARAM / (0.8 * HBM_BYTES_PER_S)
            compute = pr.Compute(
                compute_s=hw_tok * tokens_rank / rate / H100_SCALE, optimizer_s=opt, source="see assumptions"
            )
            link = pr.Link(
                intra=dict.fromkeys(pr.COLLECTIVES, INTRA_GBPS),
                inter=dict.fromkeys(pr.COLLECTIVES, INTER_GBPS),
                source="assumed",
            )
            preds[label] = pr.predict(
                w, compute, link, gpus_per_node=GPUS_PER_NODE, overlap=(0.8, "assumed"), peak_tflops=989.4
            )
        out.append({"row": row, "calibration": cal, "preds": preds})
    return out


def torchtitan_table() -> str:
    lines = [
        "| torchtitan row | GPUs | published TPS/GPU | predicted, full recompute | predicted, no recompute "
        "| published / predicted range | exposed comm (s) | step (s), full / none |",
        "|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in torchtitan_rows():
        row, full, none = r["row"], r["preds"]["full"], r["preds"]["none"]
        lo, hi = full.tokens_per_s_per_device, none.tokens_per_s_per_device
        lines.append(
            f"| {row.table} | {row.gpus} | {row.published_tps:,.0f} | {lo:,.0f} | {hi:,.0f} | "
            f"{row.published_tps / hi:.2f} - {row.published_tps / lo:.2f} | {full.exposed_comm_s:.3f} | "
            f"{full.iteration_time_s:.3f} / {none.iteration_time_s:.3f} |"
        )
    cals = {k: str(v.relative_to(REPO)) for k, v in CALIBRATIONS.items()}
    lines += [
        "",
        f"Calibration records: compiled rows `{cals['compiled']}`, eager rows `{cals['eager']}`.",
        "",
    ]
    lines += ["Assumptions:", ""] + [f"- {a}" for a in ASSUMPTIONS]
    return "\n".join(lines)


def _records() -> list[tuple[str, dict]]:
    """Every readable record under ``results/h200`` and ``results/h200x2``, named by its path there."""
    out = []
    for root in (RESULTS, RESULTS.parent / "h200x2"):
        for path in sorted(root.rglob("metrics.json")):
            if path.is_symlink():
                continue
            try:
                out.append((str(path.relative_to(RESULTS.parent)), read_json(path)))
            except (OSError, ValueError):
                continue
    return out


def _world(record: dict) -> int | None:
    return (record.get("system") or {}).get("world_size")


def fitted(backend: str, gpt: list) -> dict:
    """The bus bandwidth and overlap of ``backend`` (:func:`flopsweep.predict.backend_of`) fitted on
    the profiled two-GPU gpt-1.3b records of that backend (``gpt``), each ``(value, source)`` or
    None; the backend's ZeRO-less name (``deepspeed``) when the stage has none."""
    plain = backend.split("-")[0]
    return {
        "busbw": pr.calibrated_busbw(gpt, backend=backend) or pr.calibrated_busbw(gpt),
        "overlap": pr.overlap_from_records(backend, gpt) or pr.overlap_from_records(plain, gpt),
    }


def predict_two_gpu(record: dict, ones: list, gpt: list, records: list) -> dict:
    """One two-GPU record from the one-GPU record of the same set-up (``ones``: same model, kernel,
    precision, checkpointing, compile, micro batch, backend and knobs), with the bus bandwidth and
    overlap fitted on the profiled two-GPU gpt-1.3b records of its backend (``gpt``; the run's own
    probe, ``system.interconnect``, for the bandwidth when it has one) and the
    optimizer's rate from every record that separates it (``records``). Without such a one-GPU
    record the pair is uncalibrated: predicted from the nearest one (``borrowed``) and what differs
    named, never counted."""
    w = pr.workload_from_record(record)
    backend = pr.backend_of(record)
    kwargs = dict(
        backend_config=record["config"]["backend"],
        hostname=record["system"].get("hostname"),
        started_at=record["run"].get("started_at"),
    )
    key = pr.calibration_key(record)
    picked = pr.pick_calibration(key, 2, w.backend, ones, same_backend=True, **kwargs)
    borrowed = picked is None
    if borrowed:
        picked = pr.pick_calibration(key, 2, w.backend, ones, micro_batch=False, **kwargs)
    if picked is None:
        return {"iteration_time_s": None, "source": "no one-GPU record of the model", "borrowed": True}
    fit = fitted(backend, gpt)
    family = pr.optimizer_family(picked[1])
    rate = pr.optimizer_rate(records, family) if family else None  # records: the check set left out
    link = pr.link_from_probe(record["system"].get("interconnect"), source="the run's probe")
    if not link.intra:  # records before the probe: the bandwidth the gpt-1.3b profiles imply
        link = pr.Link(intra=dict.fromkeys(pr.COLLECTIVES, fit["busbw"][0]), source=fit["busbw"][1])
    out = pr.predict(
        w,
        pr.calibration_compute(w, *picked, rate=rate),
        link,
        gpus_per_node=2,
        overlap=fit["overlap"],
        peak_tflops=record["metrics"].get("peak_tflops"),
    ).as_dict()
    differs = pr.calibration_differences(record, picked[1])
    out.update(calibration=picked[0], borrowed=borrowed, differs=differs)
    return out


def _records_of_two_gpu() -> tuple[list, list, list, list]:
    """``(every record but the check set's, the one-GPU ok records, the ok two-GPU gpt-1.3b records
    (the fit set), the ok two-GPU gpt-1.3b and Llama records to predict)``."""
    records = _records()
    ok = [(n, r) for n, r in records if r.get("status") == "ok"]
    ones = [(n, r) for n, r in ok if _world(r) == 1]
    two = [(n, r) for n, r in ok if _world(r) == 2]
    gpt = [(n, r) for n, r in two if r["model"].get("name") == "gpt-1.3b"]
    wanted = [(n, r) for n, r in two if str(r["model"].get("name", "")).startswith(("gpt-1.3b", "llama"))]
    checks = {n for n, r in wanted if r["model"].get("name") != "gpt-1.3b"}
    return [(n, r) for n, r in records if n not in checks], ones, gpt, wanted


def two_gpu_table() -> str:
    """Each ok two-GPU gpt-1.3b or Llama record from its one-GPU record, bandwidth and overlap fitted
    per backend on the gpt-1.3b profiles only; the error per backend, fit set and check set apart;
    the uncalibrated pairs apart, not counted."""
    records, ones, gpt, wanted = _records_of_two_gpu()
    if not wanted:
        return f"No committed two-GPU record ({len(ones)} one-GPU records): only one-GPU machines were lent."
    errors: dict[tuple[str, str], list[float]] = {}
    head = [
        "| record | backend | measured (s) | predicted (s) | error | optimizer (s) | exposed comm (s) "
        "| calibration (one GPU) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    lines, loose = (
        list(head),
        [
            "| record | backend | measured (s) | predicted (s) | error | borrowed record | what differs |",
            "|---|---|---:|---:|---:|---|---|",
        ],
    )
    for name, r in wanted:
        pred = predict_two_gpu(r, ones, gpt, records)
        measured = r["metrics"]["iteration_time_s"]["mean"]
        backend = pr.backend_of(r)
        if pred["iteration_time_s"] is None:
            loose.append(f"| {name} | {backend} | {measured:.4f} | | | | {pred['source']} |")
            continue
        err = (pred["iteration_time_s"] - measured) / measured
        if pred["borrowed"]:
            loose.append(
                f"| {name} | {backend} | {measured:.4f} | {pred['iteration_time_s']:.4f} | {err:+.1%} | "
                f"{pred['calibration']} | {'; '.join(pred['differs'])} |"
            )
            continue
        group = "gpt-1.3b (fit set)" if r["model"]["name"] == "gpt-1.3b" else "Llama (check set)"
        errors.setdefault((group, backend), []).append(abs(err))
        lines.append(
            f"| {name} | {backend} | {measured:.4f} | {pred['iteration_time_s']:.4f} | {err:+.1%} | "
            f"{pred['optimizer_s']:.4f} | {pred['exposed_comm_s']:.4f} | {pred['calibration']} |"
        )
    lines += ["", "| records | backend | n | median abs error | worst |", "|---|---|---:|---:|---:|"]
    lines += [
        f"| {g} | {b} | {len(e)} | {statistics.median(e):.1%} | {max(e):.1%} |"
        for (g, b), e in sorted(errors.items())
    ]
    every = [v for e in errors.values() for v in e]
    summary = f"median {statistics.median(every):.1%}, worst {max(every):.1%}"
    lines += ["", f"All {len(every)} calibrated: {summary}."]
    lines += ["", fit_table(gpt, records)]
    lines += ["", f"Uncalibrated ({len(loose) - 2}: no one-GPU record of the same set-up; not counted):", ""]
    return "\n".join(lines + loose)


def fit_table(gpt: list, records: list) -> str:
    """Per backend: the overlap and bus bandwidth fitted on the gpt-1.3b two-GPU profiles, and the
    optimizer's rate per optimizer family."""
    lines = ["| backend | fitted overlap | fitted busbw (GB/s) | fitted on |", "|---|---:|---:|---|"]
    for backend in sorted({pr.backend_of(r) for _, r in gpt}):
        fit = fitted(backend, gpt)
        lines.append(f"| {backend} | {fit['overlap'][0]:.3f} | {fit['busbw'][0]:.1f} | {fit['overlap'][1]} |")
    lines += ["", "| optimizer | seconds per parameter a rank updates | from |", "|---|---:|---|"]
    for family in ("torch", "deepspeed-fused", "deepspeed-torch"):
        rate = pr.optimizer_rate(records, family)
        lines.append(f"| {family} | {rate[0]:.3g} | {rate[1]} |" if rate else f"| {family} | | no profile |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("torchtitan", "two-gpu"))
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = p.parse_args(argv)
    if args.format == "json" and args.what == "torchtitan":
        rows = [
            {"table": r["row"].table, "gpus": r["row"].gpus, "published_tps": r["row"].published_tps}
            | {f"predicted_{k}": v.as_dict() for k, v in r["preds"].items()}
            for r in torchtitan_rows()
        ]
        print(json.dumps(rows, indent=1))
        return 0
    print(torchtitan_table() if args.what == "torchtitan" else two_gpu_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
