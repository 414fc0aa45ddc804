"""Python garbage collections inside the optimizer steps of one rank, per ``steps.gc_freq``.

Builds the trainer of ``OVERRIDES`` in this process (one rank, gloo or NCCL as the device says),
runs 5 unmeasured and 40 measured steps under :class:`flopsweep.gc_policy.GarbageCollection`, and
prints one JSON line: collections per generation that started inside the measured steps, their
pause in all and at most (ms), and the steps' median and sum (ms). Session 26, on the CPU::

    python benchmarks/gc_steps.py 0 model=gpt-tiny backend=zero3 device=cpu
    # {"gc_freq": 0, ..., "by_gen": {"0": 4, "1": 0, "2": 0}, "pause_ms_total": 0.3, ...}
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(every: int, overrides: list[str]) -> dict:
    import torch
    import torch.distributed as dist
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from flopsweep.backends import build_trainer
    from flopsweep.gc_policy import GarbageCollection
    from flopsweep.layout import Layout
    from flopsweep.plan import Environment, plan
    from flopsweep.store import register_configs

    register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "gc", replace=True)
    OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: None, replace=True)
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        composed = compose("config", overrides=[*overrides, "nproc_per_node=1", f"steps.gc_freq={every}"])
    cfg = plan(OmegaConf.to_object(composed), Environment.detect()).cfg
    from flopsweep.launch import rendezvous_port

    port = os.environ.get("MASTER_PORT") or str(rendezvous_port())  # a free port, not a fixed one
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    os.environ.setdefault("DS_ACCELERATOR", cfg.device)
    device = torch.device("cuda", 0) if cfg.device == "cuda" else torch.device("cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)
    trainer = build_trainer(cfg, device, Layout())
    gen = torch.Generator().manual_seed(0)
    shape = (cfg.batch.micro_batch_size, cfg.model.seq_len + 1)
    batches = [torch.randint(0, cfg.model.vocab_size, shape, generator=gen).to(device)]
    pauses: list[tuple[int, float]] = []
    began: dict[str, float] = {}

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            began["t"] = time.perf_counter()
        else:
            pauses.append((info["generation"], time.perf_counter() - began["t"]))

    steps = []
    with GarbageCollection(every) as collector:
        for i in range(45):
            if i == 5:
                gc.callbacks.append(seen)
            start = time.perf_counter()
            trainer.step(batches)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            steps.append(time.perf_counter() - start)
            collector.step_done()
    gc.callbacks.remove(seen)
    dist.destroy_process_group()
    measured = sorted(steps[5:])
    return {
        "gc_freq": every,
        "overrides": overrides,
        "collections": len(pauses),
        "by_gen": {g: sum(1 for p in pauses if p[0] == g) for g in (0, 1, 2)},
        "pause_ms_total": round(1000 * sum(p[1] for p in pauses), 1),
        "pause_ms_max": round(1000 * max([p[1] for p in pauses] or [0.0]), 1),
        "step_ms_median": round(1000 * measured[len(measured) // 2], 1),
        "step_ms_sum": round(1000 * sum(measured), 1),
    }


if __name__ == "__main__":
    if len(sys.argv) < 2 or not sys.argv[1].isdigit():
        sys.exit("usage: python benchmarks/gc_steps.py GC_FREQ [OVERRIDES...]  (GC_FREQ: 0 = automatic)")
    print(json.dumps(main(int(sys.argv[1]), sys.argv[2:])))
