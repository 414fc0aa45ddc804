"""Bare training loops for the flopsweep GPT: the yardstick for the harness's overhead.

No Hydra, no launcher, no metrics code: build the model, wrap it, loop, time the
loop with ``torch.cuda.synchronize`` around it. One process per GPU: run it as is for one
GPU, or under ``torchrun --standalone --nproc_per_node N`` for N (``plain`` is then DDP).

    python benchmarks/reference.py --backend plain|fsdp|deepspeed --model gpt-1.3b \
        --micro-batch 8 --warmup 3 --steps 10 [--compile] [--attention sdpa]
    torchrun --standalone --nproc_per_node 2 benchmarks/reference.py --backend deepspeed

Rank 0 prints one JSON line: backend, world_size, iteration_time_s (mean), tokens_per_s (all ranks).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from flopsweep import checkpointing  # noqa: E402
from flopsweep.config import CheckpointingConfig  # noqa: E402
from flopsweep.models.gpt2 import GPT  # noqa: E402
from flopsweep.models.gpt2 import GPT2Config as ModelConfig  # noqa: E402
from flopsweep.text import OneLineParser  # noqa: E402

ADAMW = dict(lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def load_model_config(name: str) -> ModelConfig:
    path = Path(__file__).resolve().parents[1] / "conf" / "model" / f"{name}.yaml"
    fields = {k: v for k, v in yaml.safe_load(path.read_text()).items() if k != "defaults"}
    return ModelConfig(**fields)


def init_group() -> None:
    """The NCCL process group: torchrun's environment when present, else one rank."""
    if torch.distributed.is_initialized():
        return
    for key, value in (
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29517"),
        ("RANK", "0"),
        ("LOCAL_RANK", "0"),
        ("WORLD_SIZE", "1"),
    ):
        os.environ.setdefault(key, value)
    torch.distributed.init_process_group("nccl", device_id=torch.device("cuda", LOCAL_RANK))


LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "1"))


def _checkpointed(model: GPT, on: bool) -> GPT:
    """Each block wrapped by flopsweep's ``full`` checkpointing policy when ``on``."""
    name = "full" if on else "none"
    checkpointing.POLICIES[name].apply(model.h, CheckpointingConfig(name=name))
    return model


def build(args: argparse.Namespace, mcfg: ModelConfig):
    """Returns step(tokens) -> None for the chosen backend."""
    torch.manual_seed(0)
    if args.backend == "deepspeed":
        return build_deepspeed(args, mcfg)
    with torch.device("cuda", LOCAL_RANK):
        model = _checkpointed(GPT(mcfg, args.attention), args.checkpointing)
    if args.compile:
        for block in model.h:
            block.compile(mode=args.compile_mode)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16)
    if args.backend == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        init_group()
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for i, block in enumerate(model.h):
            fully_shard(block, mp_policy=mp, reshard_after_forward=i < len(model.h) - 1)
        fully_shard(model, mp_policy=mp)
        autocast = torch.autocast("cuda", enabled=False)
    elif WORLD_SIZE > 1:  # plain on N ranks: DDP
        init_group()
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[LOCAL_RANK])
    opt = torch.optim.AdamW(model.parameters(), fused=True, **ADAMW)

    def step(tokens: torch.Tensor) -> None:
        with autocast:
            loss = model(tokens)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def build_deepspeed(args: argparse.Namespace, mcfg: ModelConfig):
    import deepspeed

    init_group()
    deepspeed.init_distributed()
    h = mcfg.n_embd
    ds_config = {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": 1,
        "train_batch_size": args.micro_batch * WORLD_SIZE,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": True},
        "zero_optimization": {
            "stage": 3,
            "overlap_comm": True,
            "contiguous_gradients": True,
            "reduce_bucket_size": h * h,
            "stage3_prefetch_bucket_size": int(0.9 * h * h),
            "stage3_param_persistence_threshold": 10 * h,
        },
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": 1e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1},
        },
        "steps_per_print": 1 << 30,
    }
    with deepspeed.zero.Init(config_dict_or_path=ds_config):
        model = GPT(mcfg, args.attention)
    model = _checkpointed(model, args.checkpointing)  # outside zero.Init, as flopsweep wraps it
    deepspeed.zero.register_external_parameter(model, model.wte.weight)
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)

    def step(tokens: torch.Tensor) -> None:
        loss = engine(tokens)
        engine.backward(loss)
        engine.step()

    return step


def add_loop_args(p: argparse.ArgumentParser, steps: int = 10) -> None:
    """The options that pick a loop (shared with profile_step.py)."""
    p.add_argument("--backend", choices=["plain", "fsdp", "deepspeed"], default="plain")
    p.add_argument("--model", default="gpt-1.3b")
    p.add_argument("--attention", default="sdpa")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-mode", default=None, help="torch.compile mode, e.g. max-autotune-no-cudagraphs")
    p.add_argument("--checkpointing", action="store_true", help="recompute each block in backward")


def main() -> None:
    p = OneLineParser(description=__doc__.splitlines()[0])
    add_loop_args(p)
    args = p.parse_args()
    mcfg = load_model_config(args.model)
    torch.cuda.set_device(LOCAL_RANK)
    step = build(args, mcfg)
    gen = torch.Generator(device="cuda").manual_seed(LOCAL_RANK)  # each rank its own data
    tokens = torch.randint(
        0, mcfg.vocab_size, (args.micro_batch, mcfg.seq_len + 1), device="cuda", generator=gen
    )
    for _ in range(args.warmup):
        step(tokens)
    torch.cuda.synchronize()
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step(tokens)
    torch.cuda.synchronize()
    it = (time.perf_counter() - t0) / args.steps
    if LOCAL_RANK == 0:
        print(
            json.dumps(
                {
                    "backend": args.backend,
                    "model": args.model,
                    "world_size": WORLD_SIZE,
                    "micro_batch": args.micro_batch,
                    "compile": args.compile,
                    "compile_mode": args.compile_mode,
                    "checkpointing": args.checkpointing,
                    "iteration_time_s": it,
                    "tokens_per_s": WORLD_SIZE * args.micro_batch * mcfg.seq_len / it,
                }
            ),
            flush=True,
        )
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
