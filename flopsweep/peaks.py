"""The GPU table: one row per accelerator (dense peaks per precision, memory, compute capability,
the link between a node's GPUs), matched by exact device name (pure Python, no torch). Adding a GPU
is one :func:`flopsweep.peak_row.peak_row` (a :class:`~flopsweep.peak_row.PeakRow`) in
:data:`PEAK_TABLE`; the estimators read every figure from the row
(``plan_gpu``'s memory, :func:`flopsweep.gpu_memory.planned_gpu_bytes`;
:func:`flopsweep.predict.assumed_link`'s link in a node, :mod:`flopsweep.node_links`; MFU's peak,
:func:`peak_tflops`).

Units: every number here is TFLOP/s (1e12 floating-point operations per second, a
multiply-add counting 2) of ONE device, DENSE: vendor datasheets print the 2:4
structured-sparsity figure (marked ``*``) first or alone, and the dense figure is half
of it. No sparse number is stored.

Precisions (keys of :attr:`PeakRow.peaks`):

* ``"bf16"``, ``"fp16"``: tensor-core (matrix-core) rate with FP32 accumulate.
* ``"fp32"``: plain FP32 without TF32. On NVIDIA parts that is the CUDA-core (non
  tensor-core) rate, because flopsweep leaves ``torch.backends.cuda.matmul.allow_tf32``
  off. On AMD CDNA3 the FP32 GEMM runs on the matrix cores (MFMA F32, not the opt-in
  XF32), and AMD prints the same 163.4 for FP32 vector and FP32 matrix on MI300X/MI325X.
* ``"fp8"``: dense FP8 tensor-core rate; present only where the device has FP8 tensor
  cores (Ada, Hopper, Blackwell, CDNA3). ``"fp8-rowwise"`` is an alias (the GEMM runs at
  the same FP8 rate whatever the scaling recipe).

A precision a device has no tensor-core path for (bf16 on V100, fp8 on Ampere) is absent
from its row, so :func:`peak_tflops` answers ``None`` rather than a guess.

Compute capability (:attr:`PeakRow.capability`): NVIDIA's list "CUDA GPUs - Compute
Capability" (https://developer.nvidia.com/cuda-gpus): H100, H200, GH200, H800 9.0; B200,
GB200 10.0; A100, A800 8.0; A10, A10G 8.6; L4, L40, L40S, RTX 6000 Ada 8.9; V100, V100S 7.0.
AMD: torch on ROCm reports the GPU's architecture ``gfx<major><minor>`` as its capability;
MI300X and MI325X are gfx942 (ROCm's "GPU hardware specifications",
https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html), so 9.4. bf16 tensor cores
come with capability 8.0 (:attr:`PeakRow.bf16`; :func:`_check_table` holds the rows to it).

Matching: :func:`normalize_device_name` turns ``torch.cuda.get_device_name()`` into a
canonical spelling (case, vendor prefix, memory-size suffix, dashes), and that spelling
must equal one of a row's aliases EXACTLY. There is no substring matching, so "NVIDIA RTX
A1000" cannot take the A100 row, "NVIDIA A10" cannot take A100 or A10G, and "Tesla
V100-PCIE-16GB" gets the PCIe row (112 TFLOP/s fp16), not the SXM2 one (125).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from types import MappingProxyType

from flopsweep.node_links import (
    BRIDGE,
    INFINITY_FABRIC,
    PCIE,
    SXM4,
    NodeLinkOf,
    check_links,
    nvlink,
    pcie,
    resolve,
    taken_as,
)
from flopsweep.peak_row import PeakRow, peak_row

_HOPPER_SXM = dict(bf16=989.4, fp16=989.4, fp32=66.9, fp8=1978.9)
_HOPPER_NVL = dict(bf16=835.5, fp16=835.5, fp32=60.0, fp8=1670.5)
_AMPERE_GA100 = dict(bf16=312.0, fp16=312.0, fp32=19.5)
_CDNA3 = dict(bf16=1307.4, fp16=1307.4, fp32=163.4, fp8=2614.9)

_H100_URL = "https://www.nvidia.com/en-us/data-center/h100/"
_H200_URL = "https://www.nvidia.com/en-us/data-center/h200/"
_A100_URL = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_V100_URL = "https://www.nvidia.com/en-us/data-center/v100/"
_HGX_URL = "https://www.nvidia.com/en-us/data-center/hgx/"

PEAK_TABLE: tuple[PeakRow, ...] = (
    # --- Hopper -------------------------------------------------------------------------
    peak_row(
        "H100 SXM",
        ("h100", "h100 sxm", "h100 sxm5"),
        (9, 0),
        {80: 79.6},
        _H100_URL,
        "NVIDIA H100 datasheet, SXM: BF16/FP16 1,979*, FP8 3,958* (*sparse, halved), FP32 67 "
        "(66.9 = 132 SMs x 128 x 2 x 1.98 GHz)",
        **_HOPPER_SXM,
        links=(nvlink(900, "NVIDIA H100 datasheet, SXM: NVLink 900 GB/s"),),
    ),
    peak_row(
        "H100 PCIe",
        ("h100 pcie",),
        (9, 0),
        {80: 79.6},
        _H100_URL,
        "NVIDIA H100 datasheet, PCIe: BF16/FP16 1,513*, FP8 3,026* (*sparse, halved), FP32 51",
        bf16=756.5,
        fp16=756.5,
        fp32=51.0,
        fp8=1513.0,
        links=(pcie(5, "NVIDIA H100 datasheet, PCIe: PCIe Gen5 128 GB/s; " + BRIDGE.format(n=2)),),
    ),
    peak_row(
        "H100 NVL",
        ("h100 nvl",),
        (9, 0),
        {94: 93.6},
        _H100_URL,
        "NVIDIA H100 datasheet, NVL (94 GB, one GPU): BF16/FP16 1,671*, FP8 3,341* (*sparse, "
        "halved), FP32 60",
        **_HOPPER_NVL,
        links=(pcie(5, "NVIDIA H100 datasheet, NVL: PCIe Gen5 128 GB/s; " + BRIDGE.format(n=2)),),
    ),
    peak_row(
        "H200 SXM",
        ("h200", "h200 sxm"),
        (9, 0),
        {141: 140.4},
        _H200_URL,
        "NVIDIA H200 datasheet, SXM: BF16/FP16 1,979*, FP8 3,958* (*sparse, halved), FP32 67; "
        "the H100 SXM's compute with HBM3e",
        **_HOPPER_SXM,
        links=(nvlink(900, "NVIDIA H200 datasheet, SXM: NVLink 900 GB/s"),),
    ),
    peak_row(
        "H200 NVL",
        ("h200 nvl",),
        (9, 0),
        {141: 140.4},
        _H200_URL,
        "NVIDIA H200 datasheet, NVL: BF16/FP16 1,671*, FP8 3,341* (*sparse, halved), FP32 60",
        **_HOPPER_NVL,
        links=(pcie(5, "NVIDIA H200 datasheet, NVL: PCIe Gen5 128 GB/s; " + BRIDGE.format(n="2 or 4")),),
    ),
    peak_row(
        "GH200",
        ("gh200",),
        (9, 0),
        {96: 94.5, 480: 94.5},  # 480 GB: the superchip's name (torch: "NVIDIA GH200 480GB")
        "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/",
        "NVIDIA GH200 Grace Hopper Superchip datasheet, its Hopper GPU: BF16/FP16 1,979*, "
        "FP8 3,958* (*sparse, halved), FP32 67",
        **_HOPPER_SXM,
        links=(nvlink(900, "NVIDIA GH200 datasheet: NVLink 900 GB/s GPU to GPU (GH200 NVL2, NVL32)"),),
    ),
    peak_row(
        "H800 SXM",
        ("h800", "h800 sxm", "h800 sxm5"),
        (9, 0),
        {80: 79.6},
        _H100_URL,
        "H800 SXM5 (export variant, NVLink 400 GB/s, FP64 cut): NVIDIA's own H800 page is "
        "withdrawn; OEM sheets print the H100 SXM tensor rates (BF16 1,979*, FP8 3,958*, "
        "*sparse, halved) and FP32 67, so the H100 SXM datasheet figures are used",
        **_HOPPER_SXM,
        links=(nvlink(400, "H800 SXM5 (export variant): NVLink 400 GB/s"),),
    ),
    # --- Blackwell ----------------------------------------------------------------------
    peak_row(
        "B200",
        ("b200",),
        (10, 0),
        {180: 179.1, 192: 179.1},  # 192 GB: the launch announcement's size
        _HGX_URL,
        "NVIDIA HGX B200 spec, per GPU (8-GPU totals / 8): FP16/BF16 4.5 PF*, FP8 9 PF* "
        "(*sparse, halved), FP32 75",
        bf16=2250.0,
        fp16=2250.0,
        fp32=75.0,
        fp8=4500.0,
        links=(nvlink(1800, "NVIDIA HGX B200 spec: NVLink 1.8 TB/s per GPU"),),
    ),
    peak_row(
        "GB200",
        ("gb200",),
        (10, 0),
        {186: 184.0, 192: 184.0},
        "https://www.nvidia.com/en-us/data-center/gb200-nvl72/",
        "NVIDIA GB200 NVL72 spec, per Blackwell GPU: FP16/BF16 5 PF*, FP8 10 PF* (*sparse, halved), FP32 80",
        bf16=2500.0,
        fp16=2500.0,
        fp32=80.0,
        fp8=5000.0,
        links=(nvlink(1800, "NVIDIA GB200 NVL72 spec: NVLink 130 TB/s over 72 GPUs, 1.8 TB/s per GPU"),),
    ),
    # --- Ampere -------------------------------------------------------------------------
    peak_row(
        "A100",
        ("a100", "a100 sxm4", "a100 sxm", "a100 pcie"),
        (8, 0),
        {40: 40.0, 80: 80.0},
        _A100_URL,
        "NVIDIA A100 datasheet (40/80 GB, SXM4 and PCIe alike): BF16/FP16 312 | 624*, FP32 19.5; no FP8",
        **_AMPERE_GA100,
        links=(
            nvlink(600, "NVIDIA A100 datasheet, SXM4: NVLink 600 GB/s", form="SXM4", said_by=SXM4),
            pcie(4, "NVIDIA A100 datasheet, PCIe: PCIe Gen4 64 GB/s; " + BRIDGE.format(n=2), "PCIe", PCIE),
        ),
    ),
    peak_row(
        "A800",
        ("a800", "a800 sxm4", "a800 pcie"),
        (8, 0),
        {40: 40.0, 80: 80.0},
        _A100_URL,
        "A800 (export variant of A100, NVLink cut to 400 GB/s, GA100 compute unchanged): "
        "NVIDIA's A800 data-center page is withdrawn, the A100 datasheet figures are used; no FP8",
        **_AMPERE_GA100,
        links=(
            nvlink(400, "A800 SXM4 (export variant): NVLink cut to 400 GB/s", form="SXM4", said_by=SXM4),
            pcie(
                4,
                "A800 PCIe (the A100 PCIe card's slot): PCIe Gen4 64 GB/s; " + BRIDGE.format(n=2),
                "PCIe",
                PCIE,
            ),
        ),
    ),
    peak_row(
        "A10",
        ("a10",),
        (8, 6),
        {24: 22.5},
        "https://www.nvidia.com/en-us/data-center/products/a10-gpu/",
        "NVIDIA A10 datasheet: BF16/FP16 125 | 250*, FP32 31.2; no FP8",
        bf16=125.0,
        fp16=125.0,
        fp32=31.2,
        links=(pcie(4, "NVIDIA A10 datasheet: PCIe Gen4 64 GB/s"),),
    ),
    peak_row(
        "A10G",
        ("a10g",),
        (8, 6),
        {24: 22.5},
        "https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/",
        "A10G (AWS G5 only; NVIDIA publishes no A10G datasheet): BF16/FP16 70, FP32 35 as "
        "tabulated from AWS/NVIDIA figures by Baseten, consistent with 80 SMs x 1.71 GHz at "
        "half-rate FP32-accumulate tensor cores; secondary source; no FP8",
        bf16=70.0,
        fp16=70.0,
        fp32=35.0,
        links=(pcie(4, "A10G (AWS G5; the A10's board): PCIe Gen4 64 GB/s"),),
    ),
    # --- Ada Lovelace -------------------------------------------------------------------
    peak_row(
        "L4",
        ("l4",),
        (8, 9),
        {24: 22.5},
        "https://www.nvidia.com/en-us/data-center/l4/",
        "NVIDIA L4 datasheet: BF16/FP16 242*, FP8 485* (*sparse, halved), FP32 30.3",
        bf16=121.0,
        fp16=121.0,
        fp32=30.3,
        fp8=242.5,
        links=(pcie(4, "NVIDIA L4 datasheet: PCIe Gen4 x16 64 GB/s"),),
    ),
    peak_row(
        "L40",
        ("l40",),
        (8, 9),
        {48: 45.0},
        "https://www.nvidia.com/en-us/data-center/l40/",
        "NVIDIA L40 datasheet: BF16/FP16 181.05 | 362.1*, FP8 362 | 724*, FP32 90.5",
        bf16=181.05,
        fp16=181.05,
        fp32=90.5,
        fp8=362.0,
        links=(pcie(4, "NVIDIA L40 datasheet: PCIe Gen4 x16 64 GB/s"),),
    ),
    peak_row(
        "L40S",
        ("l40s",),
        (8, 9),
        {48: 45.0},
        "https://www.nvidia.com/en-us/data-center/l40s/",
        "NVIDIA L40S datasheet: BF16/FP16 362.05 | 733*, FP8 733 | 1,466*, FP32 91.6 (the printed "
        "dense 362.05 is used; the sheet's own 733* would halve to 366.5)",
        bf16=362.05,
        fp16=362.05,
        fp32=91.6,
        fp8=733.0,
        links=(pcie(4, "NVIDIA L40S datasheet: PCIe Gen4 x16 64 GB/s"),),
    ),
    peak_row(
        "RTX 6000 Ada",
        ("rtx 6000 ada generation", "rtx 6000 ada"),
        (8, 9),
        {48: 48.0},
        "https://www.nvidia.com/en-us/design-visualization/rtx-6000/",
        "NVIDIA RTX 6000 Ada datasheet: tensor 1,457 (FP8*, sparse, halved), FP32 91.1; "
        "BF16/FP16 = half the FP8 rate (Ada whitepaper: 364.2 dense, full-rate FP32 accumulate)",
        bf16=364.2,
        fp16=364.2,
        fp32=91.1,
        fp8=728.5,
        links=(pcie(4, "NVIDIA RTX 6000 Ada datasheet: PCI Express Gen4 x16 (64 GB/s)"),),
    ),
    # --- Volta --------------------------------------------------------------------------
    peak_row(
        "V100 SXM2",
        ("v100 sxm2",),
        (7, 0),
        {16: 15.8, 32: 31.7},
        _V100_URL,
        "NVIDIA V100 datasheet, SXM2 (16/32 GB): tensor (FP16) 125, FP32 15.7; no BF16, no FP8",
        fp16=125.0,
        fp32=15.7,
        links=(nvlink(300, "NVIDIA V100 datasheet, SXM2: NVLink 300 GB/s"),),
    ),
    peak_row(
        "V100 PCIe",
        ("v100 pcie",),
        (7, 0),
        {16: 15.8, 32: 31.7},
        _V100_URL,
        "NVIDIA V100 datasheet, PCIe (16/32 GB): tensor (FP16) 112, FP32 14; no BF16, no FP8",
        fp16=112.0,
        fp32=14.0,
        links=(pcie(3, "NVIDIA V100 datasheet, PCIe: 32 GB/s"),),
    ),
    peak_row(
        "V100S PCIe",
        ("v100s pcie",),
        (7, 0),
        {32: 32.0},
        _V100_URL,
        "NVIDIA V100 datasheet, V100S PCIe 32 GB: tensor (FP16) 130, FP32 16.4; no BF16, no FP8",
        fp16=130.0,
        fp32=16.4,
        links=(pcie(3, "NVIDIA V100 datasheet, V100S PCIe: 32 GB/s"),),
    ),
    # --- AMD CDNA3 ----------------------------------------------------------------------
    peak_row(
        "MI300X",
        ("mi300x", "mi300x vf"),
        (9, 4),
        {192: 192.0},
        "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
        "AMD Instinct MI300X spec: BF16/FP16 1,307.4, FP8 2,614.9 (without sparsity), "
        "FP32 vector and matrix 163.4",
        vendor="amd",
        **_CDNA3,
        links=(INFINITY_FABRIC,),
    ),
    peak_row(
        "MI325X",
        ("mi325x", "mi325x vf"),
        (9, 4),
        {256: 256.0},
        "https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html",
        "AMD Instinct MI325X spec (the MI300X's CDNA3 compute with HBM3E): BF16/FP16 1,307.4, "
        "FP8 2,614.9 (without sparsity), FP32 163.4",
        vendor="amd",
        **_CDNA3,
        links=(INFINITY_FABRIC,),
    ),
)
"""The table: one row per device variant; peaks in dense TFLOP/s (see the module docstring)."""

PRECISION_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "bf16": "bf16",
        "bfloat16": "bf16",
        "fp16": "fp16",
        "float16": "fp16",
        "fp32": "fp32",
        "float32": "fp32",
        "fp8": "fp8",
        "fp8-rowwise": "fp8",
        "fp8-tensorwise": "fp8",
    }
)
"""Precision names :func:`peak_tflops` accepts -> table column. ``fp8`` (tensorwise
scaling in flopsweep) and ``fp8-rowwise`` both use the FP8 tensor-core rate."""

VENDORS = ("nvidia", "amd")
"""The vendors of :attr:`PeakRow.vendor`."""

_VENDOR_PREFIXES = ("nvidia ", "tesla ", "amd instinct ", "amd ", "instinct ")
_MEMORY_SIZE = re.compile(r"^\d+(?:\.\d+)?(?:gb|g)$")  # "80gb", "40gb", "480gb", "144g"
_MEMORY_TYPES = frozenset({"hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6", "gddr6x", "gddr7"})


@functools.lru_cache(maxsize=1024)  # a plan sweep asks it for the same few names ~1500 times a job
def normalize_device_name(device_name: str) -> str:
    """Canonical spelling of a device name, for exact lookup.

    Lower-cases; turns ``-`` and ``_`` into spaces and collapses whitespace; strips the
    leading vendor words "NVIDIA", "Tesla", "AMD Instinct", "AMD" (repeatedly); drops
    tokens that only name memory: a size ("80GB", "40GB", "480GB", "144G") or a type
    ("HBM3", "HBM3e", "GDDR6"). Form-factor tokens ("SXM4", "PCIe", "NVL") and every
    other token are kept, so variants stay apart.

    Examples: "NVIDIA A100-SXM4-80GB" -> "a100 sxm4"; "NVIDIA H100 80GB HBM3" -> "h100";
    "Tesla V100-PCIE-16GB" -> "v100 pcie"; "AMD Instinct MI300X" -> "mi300x";
    "NVIDIA RTX A1000" -> "rtx a1000".
    """
    tokens = [t for t in _tokens(device_name) if not _MEMORY_SIZE.match(t) and t not in _MEMORY_TYPES]
    return " ".join(tokens)


def _tokens(device_name: str) -> list[str]:
    """The words of a device name, lower-cased, split at white space, ``-`` and ``_``, without the
    leading vendor words of :data:`_VENDOR_PREFIXES`."""
    s = re.sub(r"[\s_\-]+", " ", device_name.strip().lower()).strip()
    stripped = True
    while stripped:
        stripped = False
        for prefix in _VENDOR_PREFIXES:
            if s.startswith(prefix):
                s = s[len(prefix) :].strip()
                stripped = True
    return [t for t in s.split(" ") if t]


def memory_sizes_gb(device_name: str) -> tuple[float, ...]:
    """The memory sizes a device name gives, in the vendor's nominal GB, in order: the tokens that
    :func:`normalize_device_name` drops as sizes. ``"A100-SXM4-80GB"`` -> ``(80.0,)``;
    ``"NVIDIA GH200 480GB"`` -> ``(480.0,)``; ``"H100"`` -> ``()``."""
    return tuple(float(t.rstrip("gb")) for t in _tokens(device_name) if _MEMORY_SIZE.match(t))


_BY_ALIAS: Mapping[str, PeakRow] = MappingProxyType(
    {alias: row for row in PEAK_TABLE for alias in row.aliases}
)


def _check_table() -> None:
    aliases = [a for row in PEAK_TABLE for a in row.aliases]
    duplicated = sorted({a for a in aliases if aliases.count(a) > 1})
    if duplicated:
        raise AssertionError(f"peak table aliases used by two rows: {duplicated}")
    for row in PEAK_TABLE:
        for alias in row.aliases:
            if normalize_device_name(alias) != alias:
                raise AssertionError(f"alias {alias!r} of {row.name} is not in normalised form")
        unknown = set(row.peaks) - set(PRECISION_ALIASES.values())
        if unknown:
            raise AssertionError(f"{row.name}: unknown precisions {sorted(unknown)}")
        if row.vendor not in VENDORS:
            raise AssertionError(f"{row.name}: vendor {row.vendor!r} is not one of {VENDORS}")
        if not row.memory_gib or any(gib > gb for gb, gib in row.memory_gib.items()):
            raise AssertionError(f"{row.name}: memory_gib must map nominal GB to the driver's GiB (below it)")
        check_links(row.name, row.links)
        if row.vendor == "nvidia" and row.bf16 != (row.capability >= (8, 0)):
            raise AssertionError(f"{row.name}: a bf16 peak goes with capability >= 8.0, not {row.capability}")


_check_table()

GPU_MEMORY_GIB: Mapping[str, Mapping[float, float]] = MappingProxyType(
    {row.name: row.memory_gib for row in PEAK_TABLE}
)
""":attr:`PeakRow.memory_gib` by row name (a view of :data:`PEAK_TABLE`)."""


def lookup(device_name: str) -> PeakRow | None:
    """The table row whose alias equals ``normalize_device_name(device_name)``, else ``None``."""
    return _BY_ALIAS.get(normalize_device_name(device_name))


def node_link(device_name: str | None) -> NodeLinkOf | None:
    """The link between ``device_name``'s GPUs in a node (:func:`flopsweep.node_links.resolve`): the
    form its name says (``NVIDIA A100-SXM4-80GB``, ``NVIDIA A100 80GB PCIe``), else its row's first,
    said in :attr:`~flopsweep.node_links.NodeLinkOf.assumed` where the row has several (``A100-80GB``:
    SXM4). None for a name the table does not know (or None)."""
    row = lookup(device_name) if device_name else None
    if row is None:
        return None
    return resolve(row, set(normalize_device_name(str(device_name)).split()), str(device_name).strip())


def form_taken(device_name: str | None) -> str:
    """What a device name that does not say its form was taken as (:func:`flopsweep.node_links.taken_as`):
    ``H100 taken as H100-SXM (...)``; empty for a name that says it, a row of one form, or an unknown name."""
    row = lookup(device_name) if device_name else None
    if row is None:
        return ""
    tokens = set(normalize_device_name(str(device_name)).split())
    return taken_as(row, tokens, str(device_name).strip(), PEAK_TABLE)


def peak_tflops(device_name: str, precision: str) -> tuple[float | None, str]:
    """Dense peak TFLOP/s of one device at a precision, with its source.

    Args:
        device_name: ``torch.cuda.get_device_name()``, e.g. ``"NVIDIA H200"``,
            ``"NVIDIA A100-SXM4-80GB"``, ``"AMD Instinct MI300X"``; or ``"cpu"``.
        precision: ``"bf16"``, ``"fp16"``, ``"fp32"``, ``"fp8"`` or ``"fp8-rowwise"``
            (see :data:`PRECISION_ALIASES`).

    Returns:
        ``(peak, source)``: peak in dense TFLOP/s of one device (never the 2:4-sparse
        figure), and ``"<row name>: <source note> (<url>)"``. ``(None, reason)`` when the
        device name is not exactly a table variant (CPUs never are), when the precision
        is unknown, or when the device has no tensor-core path for it (bf16 on V100, fp8
        on A100), so that MFU is reported as null rather than guessed.
    """
    row = lookup(device_name)
    if row is None:
        return None, (
            f"unknown device {device_name!r} (normalised {normalize_device_name(device_name)!r}): "
            "no exact match in flopsweep.peaks.PEAK_TABLE"
        )
    column = PRECISION_ALIASES.get(precision)
    if column is None:
        return None, f"unknown precision {precision!r}; expected one of {sorted(PRECISION_ALIASES)}"
    peak = row.peaks.get(column)
    if peak is None:
        return None, (
            f"no dense {column} peak for {row.name} in flopsweep.peaks: the device has no {column} "
            f"tensor-core path ({row.source}; {row.url})"
        )
    return peak, f"{row.name}: {row.source} ({row.url})"
