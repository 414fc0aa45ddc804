"""What a compiled Llama block saves for backward under ``activation_checkpointing=memory_budget`` and under
``none``, counted on the CPU (``single``, bf16 autocast over fp32 weights, as ``parallelize.build_model``
builds it): the storages autograd saves during one forward (``torch.autograd.graph.saved_tensors_hooks``),
once per storage, parameters left out, at two depths in their own processes (a fresh compile cache each);
the difference is one block's bytes. The shape keeps Llama 3.2 1B's proportions (``kv = h / 4``,
``ffn = 4 h``, head width 64) at ``h`` 512 and 4,096 tokens, so that weights and activations weigh in the
partitioner's budget about as at ``h`` 2048 and 14,336 tokens. Prints each case's bytes a block and whether
a bf16 weight (a ``(out, in)`` bf16 storage) is among them (reliability row 1081: torch 2.13, 89.6 MB a
block under ``none``, bf16 weights among them; 35.7 MB under budget 0.5, none).

    python benchmarks/budget_casts.py [--budget 0.5]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
H, SEQ, MICRO = 512, 2048, 2


def count(policy: str, budget: float, n_layer: int) -> dict:
    """In this process: one forward of ``n_layer`` blocks; the saved storages' bytes and bf16 matrices."""
    import torch

    from flopsweep.checkpointing import POLICIES
    from flopsweep.config import BackendConfig, RunConfig
    from flopsweep.models.llama import LlamaConfig
    from flopsweep.parallelize import build_model

    torch._dynamo.config.automatic_dynamic_shapes = False
    torch.set_num_threads(1)
    model_cfg = LlamaConfig(
        name="llama-budget", n_layer=n_layer, n_embd=H, n_head=H // 64, n_kv_head=H // 256, ffn_dim=4 * H,
        seq_len=SEQ, vocab_size=256,
    )  # fmt: skip
    knobs = {"budget": budget} if policy == "memory_budget" else {}
    ac = POLICIES[policy].config(name=policy, **knobs)
    cfg = dataclasses.replace(
        RunConfig(),
        model=model_cfg,
        backend=BackendConfig(),
        device="cpu",
        compile=True,
        activation_checkpointing=ac,
    )
    model = build_model(cfg, torch.device("cpu"))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, tuple] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr and ptr not in params and ptr not in seen:
            seen[ptr] = (tuple(t.shape), t.dtype == torch.bfloat16, t.untyped_storage().nbytes())
        return t

    tokens = torch.randint(0, 256, (MICRO, SEQ + 1))
    with (
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        torch.autocast("cpu", dtype=torch.bfloat16),
    ):
        model(tokens)
    weights = [s for s, bf16, _ in seen.values() if bf16 and len(s) == 2 and MICRO * SEQ not in s]
    return {"bytes": sum(n for *_, n in seen.values()), "bf16_weights": len(weights)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=float, default=0.5)
    parser.add_argument("--child", nargs=2, metavar=("POLICY", "LAYERS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(count(args.child[0], args.budget, int(args.child[1]))))
        return
    for policy in ("none", "memory_budget"):
        runs = []
        for n_layer in (2, 3):
            cmd = [sys.executable, __file__, "--budget", str(args.budget), "--child", policy, str(n_layer)]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        block = runs[1]["bytes"] - runs[0]["bytes"]
        print(f"{policy}: {block / 1e6:.1f} MB a block; bf16 weights saved: {runs[1]['bf16_weights']}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
