"""What offload puts in host memory, per rank, before anything runs: :func:`offload_host_bytes`
(a lower bound, which :func:`flopsweep.plan.resolve` checks against the host's memory on every
device) and :func:`offload_host_held_bytes` (times what the H200's offloading runs held,
:data:`OFFLOAD_HOST_HELD`, which the launch refuses a run by against the free host memory).
Each backend's share is its spec's (:meth:`flopsweep.backend_specs.BackendSpec.host_bytes`); the
saved activations of ``activation_checkpointing=offload`` are
:func:`flopsweep.activation_memory.activation_host_bytes`. Torch-free; :mod:`flopsweep.memory`
re-exports every name.
"""

from __future__ import annotations

from typing import Any

from flopsweep.activation_memory import activation_host_bytes
from flopsweep.backend_specs import BACKEND_SPECS
from flopsweep.layout import Layout
from flopsweep.models import family


def offload_host_bytes(cfg: Any, layout: Layout) -> int:
    """One rank's bytes that offload puts in host memory (0 without offload), a lower bound:

    - FSDP2 ``backend.cpu_offload``: the rank's shard of the fp32 weights, their gradients and
      AdamW's two moments, ``16 P / W`` (``W = layout.dp_shard``);
    - DeepSpeed ``backend.offload_optimizer=cpu``: fp32 master weights, fp32 gradients and the two
      moments, ``16 P / W`` (``W = layout.dp``), and ``offload_param=cpu`` the 16-bit weights, ``2 P / W``:
      the per-rank multipliers of DeepSpeed's own ``estimate_zero3_model_states_mem_needs`` with
      ``zero_init`` (``16`` and ``18 P`` per node of one GPU), without its 1.5 buffer factor;
    - ``nvme``: nothing here (the bytes go to the drive; its pinned staging buffers are not counted);
    - ``activation_checkpointing=offload``: the saved activations (:func:`activation_host_bytes`).

    Args:
        cfg: a ``RunConfig``; layout: the run's parallel degrees.
    """
    n_params = family(cfg.model).n_params(cfg.model)
    return BACKEND_SPECS[cfg.backend.name].host_bytes(cfg.backend, n_params, layout) + activation_host_bytes(
        cfg, layout
    )


OFFLOAD_HOST_HELD = {name: spec.host_held for name, spec in BACKEND_SPECS.items() if spec.host_held != 1.0}
"""How much more host memory an offloading run held than :func:`offload_host_bytes` counts (the
lower bound validation refuses at), by backend (:attr:`flopsweep.backend_specs.BackendSpec.host_held`),
measured on the H200 host (125.8 GiB usable, 16 cores), bf16, Llama 3.1 8B's width, micro batch 1,
one rank (``benchmarks/results/h200/frontier/``):

- FSDP2 ``cpu_offload``: the host trace peaked at 117 GiB at 28 blocks (106.7 counted) and 120 GiB at
  29 (110.0): 1.09-1.10x (``fsdp-full-offload-host-memory.txt``);
- ZeRO-3 ``offload_optimizer=cpu``: 26 blocks (6.72 B, 100.1 GiB counted) trained and 27 (6.94 B,
  103.4 GiB) was killed by the OOM killer, so it held between 125.8 / 103.4 = 1.22x and
  125.8 / 100.1 = 1.26x (``zero3-full-offload-25.log``, ``zero3-full-offload-27/``); DeepSpeed's own
  ``estimate_zero3_model_states_mem_needs`` allows 1.5x (its ``additional_buffer_factor``).

The CUDA context, the libraries, the first copy of the model and pinned staging buffers, which the
count leaves out. The launch refuses by it (:func:`offload_host_held_bytes`, against the free host
memory: ``flopsweep.job.hostcheck``); validation, against the host's total, by the lower bound."""


def offload_host_held_bytes(cfg: Any, layout: Layout) -> int:
    """One rank's host memory an offloading run is expected to hold: :func:`offload_host_bytes`
    times :data:`OFFLOAD_HOST_HELD` of its backend (0 without offload). An estimate from one host's
    runs: the launch refuses a run whose estimate exceeds the free host memory
    (:func:`flopsweep.job.check_free_host_memory`)."""
    return int(offload_host_bytes(cfg, layout) * BACKEND_SPECS[cfg.backend.name].host_held)
