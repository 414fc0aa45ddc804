"""Each GPU's datasheet memory bandwidth (HBM, or GDDR on the L4, L40, L40S, A10 and RTX 6000 Ada), the
:attr:`flopsweep.peak_row.PeakRow.memory_tbps` of the peak table's rows, by row name (pure Python, imports
nothing of flopsweep). The optimizer step (AdamW) is bound by it: :func:`flopsweep.predict.optimizer_rate`
scales a record's seconds per parameter by its GPU's bandwidth over the target's.

Units: TB/s (1e12 bytes per second) of ONE device, the vendor's peak figure. A row whose figure
depends on the memory size (A100 40/80 GB, GH200 96 GB HBM3 / 144 GB HBM3e) or, at one size, on the
form (A100 80GB: SXM4 2,039 GB/s, PCIe 1,935) keys it by the nominal GB, ``"<GB> pcie"`` for the card;
a row of one figure keys it ``""``. Rows NVIDIA publishes no datasheet for (A10G, A800, H800) have
none: a prediction on them is left unscaled and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Bandwidth:
    """A row's datasheet memory bandwidth.

    Attributes:
        tbps: ``""`` (every size and form), ``"<GB>"`` or ``"<GB> pcie"`` -> TB/s of one device
            (module docstring).
        source: the datasheet's words.
    """

    tbps: Mapping[str, float]
    source: str

    def at(self, sizes: tuple[float, ...], pcie: bool) -> float | None:
        """TB/s of a device whose name gives the memory ``sizes`` (nominal GB,
        :func:`flopsweep.peaks.memory_sizes_gb`) and says ``pcie`` or not; None where the figure
        depends on a size the name does not give (``A100`` alone)."""
        for size in sizes:
            for key in ([f"{size:g} pcie"] if pcie else []) + [f"{size:g}"]:
                if key in self.tbps:
                    return self.tbps[key]
        return self.tbps.get("")


def _one(tbps: float, source: str) -> Bandwidth:
    return Bandwidth(MappingProxyType({"": tbps}), source)


_A100 = Bandwidth(
    MappingProxyType({"40": 1.555, "80": 2.039, "80 pcie": 1.935}),
    "NVIDIA A100 datasheet: GPU memory bandwidth 40GB 1,555 GB/s; 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s",
)

BANDWIDTH: Mapping[str, Bandwidth] = MappingProxyType(
    {
        "H100 SXM": _one(3.35, "NVIDIA H100 datasheet, SXM: GPU memory bandwidth 3.35TB/s (HBM3)"),
        "H100 PCIe": _one(2.0, "NVIDIA H100 datasheet, PCIe: GPU memory bandwidth 2TB/s"),
        "H100 NVL": _one(3.9, "NVIDIA H100 datasheet, NVL: GPU memory bandwidth 3.9TB/s"),
        "H200 SXM": _one(4.8, "NVIDIA H200 datasheet, SXM: GPU memory bandwidth 4.8TB/s (HBM3e)"),
        "H200 NVL": _one(4.8, "NVIDIA H200 datasheet, NVL: GPU memory bandwidth 4.8TB/s"),
        "GH200": Bandwidth(
            MappingProxyType({"96": 4.0, "480": 4.0, "144": 4.9}),
            "NVIDIA GH200 datasheet: 96GB HBM3 4TB/s, 144GB HBM3e 4.9TB/s (the 480GB superchip: 96GB HBM3)",
        ),
        "B200": _one(8.0, "NVIDIA HGX B200 spec: memory bandwidth 64TB/s over 8 GPUs, 8TB/s per GPU"),
        "GB200": _one(8.0, "NVIDIA GB200 NVL72 spec: HBM3e bandwidth 576TB/s over 72 GPUs, 8TB/s per GPU"),
        "A100": _A100,
        "A10": _one(0.6, "NVIDIA A10 datasheet: GPU memory bandwidth 600 GB/s (GDDR6)"),
        "L4": _one(0.3, "NVIDIA L4 datasheet: GPU memory bandwidth 300GB/s (GDDR6)"),
        "L40": _one(0.864, "NVIDIA L40 datasheet: memory bandwidth 864GB/s (GDDR6)"),
        "L40S": _one(0.864, "NVIDIA L40S datasheet: memory bandwidth 864GB/s (GDDR6)"),
        "RTX 6000 Ada": _one(0.96, "NVIDIA RTX 6000 Ada datasheet: memory bandwidth 960 GB/s (GDDR6)"),
        "V100 SXM2": _one(0.9, "NVIDIA V100 datasheet, SXM2: memory bandwidth 900 GB/s (HBM2)"),
        "V100 PCIe": _one(0.9, "NVIDIA V100 datasheet, PCIe: memory bandwidth 900 GB/s (HBM2)"),
        "V100S PCIe": _one(1.134, "NVIDIA V100 datasheet, V100S PCIe: memory bandwidth 1,134 GB/s (HBM2)"),
        "MI300X": _one(5.3, "AMD Instinct MI300X spec: peak memory bandwidth 5.3 TB/s (HBM3)"),
        "MI325X": _one(6.0, "AMD Instinct MI325X spec: peak memory bandwidth 6 TB/s (HBM3E)"),
    }
)
"""Row name -> :class:`Bandwidth`; a row absent (A10G, A800, H800 SXM) has no published figure."""
