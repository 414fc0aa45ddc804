"""What one block keeps for backward, counted on the CPU as live bytes: glibc's allocated bytes
(``mallinfo2``: in-use arena chunks plus mmapped blocks) when one eager forward of the model as
flopsweep builds it (``parallelize.build_model`` under ``single``, bf16 autocast over fp32 weights) has
returned its loss, less those before it. Unlike ``benchmarks/saved_per_block.py`` (the storages autograd's
hooks see), this counts what a checkpointing policy keeps outside autograd's saved tensors too: eager
``selective``'s cache of the outputs it saves (``torch.utils.checkpoint``'s ``_CachingTorchDispatchMode``)
and the block inputs its checkpoint holds for the recompute.

Each case runs at two depths and two micro batches; the difference between depths is one block's, the
difference between micro batches of that its per-token part. Printed per policy next to the estimate's
figure (:func:`flopsweep.activation_memory.selective_bytes` for ``selective``, else the
boundary and the whole block of :func:`flopsweep.activation_memory.bytes_per_token`), at a small and a
large vocabulary: what a block keeps does not change with the vocabulary.

    python benchmarks/live_per_block.py [--family llama|gpt2] [--policies none,full,selective] [--seq 64]
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import gc
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEPTHS = (2, 3)
MICRO = (1, 2)
SEQ = 64
"""The default sequence length (``--seq``); 256 gives the per-token figure within 0.4% run to run,
64 within 4%."""
VOCABS = (256, 16384)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
        )
    ] + [("keepcost", ctypes.c_size_t)]


def allocated() -> int | None:
    """Bytes the process has allocated through glibc's malloc now (``uordblks + hblkhd``); None where
    ``mallinfo2`` is missing (not glibc, or glibc before 2.33)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        info = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    info.restype = _MallInfo2
    got = info()
    return got.uordblks + got.hblkhd


def run_config(fam: str, policy: str, n_layer: int, vocab: int, seq: int = SEQ) -> Any:
    """A ``RunConfig`` of a small shape whose widths differ (Llama: ``h`` 96, ``kv`` 48, ``ffn`` 320, tied
    embeddings; GPT-2: ``h`` 96), eager, on the CPU, under ``activation_checkpointing=policy``."""
    from flopsweep.config import BackendConfig, CheckpointingConfig, RunConfig

    if fam == "llama":
        from flopsweep.models.llama import LlamaConfig

        model = LlamaConfig(
            name="llama-live", n_layer=n_layer, n_embd=96, n_head=4, n_kv_head=2, ffn_dim=320,
            seq_len=seq, vocab_size=vocab, tie_embeddings=True,
        )  # fmt: skip
    else:
        from flopsweep.models.gpt2 import GPT2Config

        model = GPT2Config(
            name="gpt-live", n_layer=n_layer, n_embd=96, n_head=4, seq_len=seq, vocab_size=vocab
        )
    return dataclasses.replace(
        RunConfig(),
        model=model,
        backend=BackendConfig(),
        device="cpu",
        compile=False,
        activation_checkpointing=CheckpointingConfig(name=policy),
    )


def kept_after_forward(cfg: Any, micro: int) -> int:
    """Live bytes one forward of ``micro`` sequences adds, counted once it returned its loss (two steps
    first, so that AdamW's states and the gradients' first allocation are in the baseline)."""
    import torch

    torch.manual_seed(0)
    from flopsweep.parallelize import build_model

    model = build_model(cfg, torch.device("cpu"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, cfg.model.vocab_size, (micro, cfg.model.seq_len + 1))

    def forward() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(tokens)

    for _ in range(2):
        forward().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    gc.collect()  # what earlier work left for the collector is freed before, not during, the count
    gc.disable()
    try:
        before = allocated()
        loss = forward()
        kept = allocated() - before
    finally:
        gc.enable()
    loss.backward()
    return kept


def per_token_and_block(fam: str, policy: str, vocab: int, seq: int = SEQ) -> float:
    """Bytes a token that one block keeps at the end of forward: the depths' difference, per token between
    the micro batches, at sequence length ``seq``."""
    import torch

    torch.set_num_threads(1)
    block = {}
    for micro in MICRO:
        kept = [kept_after_forward(run_config(fam, policy, depth, vocab, seq), micro) for depth in DEPTHS]
        block[micro] = kept[1] - kept[0]
    return (block[MICRO[1]] - block[MICRO[0]]) / ((MICRO[1] - MICRO[0]) * seq)


def estimated(fam: str, policy: str, vocab: int) -> int:
    """The estimate's bytes a token that one block keeps before backward rebuilds any: ``selective``'s
    :func:`~flopsweep.activation_memory.selective_bytes` (or its ``(a - b) / 2`` estimate), ``full``'s
    boundary, ``none``'s whole block."""
    from flopsweep.activation_memory import bytes_per_token, selective_bytes

    cfg = run_config(fam, policy, DEPTHS[0], vocab)
    boundary, layer = bytes_per_token(cfg)
    if policy == "selective":
        kept = selective_bytes(cfg)
        return kept if kept is not None else boundary + (layer - boundary) // 2
    return boundary if policy == "full" else layer


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--family", default="llama", choices=["llama", "gpt2"])
    parser.add_argument("--policies", default="none,full,selective")
    parser.add_argument("--seq", type=int, default=SEQ, help="sequence length (default %(default)s)")
    args = parser.parse_args()
    if allocated() is None:
        sys.exit("live_per_block: needs glibc's mallinfo2 (glibc 2.33 or later)")
    for vocab in VOCABS:
        for policy in args.policies.split(","):
            got = per_token_and_block(args.family, policy, vocab, args.seq)
            want = estimated(args.family, policy, vocab)
            case = f"{args.family} vocabulary {vocab} {policy}"
            print(f"{case}: {got:,.0f} bytes a token and block; estimate {want:,}")


if __name__ == "__main__":
    main()
