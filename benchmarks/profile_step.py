"""Where does a training step's GPU time go? torch.profiler over the reference loop.

    python benchmarks/profile_step.py --backend plain --compile --out prof.txt

Prints the GPU time per step split into the kernel families of ``kernel_table.py`` (GEMM,
attention, optimizer, Inductor, eager, communication, copies), then the top kernels. Uses the bare loops of
``reference.py`` so that nothing of the harness is in the picture.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_table import family  # noqa: E402  (one list of kernel families for both scripts)
from reference import add_loop_args, build, load_model_config  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_loop_args(p, steps=3)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    torch.cuda.set_device(0)
    mcfg = load_model_config(args.model)
    step = build(args, mcfg)
    tokens = torch.randint(0, mcfg.vocab_size, (args.micro_batch, mcfg.seq_len + 1), device="cuda")
    for _ in range(args.warmup):
        step(tokens)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step(tokens)
        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    # Kernels only: GPU user annotations (e.g. "Optimizer.step#AdamW.step") span kernels
    # that are already counted.
    kernels = [
        e
        for e in prof.key_averages()
        if e.device_type == torch.autograd.DeviceType.CUDA
        and not getattr(e, "is_user_annotation", False)
        and "#" not in e.key
    ]
    for e in kernels:
        totals[family(e.key)] += e.self_device_time_total / 1e3 / args.steps  # ms per step
    lines = [f"{args.backend} compile={args.compile} mb={args.micro_batch}: GPU ms per step by category"]
    lines += [f"  {cat:<40} {ms:8.1f}" for cat, ms in sorted(totals.items(), key=lambda kv: -kv[1])]
    lines.append(f"  {'total':<40} {sum(totals.values()):8.1f}")
    lines.append(
        prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=25, max_name_column_width=70)
    )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
