"""Attention kernels alone, forward plus backward, on one CUDA GPU: a timing table.

The shape of DESIGN.md's reference figures: batch 8, 16 heads, sequence 4096, head dim
128, causal, bf16. Every kernel of ``flopsweep.attention`` runs, plus FlexAttention
with a 512-token sliding window (a token-level ``mask_mod``, as in DESIGN.md) and the
block-sparse layouts with both implementations. Timing: CUDA events around each
forward plus backward, after warm-up iterations (which also compile FlexAttention);
the median over the measured iterations is reported.

TFLOP/s counts ``12 B nh T^2 hs`` per forward plus backward (QK^T and AV, 2 FLOPs per
multiply-add, backward twice the forward): the dense convention of
``flopsweep.flops``. "effective" scales it by the kernel's block density.

    python benchmarks/attention_kernels.py [--seq 4096] [--iters 20] [--json out.json]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flopsweep import blocksparse_kernels as bsp  # noqa: E402
from flopsweep.attention import BlockSparseConfig, attention_density  # noqa: E402
from flopsweep.attention_kernels import FlexAttention, build_attention_fn, check_kernel  # noqa: E402
from flopsweep.config import AttentionConfig  # noqa: E402
from flopsweep.text import OneLineParser  # noqa: E402

DENSE = ["standard", "sdpa", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "flex", "xformers"]
WINDOW_TOKENS = 512


def sliding_window_flex(window: int) -> FlexAttention:
    """FlexAttention, causal with a ``window``-token sliding window (token-level mask)."""
    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (q_idx - kv_idx < window)

    return FlexAttention(lambda T, device: create_block_mask(mask_mod, None, None, T, T, device=device))


def kernels(seq: int, window_blocks: int) -> list[tuple[str, AttentionConfig | None, float]]:
    """(label, config or None for the sliding window, density) of every kernel to time."""
    rows = [(name, AttentionConfig(name=name), 1.0) for name in DENSE]
    n = bsp.n_blocks(seq, 128)
    window = torch.ones(seq, seq, dtype=torch.bool).tril().triu(-(WINDOW_TOKENS - 1))
    blocks_hit = window.view(n, 128, n, 128).any(3).any(1)  # blocks the sliding window touches
    rows.append((f"flex sliding window {WINDOW_TOKENS}", None, bsp.density(blocks_hit)))
    for impl in ("flex", "gather"):
        for layout in bsp.LAYOUTS:
            cfg = BlockSparseConfig(
                layout=layout,
                impl=impl,
                window_blocks=window_blocks,
                global_blocks=1,
                random_blocks=1,
                stride_blocks=4,
                seed=0,
            )
            rows.append((f"blocksparse {layout} {impl}", cfg, attention_density(cfg, seq)))
    return rows


def time_fwd_bwd(fn, q, k, v, warmup: int, iters: int) -> list[float]:
    """Milliseconds of ``fn(q, k, v).backward(dy)`` per iteration, timed by CUDA events."""
    dy = torch.randn_like(q)
    for _ in range(warmup):
        fn(q, k, v).backward(dy)
        q.grad = k.grad = v.grad = None
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(q, k, v).backward(dy)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
        q.grad = k.grad = v.grad = None
    return times


def measure(label, cfg, q, k, v, args) -> dict:
    """One row: median ms and TFLOP/s, or the reason the kernel could not run."""
    try:
        if cfg is None:
            fn = sliding_window_flex(WINDOW_TOKENS)
        else:
            check_kernel(cfg, head_dim=q.size(-1), dtype=q.dtype, device=q.device)
            fn = build_attention_fn(cfg)
        times = time_fwd_bwd(fn, q, k, v, args.warmup, args.iters)
    except Exception as exc:  # noqa: BLE001 - a kernel that fails is a row of the table, not the end
        torch.cuda.empty_cache()
        return {"kernel": label, "error": f"{type(exc).__name__}: {str(exc)[:160]}"}
    ms = statistics.median(times)
    B, nh, T, hs = q.shape
    tflops = 12 * B * nh * T * T * hs / (ms * 1e-3) / 1e12
    return {"kernel": label, "ms": ms, "tflops": tflops}


def main() -> None:
    p = OneLineParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--window-blocks", type=int, default=4, help="blocksparse local/bigbird window")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args()
    if args.seq % 128:
        p.error("--seq must be a multiple of 128 (the block size)")
    torch._dynamo.config.recompile_limit = 64  # one flex compile per mask; never fall back to eager
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}; "
        f"fwd+bwd, causal, bf16, (B, nh, T, hs) = {shape}"
    )
    rows = []
    print(f"{'kernel':<28} {'density':>8} {'ms':>9} {'TFLOP/s':>9} {'effective':>10}")
    for label, cfg, density in kernels(args.seq, args.window_blocks):
        row = {**measure(label, cfg, q, k, v, args), "density": density}
        rows.append(row)
        if "error" in row:
            print(f"{label:<28} {density:>8.3f}  unavailable: {row['error']}", flush=True)
        else:
            print(
                f"{label:<28} {density:>8.3f} {row['ms']:>9.2f} {row['tflops']:>9.1f} "
                f"{row['tflops'] * density:>10.1f}",
                flush=True,
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "shape": shape,
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "rows": rows,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
