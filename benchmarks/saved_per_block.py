"""What a Llama (or GPT-2) block keeps for backward, counted on the CPU: the storages autograd saves during
one forward (``torch.autograd.graph.saved_tensors_hooks``: eager ops' and compiled regions' autograd
Functions alike), deduplicated by storage, parameters left out, for the model as flopsweep builds it
(``parallelize.build_model`` under ``single``, with bf16 autocast over fp32 weights; ``build_deepspeed``
under ZeRO-3, a real engine on one gloo rank, bf16 weights), eager or ``compile=true``; ``casts-*``:
``single`` under ``activation_checkpointing=casts`` (its eager hooks hand every tensor they keep to the
counting hooks; the weight casts they recompute are not saved, so "fixed" reads 0 where ``single-*`` reads
2 bytes a block's Linear parameter: Llama 239,616, GPT-2 221,184; per token the same as ``single-*``).

Each case runs at two depths and two micro batches in its own process (a fresh compile cache); the
difference between depths is one block's, the difference between micro batches its per-token part.
Prints, per case, one block's bytes a token and their split by what each saved tensor's last dimension
is (``h``, ``kv``, ``ffn``, heads), so that the elements read in the family's units.

    python benchmarks/saved_per_block.py [--family llama|gpt2] [--cases single-eager,single-compiled,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CASES = ("single-eager", "single-compiled", "zero3-eager", "zero3-compiled", "casts-eager", "casts-compiled")
DEPTHS = (2, 3)
MICRO = (1, 2)


def model_config(fam: str, n_layer: int):
    """A small shape whose widths differ (``h`` 96, ``kv`` 48, ``ffn`` 320; GPT-2: ``h`` 96) and whose
    sequence (64) differs from every width, so a saved tensor's width names what it is."""
    if fam == "llama":
        from flopsweep.models.llama import LlamaConfig

        return LlamaConfig(
            name="llama-count", n_layer=n_layer, n_embd=96, n_head=4, n_kv_head=2, ffn_dim=320,
            seq_len=64, vocab_size=256,
        )  # fmt: skip
    from flopsweep.models.gpt2 import GPT2Config

    return GPT2Config(name="gpt-count", n_layer=n_layer, n_embd=96, n_head=4, seq_len=64, vocab_size=256)


def run_config(fam: str, case: str, n_layer: int):
    """The ``RunConfig`` of ``case`` (``single-eager``, ``zero3-compiled``, ...) at ``n_layer`` blocks."""
    from flopsweep.backends import DeepSpeedConfig
    from flopsweep.config import BackendConfig, CheckpointingConfig, RunConfig

    backend = DeepSpeedConfig(name="deepspeed", zero_stage=3) if case.startswith("zero3") else BackendConfig()
    return dataclasses.replace(
        RunConfig(),
        model=model_config(fam, n_layer),
        backend=backend,
        device="cpu",
        compile="compiled" in case,
        activation_checkpointing=CheckpointingConfig(name="casts" if case.startswith("casts") else "none"),
    )


