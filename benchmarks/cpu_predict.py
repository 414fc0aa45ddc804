"""The step time predicted before a CPU run against the step it measured, as a new user runs them.

Runs real ``python run.py ... device=cpu`` jobs, one at a time, each in its own folder under a
temporary directory and under a deadline, over small set-ups (gpt-tiny and llama-tiny x single,
DDP, FSDP2 and ZeRO-1/2/3 on 2 gloo ranks, ``steps.warmup=1 steps.measure=3``, the default probes),
and prints per set-up ``metrics.predicted.iteration_time_s`` (the figure the record keeps), the
measured mean step (``metrics.iteration_time_s.mean``, what ``analysis --prediction-errors``
compares with), the error ``(predicted - measured) / measured``, the error against the measured
median step, the predicted compute source, the job's wall time and ``metrics.probe_s``; then the
median and worst absolute error. Standard library and flopsweep only.

    python benchmarks/cpu_predict.py                        # every set-up once
    python benchmarks/cpu_predict.py --models gpt-tiny --backends single,zero3 --rounds 2
    python benchmarks/cpu_predict.py --extra predict.probe=true --json out.jsonl
    python benchmarks/cpu_predict.py --arm predict.cpu_probe=false --arm predict.cpu_probe=true  # interleaved
    python benchmarks/cpu_predict.py --backends layouts --extra predict.layer_probe=true  # 2 and 4 ranks
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flopsweep.safe_read import read_json  # noqa: E402

BACKENDS = {
    "single": ["backend=single", "nproc_per_node=1"],
    "ddp": ["backend=ddp", "nproc_per_node=2"],
    "fsdp": ["backend=fsdp", "nproc_per_node=2"],
    "zero1": ["backend=zero1", "nproc_per_node=2"],
    "zero2": ["backend=zero2", "nproc_per_node=2"],
    "zero3": ["backend=zero3", "nproc_per_node=2"],
}
"""Set-up name -> the overrides that pick it (2 gloo ranks for every distributed backend)."""

LAYOUTS = {
    "ddp4": ["backend=ddp", "nproc_per_node=4"],
    "fsdp4": ["backend=fsdp", "nproc_per_node=4"],
    "hsdp2x2": ["backend=fsdp", "nproc_per_node=4", "parallel.dp_replicate=2", "parallel.dp_shard=2"],
    "tp2": ["backend=fsdp", "nproc_per_node=2", "parallel.tp=2"],
    "fsdp2xtp2": ["backend=fsdp", "nproc_per_node=4", "parallel.tp=2"],
    "pp2": ["backend=fsdp", "nproc_per_node=2", "parallel.pp=2", "model.n_layer=4"],
    "fsdp2xpp2": ["backend=fsdp", "nproc_per_node=4", "parallel.pp=2", "model.n_layer=4"],
    "cp2": ["backend=fsdp", "nproc_per_node=2", "parallel.cp=2", "model.seq_len=64"],
    "fsdp2xcp2": ["backend=fsdp", "nproc_per_node=4", "parallel.cp=2", "model.seq_len=64"],
    "zero1x4": ["backend=zero1", "nproc_per_node=4"],
    "zero2x4": ["backend=zero2", "nproc_per_node=4"],
    "zero3x4": ["backend=zero3", "nproc_per_node=4"],
}
"""Layouts on 2 and 4 gloo ranks (issue 41: every layout predicted from probes on the CPU), each over the
models given; the pipelines at 4 blocks (2 a stage), context parallel at sequence 64."""

MOE = {
    "ep2": [
        "model=hf",
        "model.config=olmoe-tiny",
        "model.seq_len=32",
        "backend=fsdp",
        "nproc_per_node=2",
        "parallel.ep=2",
    ],
    "fsdp2xep2": [
        "model=hf",
        "model.config=olmoe-tiny",
        "model.seq_len=32",
        "backend=fsdp",
        "nproc_per_node=4",
        "parallel.ep=2",
    ],
}
"""Expert parallel needs an MoE model: OLMoE's tiny config (8 experts, top 2), whatever ``--models`` says."""

SETUPS = BACKENDS | LAYOUTS | MOE

STEPS = ["steps.warmup=1", "steps.measure=3"]


