"""FSDP2's host cost per unit on one CPU rank (gloo; issue 41, session 39): a stack of 28 units of
``NLIN`` (default 2) ``Linear(64, 64)`` layers, forward and backward of a ``[2, 16, 64]`` batch, timed
plain and with every unit and the root under ``fully_shard`` (bf16 parameters, fp32 reduction, as
``parallelize`` shards); the median of 30 steps after 3, one intra-op thread. Prints the step both ways and
the difference per unit: what the compute probe's one-block pieces do not run
(docs/prediction-host-optimizer.md, "Left over"). ``NLIN=6 python benchmarks/fsdp_hooks_cpu.py``.
"""

from __future__ import annotations

import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

UNITS, WIDTH = 28, 64


def stack() -> torch.nn.Sequential:
    per = int(os.environ.get("NLIN", "2"))
    return torch.nn.Sequential(
        *[torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(per)]) for _ in range(UNITS)]
    )


def step_s(model: torch.nn.Module, reps: int = 30) -> float:
    x = torch.randn(2, 16, WIDTH)
    for _ in range(3):
        model(x).sum().backward()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        model(x).sum().backward()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29637")
    dist.init_process_group("gloo", rank=0, world_size=1)
    torch.set_num_threads(1)
    try:
        plain = step_s(stack())
        sharded = stack()
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for unit in sharded:
            fully_shard(unit, mp_policy=mp)
        fully_shard(sharded, mp_policy=mp)
        fsdp = step_s(sharded)
    finally:
        dist.destroy_process_group()
    per_unit = (fsdp - plain) / UNITS
    print(f"plain {plain * 1e3:.2f} ms, FSDP2 {fsdp * 1e3:.2f} ms, {per_unit * 1e3:.3f} ms a unit")


if __name__ == "__main__":
    main()
