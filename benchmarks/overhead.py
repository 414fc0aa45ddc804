"""Harness overhead: flopsweep's tokens/s against the bare reference loop, same settings.

For each backend it runs ``benchmarks/reference.py`` and then ``python run.py`` on the
same model, micro batch, step counts and rank count, one after the other on the same
GPUs, and reports harness ÷ reference tokens/s (target >= 0.98). With ``--nproc N`` the
reference runs under ``torchrun --standalone --nproc_per_node N`` (``plain`` is then DDP)
and the harness with ``nproc_per_node=N``.

    python benchmarks/overhead.py --out results_dir [--model gpt-1.3b] [--micro-batch 8] [--compile]
    python benchmarks/overhead.py --out results_dir --nproc 2 --backends plain,fsdp,deepspeed
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAIRS = {"plain": "single", "fsdp": "fsdp", "deepspeed": "zero3"}
"""Reference loop -> harness backend (one rank; ``plain`` on N ranks is DDP: ``ddp``)."""


def reference(backend: str, args: argparse.Namespace) -> dict:
    launcher = [sys.executable]
    if args.nproc > 1:
        launcher = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={args.nproc}",
        ]
    cmd = [
        *launcher,
        str(ROOT / "benchmarks" / "reference.py"),
        "--backend",
        backend,
        "--model",
        args.model,
        "--micro-batch",
        str(args.micro_batch),
        "--warmup",
        str(args.warmup),
        "--steps",
        str(args.steps),
    ] + (["--compile"] if args.compile else [])
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"reference {backend} failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def harness(backend: str, args: argparse.Namespace, run_dir: Path) -> dict:
    cmd = [
        sys.executable,
        "run.py",
        f"backend={backend}",
        f"model={args.model}",
        "device=cuda",
        f"nproc_per_node={args.nproc}",
        f"batch.micro_batch_size={args.micro_batch}",
        f"steps.warmup={args.warmup}",
        f"steps.measure={args.steps}",
        f"compile={str(args.compile).lower()}",
        f"hydra.run.dir={run_dir}",
    ]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    record = json.loads((run_dir / "metrics.json").read_text())
    if record["status"] != "ok":
        raise RuntimeError(f"harness {backend} failed: {record['error']}\n{out.stderr[-2000:]}")
    return record


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="directory for the harness runs and overhead.json")
    p.add_argument("--model", default="gpt-1.3b")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--backends", default="plain,fsdp,deepspeed")
    p.add_argument("--nproc", type=int, default=1, help="ranks (GPUs) for both sides")
    args = p.parse_args()
    rows = []
    for ref_backend in args.backends.split(","):
        ref = reference(ref_backend, args)
        backend = "ddp" if ref_backend == "plain" and args.nproc > 1 else PAIRS[ref_backend]
        rec = harness(backend, args, args.out / backend)
        ratio = rec["metrics"]["tokens_per_s"] / ref["tokens_per_s"]
        rows.append(
            {
                "backend": backend,
                "world_size": args.nproc,
                "reference_tokens_per_s": ref["tokens_per_s"],
                "harness_tokens_per_s": rec["metrics"]["tokens_per_s"],
                "ratio": ratio,
                "harness_tflops_per_device": rec["metrics"]["model_tflops_per_device"],
            }
        )
        print(
            f"{backend:>8} x{args.nproc}: reference {ref['tokens_per_s']:9.0f} tok/s, harness "
            f"{rec['metrics']['tokens_per_s']:9.0f} tok/s, ratio {ratio:.3f}",
            flush=True,
        )
    (args.out / "overhead.json").write_text(
        json.dumps({"settings": vars(args) | {"out": str(args.out)}, "rows": rows}, indent=2)
    )


if __name__ == "__main__":
    main()
