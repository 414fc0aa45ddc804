"""The interconnect probe: bus bandwidth of the run's collectives over the run's ranks.

Each rank calls :func:`probe_interconnect` next to the GEMM probe (:mod:`flopsweep.matmul`), before
warm-up, so the figures describe the links the run uses and not the steps it measures. The record
keeps rank 0's list as ``system.interconnect``; :mod:`flopsweep.predict` turns it into step time.

Bus bandwidth follows nccl-tests (``doc/PERFORMANCE.md``): ``algbw = bytes / time`` with ``bytes``
the full buffer (the gathered output of an all-gather, the input of a reduce-scatter or an
all-reduce), and ``busbw = algbw x (n-1)/n`` for all-gather and reduce-scatter, ``x 2(n-1)/n`` for
all-reduce, so that busbw compares with the link's speed whatever the rank count.
"""

from __future__ import annotations

import time
from typing import Any

from flopsweep.steptime import COLLECTIVES, busbw_factor

MAX_BYTES = {"cuda": 1 << 30, "cpu": 16 << 20}
"""Largest probed buffer per device type: 1 GiB on a GPU (a 70B model's layer in bf16 is ~1.7 GB),
16 MiB on the CPU, where gloo moves a few GB/s at best."""
MIN_BYTES = 1 << 12
"""Smallest probed buffer (4 KiB)."""
REPEATS = 3
"""Timed calls per collective and size, after one untimed call (NCCL's communicator set-up)."""


def message_sizes(*, n_params: int, n_layer: int, param_bytes: int, device_type: str) -> list[int]:
    """The buffers to probe, bytes: one layer's share of the parameters in the run's parameter
    dtype (what FSDP2 and ZeRO-3 gather per block), and an eighth of it; each rounded down to a
    multiple of 1 KiB and clipped to :data:`MIN_BYTES` .. :data:`MAX_BYTES`."""
    block = n_params // max(1, n_layer) * param_bytes
    cap = MAX_BYTES.get(device_type, MAX_BYTES["cpu"])
    sizes = {max(MIN_BYTES, min(cap, size) // 1024 * 1024) for size in (block // 8, block)}
    return sorted(sizes)


def probe_interconnect(device: Any, dtype: Any, sizes: list[int]) -> list[dict[str, Any]]:
    """All-gather, reduce-scatter and all-reduce of each size over every rank of the default process
    group; collective: every rank must call it. One rank: ``[]`` (no link to measure).

    Returns:
        ``[{collective, bytes, busbw_gbps, time_s, ranks, ran}]``, the same list on every rank: each
        call's time is the slowest rank's mean over :data:`REPEATS` calls. ``ran`` names what
        executed: a backend without ``reduce_scatter_tensor`` (gloo) runs an all-reduce of the whole
        buffer instead, recorded as ``ran: "all_reduce"`` with the all-reduce's bus bandwidth (the
        link's speed, which is what the model uses).
    """
    import torch.distributed as dist

    n = dist.get_world_size()
    if n == 1:
        return []
    out = []
    for size in sizes:
        for collective in COLLECTIVES:
            seconds, ran = _time_collective(collective, size, n, device, dtype)
            nbytes = size // (_itemsize(dtype) * n) * _itemsize(dtype) * n
            bw = nbytes * busbw_factor(ran, n) / seconds / 1e9 if seconds > 0 else None
            out.append(
                {
                    "collective": collective,
                    "bytes": nbytes,
                    "busbw_gbps": bw,
                    "time_s": seconds,
                    "ranks": n,
                    "ran": ran,
                }
            )
    if getattr(device, "type", str(device)) == "cuda":  # give the buffers back before the model is built
        import torch

        torch.cuda.empty_cache()
    return out


def _itemsize(dtype: Any) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size()


def _time_collective(collective: str, size: int, n: int, device: Any, dtype: Any) -> tuple[float, str]:
    """Mean seconds of one call (slowest rank) and the collective that ran."""
    import torch
    import torch.distributed as dist

    chunk = max(1, size // (_itemsize(dtype) * n))
    full = torch.ones(chunk * n, device=device, dtype=dtype)
    part = torch.ones(chunk, device=device, dtype=dtype)
    calls = {
        "all_gather": lambda: dist.all_gather_into_tensor(full, part),
        "reduce_scatter": lambda: dist.reduce_scatter_tensor(part, full),
        "all_reduce": lambda: dist.all_reduce(full),
    }
    ran = collective
    try:
        calls[ran]()
    except (RuntimeError, NotImplementedError, ValueError):
        if collective != "reduce_scatter":
            raise
        ran = "all_reduce"  # gloo has no reduce_scatter_tensor: the honest stand-in, recorded
        calls[ran]()
    _sync(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(REPEATS):
        calls[ran]()
    _sync(device)
    mine = torch.tensor([(time.perf_counter() - start) / REPEATS], dtype=torch.float64, device=device)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return float(mine.item()), ran


def _sync(device: Any) -> None:
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        torch.cuda.synchronize(device)
