"""The step time ``activation_checkpointing=offload`` adds: every block's saved activations copied to the
host in forward and back in backward, over the host link (:func:`transfer`). Torch-free.

torch's ``offload_wrapper`` (``autograd.graph.save_on_cpu(pin_memory=True)``) copies each saved tensor
into pinned host memory (``copy_(non_blocking=True)``) and back (``.to(device, non_blocking=True)``) on
the current stream, the compute stream: the copies queue between the block's kernels, so the prediction
counts them on top of the compute (not overlapped with it; the collectives, on their own streams, may
overlap them as they overlap the compute). The bytes:
:func:`flopsweep.activation_memory.activation_host_bytes` per micro batch (``tokens l a / (tp cp)``, what
``none`` keeps on the device), each micro batch of the step copied once each way. The link:
:data:`HOST_LINKS` by GPU kind, per direction, times :data:`ASSUMED_HOST_SHARE`; nothing in the shipped
records measured it (no ``offload`` record).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from flopsweep.text import figure

HOST_POLICIES = ("offload",)
"""The policies whose step is a sibling's (:data:`flopsweep.forecast.SIBLING_POLICIES`: the same FLOPs) plus
the host copies of their saved activations (:func:`transfer`): a record of the policy itself has them."""

ASSUMED_HOST_SHARE = 0.8
"""The share of the host link's datasheet figure per direction that pinned copies are assumed to reach
(CUDA's bandwidthTest on PCIe Gen5 x16 hosts: about 50-55 of 64 GB/s): an assumption, not measured here."""


@dataclass(frozen=True)
class HostLink:
    """One GPU kind's link to its host."""

    gbps: float
    """GB/s per direction (half the datasheet's bidirectional figure)."""
    name: str
    """``PCIe Gen5 x16``, ``NVLink-C2C``."""


_GEN5 = HostLink(64.0, "PCIe Gen5 x16")
_GEN4 = HostLink(32.0, "PCIe Gen4 x16")
_GEN3 = HostLink(16.0, "PCIe Gen3 x16")
HOST_LINKS: tuple[tuple[tuple[str, ...], HostLink], ...] = (
    (("gh200", "gb200", "gb300"), HostLink(450.0, "NVLink-C2C")),  # 900 GB/s CPU-GPU (datasheets)
    (("h100", "h200", "h800", "h20", "b200", "b100", "mi300", "mi325"), _GEN5),
    (("a100", "a800", "a10", "a30", "a40", "l4", "l40", "rtx 6000", "rtx-6000", "mi250"), _GEN4),
    (("v100", "t4"), _GEN3),
)
"""The host link per GPU kind, the first whose word the device name contains (lowercase): the vendors'
datasheets (H100/H200/B200 SXM and PCIe, MI300X: PCIe Gen5 x16, 128 GB/s both ways; A100, L4, L40S:
Gen4, 64; V100, T4: Gen3, 32; GH200/GB200: NVLink-C2C, 900). Another name or none: Gen5 assumed."""


def host_link(device_name: str | None) -> tuple[HostLink, bool]:
    """``(link, assumed)``: ``device_name``'s host link (:data:`HOST_LINKS`), ``assumed`` True where the
    name says no kind the table knows (PCIe Gen5 x16 taken)."""
    name = " ".join((device_name or "").lower().split())
    for words, link in HOST_LINKS:
        if any(w in name for w in words):
            return link, False
    return _GEN5, True


def step_bytes(cfg: Any, layout: Any, grad_accum: int) -> int:
    """Bytes one rank copies to the host per optimizer step (the same come back): the policy's host
    activations of one micro batch (:func:`flopsweep.activation_memory.activation_host_bytes`, for the
    pipeline's in-flight micro batches) per micro batch, times the micro batches of the step
    (``grad_accum``; a pipeline's ``pp_microbatches`` of each). 0 for a policy that keeps its
    activations on the device."""
    from flopsweep.activation_memory import activation_host_bytes, in_flight_microbatches

    held = activation_host_bytes(cfg, layout)
    if held <= 0:
        return 0
    in_flight, _ = in_flight_microbatches(cfg, layout)
    per_step = (cfg.parallel.pp_microbatches or layout.pp) if layout.pp > 1 else 1
    return held * per_step * max(1, int(grad_accum)) // in_flight


@dataclass(frozen=True)
class Transfer:
    """The host copies of one step."""

    seconds: float
    """Both directions, s: ``2 x bytes / (gbps x share)``."""
    bytes: int
    """One direction's bytes per rank per step."""
    said: str
    """What a prediction's ``source`` adds."""


def transfer(cfg: Any, layout: Any, grad_accum: int, device_name: str | None) -> Transfer | None:
    """The step time the policy's host copies add on ``device_name`` (:func:`step_bytes` to the host and
    back at :func:`host_link`'s figure x :data:`ASSUMED_HOST_SHARE`, serial on the compute stream), or None
    for a policy that puts nothing on the host."""
    moved = step_bytes(cfg, layout, grad_accum)
    if moved <= 0:
        return None
    link, assumed = host_link(device_name)
    gbps = link.gbps * ASSUMED_HOST_SHARE
    seconds = 2 * moved / (gbps * 1e9)
    guess = " (assumed: the GPU's name says no host link)" if assumed else ""
    said = (
        f"activation_checkpointing={cfg.activation_checkpointing.name}: + {figure(seconds, 4)} s of host "
        "copies, "
        f"{figure(moved / 2**30)} GiB each way at {figure(ASSUMED_HOST_SHARE, 6)} x {link.name} "
        f"{figure(link.gbps, 6)} GB/s{guess}, "
        "not overlapped (save_on_cpu copies on the compute stream; docs/prediction.md)"
    )
    return Transfer(seconds if math.isfinite(seconds) else 0.0, moved, said)


def base_policy(picked: Any, sibling: Any, near: Any, neighbour: Any, probed: Any) -> str | None:
    """The checkpointing policy the predicted step was measured under: the calibration record's (or its
    policy sibling's, ``sibling[0]``), the nearest record's (``neighbour.record``); None for a probe (it ran
    the policy) and ``""`` for a FLOPs estimate (no policy ran)."""
    from flopsweep.record import value_at

    if probed:
        return None
    if picked:
        ran = value_at(picked[1], ("config", "activation_checkpointing", "name"))
        return sibling[0] if sibling is not None else str(ran or "none")
    if near is not None and neighbour is not None:
        return str(value_at(neighbour.record, ("config", "activation_checkpointing", "name")) or "none")
    return ""


def with_host_copies(
    cfg: Any, layout: Any, grad_accum: int, compute: Any, base: str | None, device_name: str | None
) -> Any:
    """``compute`` (a :class:`flopsweep.predict.Compute`) plus the host copies of a :data:`HOST_POLICIES`
    policy (:func:`transfer`, added to ``compute_s``: on the compute stream, and to ``source``) where the step
    it came from did not run them (``base``, :func:`base_policy`, another policy or ``""``); else as it is,
    and on the CPU (``device=cpu``: the saved tensors are in host memory already, no link is crossed)."""
    name = cfg.activation_checkpointing.name
    if base is None or base == name or name not in HOST_POLICIES or getattr(cfg, "device", "cuda") == "cpu":
        return compute
    got = transfer(cfg, layout, grad_accum, device_name)
    if got is None:
        return compute
    return dataclasses.replace(
        compute, compute_s=compute.compute_s + got.seconds, source=f"{compute.source}; {got.said}"
    )
