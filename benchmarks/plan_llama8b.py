"""``plan=true`` answers "Llama 3.1 8B, 15T tokens at $2.5/GPU-hour: what to rent and how to run it?"
(issue 42) and ranks torchtitan's published Llama 3.1 8B rows beside their figures; writes
``benchmarks/plan/llama3.1-8b.md`` (CPU, a few seconds of ``run.py`` each).

Usage (from the repository root or anywhere)::

    python benchmarks/plan_llama8b.py            # write benchmarks/plan/llama3.1-8b.md
    python benchmarks/plan_llama8b.py --check    # exit 1 when the file differs from a fresh run

Each plan is ``python run.py plan=true ...`` in a subprocess (a deadline each), in a temporary folder.
``tests/unit/test_plan_bench.py`` recomputes the rows the file shows from the same keys, in process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "plan" / "llama3.1-8b.md"
DEADLINE_S = 900

QUESTION = (
    "model=llama3.1-8b",
    "cost.usd_per_gpu_hour=2.5",
    "budget.tokens=15e12",
    "objective=usd_per_million_tokens",
    "plan_clusters=[H100:8,H100:64,H100:512,H200:8,H200:64,H200:512]",
)
"""The question: 8, 64 and 512 H100s and H200s (nodes of 8), ranked by dollars per million tokens."""

TORCHTITAN = (
    "model=llama3.1-8b",
    "model.seq_len=8192",
    "cost.usd_per_gpu_hour=2.5",
    "budget.tokens=15e12",
    "objective=tokens_per_s_per_device",
    "plan_clusters=[H100-NVL:1x8:ib400,H100-NVL:16x8:ib400]",
    "predict.intra_node_gbps=350",
    "space.backends=[fsdp]",
    "space.layouts=[dp]",
    "space.checkpointing=[selective]",
    "space.precisions=[bf16,fp8]",
    "space.micro_batches=[2]",
    "space.compile=[false,true]",
    "space.min_headroom=0.05",
    "plan_format=json",
)
"""torchtitan's set-up (benchmarks/llama3_h100_202412_torchtitan.md in pytorch/torchtitan, tables 1
and 3): FSDP, local batch 2 x 8192 tokens, selective (op) checkpointing, H100 at 500 W with 96 GB
HBM2e (planned as the H100 NVL: 94 GB, the 835 TFLOP/s bf16 peak torchtitan places its GPU at or
above), 8 GPUs a node on NVLink (350 GB/s busbw, as benchmarks/predict_torchtitan.py), 400 Gb/s per
GPU across nodes (ib400). ``space.min_headroom=0.05``: torchtitan ran at 82.4 of its 95 GiB.
``space.compile=[false,true]``: its eager and compiled rows, each predicted from records of its own
compile setting."""


@dataclass(frozen=True, kw_only=True)
class Published:
    table: str
    gpus: int
    compiled: bool
    precision: str
    tps: float
    memory_gib: float | None


PUBLISHED = (
    Published(table="table 1, FSDP", gpus=8, compiled=False, precision="bf16", tps=5762, memory_gib=82.4),
    Published(
        table="table 1, FSDP + compile", gpus=8, compiled=True, precision="bf16", tps=6667, memory_gib=77.0
    ),
    Published(
        table="table 1, FSDP + compile + Float8",
        gpus=8,
        compiled=True,
        precision="fp8",
        tps=8532,
        memory_gib=76.8,
    ),
    Published(table="table 3, FSDP", gpus=128, compiled=False, precision="bf16", tps=5605, memory_gib=None),
    Published(
        table="table 3, FSDP + compile", gpus=128, compiled=True, precision="bf16", tps=6514, memory_gib=None
    ),
)
"""torchtitan's Llama 3.1 8B rows (TPS/GPU, memory): pytorch/torchtitan
benchmarks/llama3_h100_202412_torchtitan.md (the 128-GPU memory is not in this file)."""


def run_plan(args: tuple[str, ...]) -> str:
    """``python run.py plan=true ARGS`` in a temporary folder; its stdout (exit 0 asserted)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(REPO / "run.py"), "plan=true", *args, f"hydra.run.dir={tmp}/plan"]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=DEADLINE_S, cwd=tmp, env=env, check=False
        )
    if proc.returncode != 0:
        raise SystemExit(f"plan failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout.replace(tmp, "TMP").rstrip("\n")


def command(args: tuple[str, ...]) -> str:
    return "python run.py plan=true " + " ".join(f"'{a}'" if "[" in a else a for a in args)


def torchtitan_table(plan: dict) -> list[str]:
    """Published TPS/GPU and rank beside the plan's predicted TPS/GPU and rank, per torchtitan row: the
    plan's row of the same GPUs, precision and compile setting."""
    rows = {(r["world_size"], r["precision"], r["compile"]): r for r in plan["rows"] if r["status"] == "ok"}
    by_pub = sorted(PUBLISHED, key=lambda p: -p.tps)
    out = [
        "| torchtitan row | GPUs | published TPS/GPU | published rank | predicted TPS/GPU | plan rank "
        "| published / predicted | memory GiB, published / estimated |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in PUBLISHED:
        row = rows.get((p.gpus, p.precision, p.compiled))
        if row is None:
            out.append(f"| {p.table} | {p.gpus} | {p.tps:,.0f} | {by_pub.index(p) + 1} | not planned | | | |")
            continue
        predicted = row["predicted_tokens_per_s_per_gpu"]
        memory = f"{p.memory_gib:g}" if p.memory_gib else "-"
        out.append(
            f"| {p.table} | {p.gpus} | {p.tps:,.0f} | {by_pub.index(p) + 1} | {predicted:,.0f} "
            f"| {row['rank']} | {p.tps / predicted:.2f} | {memory} / {row['est_peak_gib_per_rank']:.1f} |"
        )
    return out


def render() -> str:
    answer = run_plan(QUESTION)
    plan = json.loads(run_plan(TORCHTITAN))
    lines = [
        "# Llama 3.1 8B, 15T tokens at $2.5/GPU-hour: what to rent and how to run it",
        "",
        "Written by `python benchmarks/plan_llama8b.py` (do not edit; `--check` says whether it is "
        "stale). CPU only: `plan=true` starts no worker. Every figure is a prediction (docs/plan.md); "
        "the expected error of each row is in its `err` column, the defaults it used are listed under "
        "the table.",
        "",
        "## 8, 64 and 512 H100s and H200s, ranked by dollars per million tokens",
        "",
        "```",
        command(QUESTION),
        "```",
        "",
        "```",
        answer,
        "```",
        "",
        "## torchtitan's published Llama 3.1 8B rows beside the plan's",
        "",
        "```",
        command(TORCHTITAN),
        "```",
        "",
        *torchtitan_table(plan),
        "",
        "The plan ranks its own predictions (`objective=tokens_per_s_per_device`, rank 1 = fastest "
        "per GPU). Each is carried over from the nearest set-up among the records flopsweep ships "
        "(`nearest (shipped records)`: one H100 SXM's or H200's, scaled to the H100 NVL by the datasheet "
        "peak ratio 0.844). `space.compile=[false,true]` plans each set-up eager and compiled, each from "
        "records of its own compile setting: the plan ranks compile above eager and 8 GPUs over 128 as "
        "torchtitan measured, but predicts compiled fp8 from the shipped compiled fp8 run of Llama 3.1 8B "
        "on one H200 (431.8 TFLOP/s to bf16's 580.9), slower than bf16, where torchtitan's compiled Float8 "
        "ran fastest: a calibration record of the set-up (`predict.calibration=`) or the tuner's "
        "measurements rank it. The memory column compares unlike figures: torchtitan's is the peak the "
        "caching allocator reserved under its own op-level selective policy, the plan's the peak allocated "
        "under flopsweep's `selective`; the compiled estimates (35-46 GiB against torchtitan's 77) rest on "
        "compiled activations checked at 2,048 tokens (gpt-1.3b, Llama 3.2 1B and 3B), not at 8,192, where "
        "no compiled `selective` record exists. Defaults of this plan:",
        "",
        *(f"- {d}" for d in plan["defaults"]),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        stale = not OUT.exists() or OUT.read_text() != text
        print(f"{OUT.relative_to(REPO)} is {'stale' if stale else 'current'}")
        return int(stale)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
