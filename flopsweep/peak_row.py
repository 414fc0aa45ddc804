"""One row of the GPU table (:data:`flopsweep.peaks.PEAK_TABLE`): :class:`PeakRow`, the record of one
accelerator variant (its dense peaks per precision, memory by nominal size, compute capability, vendor, the
link between a node's GPUs, memory bandwidth, and the datasheet they come from), and :func:`peak_row`, the
builder the table's rows are written with. Units and sources of the figures: :mod:`flopsweep.peaks`'s
docstring. Pure Python, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from flopsweep.memory_bandwidth import BANDWIDTH, Bandwidth
from flopsweep.node_links import NodeLink


@dataclass(frozen=True)
class PeakRow:
    """One device variant: dense peaks and where they come from.

    Attributes:
        name: canonical variant name, e.g. ``"H100 SXM"``.
        aliases: normalised device names (see :func:`flopsweep.peaks.normalize_device_name`) that
            denote this variant.
        peaks: precision -> dense peak TFLOP/s of one device.
        url: vendor datasheet / specification page the numbers come from.
        source: short note: which document, and how a printed sparse figure was halved.
        capability: ``(major, minor)``, what ``torch.cuda.get_device_capability()`` reports on
            the device (see "Compute capability" in :mod:`flopsweep.peaks`); ``plan=true
            plan_gpu=`` plans with it (:func:`flopsweep.job.plan_environment`).
        vendor: ``"nvidia"`` (CUDA) or ``"amd"`` (ROCm, where torch's CUDA API runs on HIP and
            NVIDIA-only libraries such as cuDNN do not exist).
        memory_gib: ``{nominal GB: GiB}``: the size the vendor names the device by (``H100 80GB``,
            ``A100-SXM4-40GB``) and its memory in GiB as the driver reports it (``nvidia-smi``'s
            MiB / 1024: an H100's 80 GB is 81,559 MiB, 79.6 GiB; AMD: the datasheet's GB). A
            device sold in several sizes (A100 and A800 40/80 GB, V100 16/32 GB) has one entry
            per size, and ``plan_gpu`` must name one (``A100-80GB``).
        links: the link between the GPUs of a node, one :class:`flopsweep.node_links.NodeLink` per
            form factor the row covers (GB/s per GPU and direction, half the datasheet's
            bidirectional figure, and the datasheet's words), the first assumed where a device name
            does not say its form (``A100-80GB``: SXM4); :func:`flopsweep.peaks.node_link`.
        memory_tbps: the datasheet memory bandwidth (:mod:`flopsweep.memory_bandwidth`), None where none
            is published; :func:`flopsweep.predict.memory_tbps` reads a device name's.
    """

    name: str
    aliases: tuple[str, ...]
    peaks: Mapping[str, float]
    url: str
    source: str
    capability: tuple[int, int]
    vendor: str = "nvidia"
    memory_gib: Mapping[float, float] = field(default_factory=lambda: MappingProxyType({}))
    links: tuple[NodeLink, ...] = ()
    memory_tbps: Bandwidth | None = None

    @property
    def nvlink_gbps(self) -> float | None:
        """NVLink bandwidth per GPU and direction, GB/s, of a row whose one form links a node's GPUs
        by NVLink (H100/H200 SXM and GH200 450, H800 200, B200 and GB200 900, V100 SXM2 150); a ring's
        bus bandwidth cannot exceed it. None for PCIe cards, AMD, and rows of several forms (A100,
        A800: SXM4 module and PCIe card), whose link :func:`flopsweep.peaks.node_link` picks by name."""
        one = self.links[0] if len(self.links) == 1 else None
        return one.gbps if one is not None and one.link == "NVLink" else None

    @property
    def bf16(self) -> bool:
        """Whether the device has bf16 tensor (matrix) cores: a bf16 peak in its row (NVIDIA from
        capability 8.0, CDNA3); not V100 (7.0), which torch runs bf16 on only by emulation."""
        return "bf16" in self.peaks


def peak_row(
    name: str,
    aliases: tuple[str, ...],
    capability: tuple[int, int],
    memory_gib: dict[float, float],
    url: str,
    source: str,
    vendor: str = "nvidia",
    links: tuple[NodeLink, ...] = (),
    **peaks: float,
) -> PeakRow:
    """A :class:`PeakRow` from keyword peaks (``bf16=989.4``: precision -> dense TFLOP/s of one device),
    ``memory_gib`` and the peaks made read-only (``MappingProxyType``), and ``memory_tbps`` looked up by
    ``name`` in :data:`flopsweep.memory_bandwidth.BANDWIDTH` (None where it has none)."""
    return PeakRow(
        name,
        aliases,
        MappingProxyType(dict(peaks)),
        url,
        source,
        capability,
        vendor,
        MappingProxyType(dict(memory_gib)),
        links,
        BANDWIDTH.get(name),
    )
