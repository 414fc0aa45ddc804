"""The host-device copies of the model states that FSDP2's ``CPUOffloadPolicy`` (``backend.cpu_offload``)
makes each step, which the compute probe and the FLOPs estimate do not run. Torch-free; bytes per rank,
seconds.

Under the policy every sharded state lives on the host (fp32 weights, gradients, AdamW moments) and the
optimizer steps there. FSDP2 (``torch/distributed/fsdp/_fully_shard``, read in torch 2.13; the records ran
2.11):

- each all-gather copies the rank's fp32 shard to the GPU before casting it to the compute dtype
  (``FSDPParam.all_gather_inputs``: ``sharded_param_data.to(self.device, non_blocking=True)``, then
  ``_to_dtype_if_needed``): 4 bytes a parameter, at each unshard, so once per micro batch in forward and
  again in backward with ``reshard_after_forward`` (as :meth:`flopsweep.backend_specs.FSDPSpec.collectives`
  counts the all-gathers; under a pipeline a stage gathers once per step);
- each reduce-scatter's fp32 output is copied to the host (``foreach_reduce``: ``new_sharded_grad.to(
  torch.device("cpu"), non_blocking=...)``): 4 bytes a parameter, once per step (the micro batches before
  the last accumulate unsharded on the GPU, no gradient sync).

The link: :func:`flopsweep.offload_time.host_link`'s datasheet figure per direction (PCIe Gen5 x16, 64 GB/s,
for an H100 or H200) at :data:`flopsweep.offload_time.ASSUMED_HOST_SHARE` (0.8: CUDA's bandwidthTest reaches
50-55 GB/s of pinned copies on such hosts). **Serial**: the copies are counted on top of the compute and of
each other. They run on FSDP2's own streams (the all-gather copy-in stream, the reduce-scatter stream), so
they could hide behind the compute, but the two committed probe-predicted records of Llama 3.2 1B FSDP2
``cpu_offload`` on one H100 (``h100/session39/probe/p2b/0``, ``check/v2/0``) measured 0.41-0.47 s over the
probe's compute and host optimizer, more than these copies (0.29 s) even serial: the serial sum is the
figure the records do not contradict (docs/prediction-host-optimizer.md, "FSDP2's `cpu_offload` copies").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from flopsweep.backend_specs import backend_spec
from flopsweep.offload_time import ASSUMED_HOST_SHARE, host_link
from flopsweep.text import figure
from flopsweep.workload import Compute, Workload

SHARD_BYTES = 4
"""Bytes a parameter each copy moves: the fp32 shard to the GPU, the fp32 reduced gradient to the host."""

RAN_WITHOUT = ("probe", "flops")
"""The :attr:`flopsweep.workload.Compute.kind` whose compute ran no state copies: the compute probe times one
block under autocast on the GPU with its optimizer on the host apart (:func:`flopsweep.compute_probe.
casts_weights`), the FLOPs estimate counts none. A record of the run's own kind of step (``calibration``,
``nearest``: :data:`flopsweep.identity.HOST_OFFLOAD` keeps host and GPU steps apart) or the layer probe
(``layers``, FSDP2's own blocks) holds them already."""


def step_bytes(backend: Any, w: Workload) -> tuple[float, float]:
    """``(to the GPU, to the host)``: the bytes one rank copies per optimizer step under a backend whose
    states live on the host (:attr:`flopsweep.backend_specs.Offload.states`; ``backend`` is ``cfg.backend``
    or a record's ``config.backend``), ``(0, 0)`` for any other: ``4 P passes m`` and ``4 P``, ``P`` the
    parameters of the rank's shard (``n_params / (tp pp) / (dp_shard cp)``), ``passes`` 2 with
    ``reshard_after_forward`` else 1, ``m`` the micro batches of the step (1 under a pipeline)."""
    spec = backend_spec(w.backend)
    if spec is None or not spec.offload(backend).states:
        return 0.0, 0.0
    shard = w.n_params / w.weight_split / w.state_shards
    passes = 2 if w.reshard_after_forward else 1
    micro = w.grad_accum if w.degree("pp") == 1 else 1
    return SHARD_BYTES * shard * passes * micro, SHARD_BYTES * shard


def with_state_copies(
    backend: Any, w: Workload, compute: Compute, device_name: str | None, device: str = "cuda"
) -> Compute:
    """``compute`` plus the state copies of :func:`step_bytes` at the host link (module docstring), added
    to ``compute_s`` and said at the end of ``source`` (``backend.cpu_offload=true: + 0.2896 s of state
    copies, 9.21 GiB to the GPU and 4.6 GiB back at 0.8 x PCIe Gen5 x16 64 GB/s, serial (...)``), where its
    :attr:`~flopsweep.workload.Compute.kind` is one of :data:`RAN_WITHOUT`; else ``compute`` as it is, and on
    the CPU (``device=cpu``: no link is crossed)."""
    to_gpu, to_host = step_bytes(backend, w)
    if compute.kind not in RAN_WITHOUT or device == "cpu" or to_gpu + to_host <= 0:
        return compute
    link, assumed = host_link(device_name)
    seconds = (to_gpu + to_host) / (ASSUMED_HOST_SHARE * link.gbps * 1e9)
    guess = " (assumed: the GPU's name says no host link)" if assumed else ""
    said = (
        f"backend.cpu_offload=true: + {figure(seconds, 4)} s of state copies, "
        f"{figure(to_gpu / 2**30)} GiB of fp32 shards to the GPU and {figure(to_host / 2**30)} GiB of "
        f"gradients back at {figure(ASSUMED_HOST_SHARE)} x {link.name} {figure(link.gbps)} GB/s{guess}, "
        "serial (docs/prediction-host-optimizer.md)"
    )
    return dataclasses.replace(
        compute, compute_s=compute.compute_s + seconds, source=f"{compute.source}; {said}"
    )