def saved_by_forward(forward) -> list[tuple[tuple[int, ...], str, int]]:
    """``(shape, dtype, storage bytes)`` of each storage autograd saves while ``forward()`` runs, once
    per storage, parameters (and views of them) left out."""
    import torch

    seen: dict[int, tuple[tuple[int, ...], str, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr and ptr not in params() and ptr not in seen:
            seen[ptr] = (tuple(t.shape), str(t.dtype).removeprefix("torch."), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = forward()
    return list(seen.values()), loss


def params() -> set[int]:
    """Storage addresses of the model's parameters now (ZeRO-3's gathered ones included)."""
    return {p.untyped_storage().data_ptr() for p in MODEL.parameters()}


MODEL = None


def count(fam: str, case: str, n_layer: int) -> dict:
    """In this process: build ``case`` at ``n_layer`` blocks, run two steps per micro batch, count the
    third forward's saved storages per micro batch."""
    global MODEL
    import torch
    import torch._dynamo

    torch._dynamo.config.automatic_dynamic_shapes = False  # static shapes, as a run's fixed micro batch
    torch._dynamo.config.cache_size_limit = 64
    torch.set_num_threads(1)
    cfg = run_config(fam, case, n_layer)
    if case.startswith("zero3"):
        import torch.distributed as dist

        from flopsweep.deepspeed_backend import build_deepspeed
        from flopsweep.layout import Layout

        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
        dist.init_process_group(
            "gloo", init_method=f"file://{os.environ['COUNT_STORE']}", rank=0, world_size=1
        )
        engine = build_deepspeed(cfg, torch.device("cpu"), Layout()).engine
        MODEL = engine.module

        def step(tokens):
            loss = engine(tokens)
            engine.backward(loss)
            engine.step()

        def forward(tokens):
            return engine(tokens)

        def backward(loss):
            engine.backward(loss)
            engine.step()
    else:
        from flopsweep.parallelize import build_model

        MODEL = build_model(cfg, torch.device("cpu"))
        opt = torch.optim.AdamW(MODEL.parameters(), lr=1e-4)

        def forward(tokens):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return MODEL(tokens)

        def backward(loss):
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        def step(tokens):
            backward(forward(tokens))

    out = {}
    m = cfg.model
    for micro in MICRO:
        torch.manual_seed(micro)
        tokens = torch.randint(0, m.vocab_size, (micro, m.seq_len + 1))
        for _ in range(2):
            step(tokens)
        saved, loss = saved_by_forward(lambda tokens=tokens: forward(tokens))
        backward(loss)
        out[micro] = saved
    return out


def widths(fam: str) -> dict[int, str]:
    m = model_config(fam, 1)
    names = {m.n_embd: "h"}
    if fam == "llama":
        names |= {m.n_kv_head * (m.n_embd // m.n_head): "kv", m.ffn_dim: "ffn"}
    else:
        names |= {3 * m.n_embd: "3h", 4 * m.n_embd: "4h"}
    return names


def label(shape, dtype, fam: str) -> str:
    m = model_config(fam, 1)
    hd = m.n_embd // m.n_head
    names = widths(fam)
    last = shape[-1] if shape else 0
    if len(shape) == 4 and last == hd:  # (B, heads, T, hd) or (B, T, heads, hd)
        heads = shape[1] if shape[2] == m.seq_len else shape[2]
        last, name = heads * hd, {m.n_head: "q", getattr(m, "n_kv_head", m.n_head): "kv"}.get(heads, "?")
        return f"{name}:{dtype}"
    if len(shape) == 3 and m.seq_len in shape and last == m.seq_len:  # logsumexp (B, heads, T)
        return f"heads:{dtype}"
    if last == 1:  # a norm's per-token statistic (B, T, 1)
        return f"1:{dtype}"
    return f"{names.get(last, str(shape))}:{dtype}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--family", default="llama", choices=["llama", "gpt2"])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--child", nargs=2, metavar=("CASE", "LAYERS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        got = count(args.family, args.child[0], int(args.child[1]))
        print("RESULT " + json.dumps({k: [[list(s), d, n] for s, d, n in v] for k, v in got.items()}))
        return
    import tempfile

    m = model_config(args.family, 1)
    for case in args.cases.split(","):
        runs = {}
        for depth in DEPTHS:
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(os.environ, COUNT_STORE=f"{tmp}/store")
                proc = subprocess.run(
                    [sys.executable, __file__, "--family", args.family, "--child", case, str(depth)],
                    capture_output=True, text=True, timeout=1200, env=env,
                )  # fmt: skip
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if not line:
                sys.exit(f"{case} at {depth} blocks failed:\n{proc.stderr[-4000:]}")
            runs[depth] = {int(k): v for k, v in json.loads(line[0][7:]).items()}
        # one block's bytes at each micro batch, by label
        block = {}
        for micro in MICRO:
            per = [Counter() for _ in DEPTHS]
            for i, depth in enumerate(DEPTHS):
                for shape, dtype, nbytes in runs[depth][micro]:
                    per[i][label(shape, dtype, args.family)] += nbytes
            block[micro] = {k: per[1][k] - per[0][k] for k in set(per[0]) | set(per[1])}
        tokens = m.seq_len
        rows = {k: (block[MICRO[1]].get(k, 0) - block[MICRO[0]].get(k, 0)) / tokens for k in block[MICRO[1]]}
        fixed = sum(block[MICRO[0]].values()) - sum(rows.values()) * tokens * MICRO[0]
        total = sum(rows.values())
        split = ", ".join(f"{k} {v:g}" for k, v in sorted(rows.items()) if v)
        print(f"{case}: {total:g} bytes a token and block ({split}); fixed {fixed:g} bytes a block")


if __name__ == "__main__":
    main()