def load() -> str:
    """The 1-minute load average, as text."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def one(model: str, backend: str, extra: list[str], folder: Path, deadline_s: float) -> dict:
    """Run one job and return its row (``error`` set when it did not give an ok record)."""
    run_dir = folder / f"{model}-{backend}-{time.monotonic_ns()}"
    cmd = [
        sys.executable,
        str(ROOT / "run.py"),
        *([] if backend in MOE else [f"model={model}"]),
        "device=cpu",
        *SETUPS[backend],
        *STEPS,
        *extra,
        f"hydra.run.dir={run_dir}",
    ]
    row: dict = {"model": model, "backend": backend, "load_before": load()}
    start = time.monotonic()
    try:
        out = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=deadline_s, check=False)
    except subprocess.TimeoutExpired:
        return row | {"error": f"over the {deadline_s:.0f} s deadline"}
    row["wall_s"] = time.monotonic() - start
    row["load_after"] = load()
    try:
        record = read_json(run_dir / "metrics.json")
    except (OSError, ValueError) as exc:
        return row | {"error": f"no record ({exc}); stderr: {out.stderr[-400:]!r}"}
    if record.get("status") != "ok":
        return row | {"error": f"{record.get('status')}: {str(record.get('error'))[:300]}"}
    m = record["metrics"]
    pred = m.get("predicted") or {}
    step = m["iteration_time_s"]
    row |= {
        "predicted_s": pred.get("iteration_time_s"),
        "measured_s": step["mean"],
        "median_s": step["median"],
        "cv": step.get("cv"),
        "compute_source": pred.get("compute_source"),
        "source": pred.get("source"),
        "host_s": pred.get("host_s"),
        "probe_s": m.get("probe_s"),
        "probe_steps_s": (pred.get("layer_probe") or {}).get("times_s"),
    }
    if isinstance(row["predicted_s"], int | float):
        row["error"] = None
        row["err"] = row["predicted_s"] / step["mean"] - 1
        row["err_median"] = row["predicted_s"] / step["median"] - 1
    else:
        row["error"] = "no prediction"
    return row


def summary(rows: list[dict], key: str) -> str:
    errs = [abs(r[key]) for r in rows if r.get("error") is None]
    if not errs:
        return "no predictions"
    worst = max(errs)
    return f"median |error| {100 * statistics.median(errs):.1f}%, worst {100 * worst:.1f}% over {len(errs)}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt-tiny,llama-tiny")
    p.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help=f"set-ups, comma-separated, of: {', '.join(SETUPS)}; 'layouts' for every 2- and 4-rank layout",
    )
    p.add_argument("--rounds", type=int, default=1, help="passes over every set-up")
    p.add_argument("--deadline", type=float, default=300.0, help="seconds a job may take")
    p.add_argument("--extra", action="append", default=[], help="one more override for every job")
    p.add_argument("--json", type=Path, help="append every row to this file as JSON lines")
    p.add_argument(
        "--arm",
        action="append",
        default=[],
        help="run every set-up once per arm (an override), one arm after the other: pairs at the same load",
    )
    args = p.parse_args()
    backends = [
        b for name in args.backends.split(",") for b in (list(LAYOUTS | MOE) if name == "layouts" else [name])
    ]
    unknown = [b for b in backends if b not in SETUPS]
    if unknown:
        p.error(f"--backends {','.join(unknown)}: not a set-up. Fix: one of {', '.join(SETUPS)} or layouts")
    rows = []
    with tempfile.TemporaryDirectory(prefix="cpu_predict-") as tmp:
        for rnd in range(args.rounds):
            for model in args.models.split(","):
                for backend in backends:
                    if backend in MOE and model != args.models.split(",")[0]:
                        continue  # its own model: once a round
                    for arm in args.arm or [None]:
                        extra = [*args.extra, *([arm] if arm else [])]
                        row = one(model, backend, extra, Path(tmp), args.deadline) | {
                            "round": rnd,
                            "arm": arm,
                        }
                        rows.append(row)
                        report(row, args.json)
    for arm in args.arm or [None]:
        mine = [r for r in rows if r["arm"] == arm]
        head = f"{arm}: " if arm else ""
        print(f"{head}against the mean step: {summary(mine, 'err')}")
        print(f"{head}against the median step: {summary(mine, 'err_median')}")


def report(row: dict, json_path: Path | None) -> None:
    """Print one row (and append it to ``json_path`` as a JSON line, the file opened not following a link)."""
    model, backend, arm = row["model"], row["backend"], row["arm"]
    tag = f" [{arm}]" if arm else ""
    if row.get("error") is not None:
        print(f"{model:>10} {backend:>6}{tag}: {row['error']}", flush=True)
    else:
        print(
            f"{model:>10} {backend:>6}{tag}: predicted {row['predicted_s']:.4f} s, measured mean "
            f"{row['measured_s']:.4f} s (median {row['median_s']:.4f}, cv {row['cv'] or 0:.2f}), "
            f"error {100 * row['err']:+.0f}% (median {100 * row['err_median']:+.0f}%), "
            f"{row['compute_source']}, wall {row['wall_s']:.1f} s, probe_s {row['probe_s']}, "
            f"load {row['load_before']}->{row['load_after']}",
            flush=True,
        )
    if json_path:
        fd = os.open(json_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
