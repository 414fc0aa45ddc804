"""The collectives of one DeepSpeed step on the layer probe's shallow copies, unscaled and scaled, against
the model's own (docs/prediction-deepspeed.md).

Two ranks on this machine (gloo on the CPU, NCCL with ``device=cuda``) build the run at the probe's
depths (``layer_probe.run_depths``) with the run's DeepSpeed sizes as they are and as the probe scales
them (``layer_probe.scaled_window``), and the model at its full depth; each runs 4 steps, and the 4th
step's calls and elements of every collective of DeepSpeed's comm backend are counted. Printed as JSON
(stdout): per variant ``{collective: [calls, elements]}``, and the sizes. Counts, not times: the same on
a loaded machine. The model at full depth is built, so give it a model that fits::

    python benchmarks/deepspeed_copies.py device=cpu precision=fp32 model=llama-tiny model.n_layer=12 \\
        backend=zero3 backend.stage3_max_reuse_distance=1.85e6 backend.stage3_prefetch_bucket_size=9.2e5
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

DEADLINE_S = 600
"""The ranks are stopped after this many seconds."""
COUNTED = (
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_reduce",
    "all_gather",
    "broadcast",
    "reduce",
)
"""DeepSpeed comm backend methods counted (``deepspeed.comm.comm.cdb``)."""


def _plan(overrides: list[str]) -> Any:
    """The run's validated plan, as run.py's Hydra composes it from conf/."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from flopsweep.checkpointing import normalize_overrides
    from flopsweep.plan import plan
    from flopsweep.store import register_configs

    register_configs()
    OmegaConf.register_new_resolver("flopsweep_uid", lambda: "copies", replace=True)
    OmegaConf.register_new_resolver("flopsweep_batch", lambda fail_fast: None, replace=True)
    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base=None):
        composed = compose(
            config_name="config", overrides=normalize_overrides(["nproc_per_node=2", *overrides])
        )
    return plan(OmegaConf.to_object(composed))


def _rank(local_rank: int, overrides: list[str], port: int, out: Any) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(local_rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
    )
    p = _plan(overrides)
    cfg, layout = p.cfg, p.layout
    device = torch.device("cuda", local_rank) if p.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=local_rank, world_size=2)
    import deepspeed.comm.comm as ds_comm

    from flopsweep import layer_probe
    from flopsweep.backends import build_trainer
    from flopsweep.worker import make_batches

    layers = layer_probe.run_depths(cfg)
    windows = layer_probe.run_deepspeed_windows(cfg, layout, device.type, layers)
    variants = [(f"unscaled {n}", n, None) for n in layers]
    variants += [(f"scaled {n}", n, windows["copies"][i]) for i, n in enumerate(layers)]
    variants.append((f"model {cfg.model.n_layer}", cfg.model.n_layer, None))
    result: dict[str, Any] = {"sizes": windows}
    for name, depth, sizes in variants:
        run = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, n_layer=depth))
        if sizes is not None:
            run = dataclasses.replace(run, backend=dataclasses.replace(cfg.backend, **sizes))
        trainer = build_trainer(run, device, layout)
        micro = make_batches(run, layout, local_rank, device)
        counts: dict[str, list[int]] = {}
        for _ in range(4):
            counts.clear()
            backend = ds_comm.cdb
            real = {m: getattr(backend, m) for m in COUNTED}
            for m in COUNTED:
                setattr(backend, m, _counting(m, real[m], counts))
            try:
                trainer.step(micro)
            finally:
                for m in COUNTED:
                    setattr(backend, m, real[m])
        result[name] = counts
        trainer.engine.destroy()
        del trainer
    if local_rank == 0:
        out.put(result)
    dist.destroy_process_group()


def _counting(name: str, call: Any, counts: dict[str, list[int]]) -> Any:
    def counted(*args: Any, **kwargs: Any) -> Any:
        first = args[0] if args else kwargs.get("output_tensor", kwargs.get("tensor"))
        tensors = first if isinstance(first, list | tuple) else [first]
        entry = counts.setdefault(name, [0, 0])
        entry[0] += 1
        entry[1] += sum(t.numel() for t in tensors if hasattr(t, "numel"))
        return call(*args, **kwargs)

    return counted


def main(overrides: list[str]) -> None:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    procs = mp.start_processes(_rank, args=(overrides, port, out), nprocs=2, join=False, start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    while not procs.join(timeout=5):
        if time.monotonic() > deadline:
            for p in procs.processes:
                p.kill()
            raise SystemExit(f"the ranks did not finish within {DEADLINE_S} s")
    result = out.get()
    print(json.dumps(result["sizes"]))
    for line in table(result):
        print(line)


def table(result: dict[str, Any]) -> list[str]:
    """One line per collective and measure (calls, elements): each variant's count in the 4th step,
    the copies' extrapolated to the model's depth as the probe extrapolates a time
    (``c1 + (n - l1) (c2 - c1) / (l2 - l1)``), and the model's."""
    names = [k for k in result if k != "sizes"]
    model = next(k for k in names if k.startswith("model "))
    n = int(model.split()[1])
    lines = []
    for collective in sorted({c for k in names for c in result[k]}):
        for i, what in enumerate(("calls", "elements")):
            cells = []
            for kind in ("unscaled", "scaled"):
                pairs = [
                    (int(k.split()[1]), result[k].get(collective, [0, 0])[i])
                    for k in names
                    if k.startswith(kind)
                ]
                if len(pairs) == 2:
                    (l1, c1), (l2, c2) = pairs
                    cells.append(f"{kind} {c1}, {c2} -> {c1 + (n - l1) * (c2 - c1) / (l2 - l1):.4g}")
            lines.append(
                f"{collective} {what}: "
                + "; ".join(cells)
                + f"; model {result[model].get(collective, [0, 0])[i]}"
            )
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
