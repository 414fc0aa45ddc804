"""Exact device peak table (flopsweep.peaks) and the measured-matmul probe (flopsweep.matmul)."""

from __future__ import annotations

import math

import pytest

from flopsweep.peaks import PEAK_TABLE, lookup, normalize_device_name, peak_tflops

# Real torch.cuda.get_device_name() strings -> (table row, bf16, fp8, fp32, fp16).
# None: the device has no such tensor-core path, so no peak.
REAL_NAMES = {
    "NVIDIA H200": ("H200 SXM", 989.4, 1978.9, 66.9, 989.4),
    "NVIDIA H200 NVL": ("H200 NVL", 835.5, 1670.5, 60.0, 835.5),
    "NVIDIA H100 80GB HBM3": ("H100 SXM", 989.4, 1978.9, 66.9, 989.4),
    "NVIDIA H100 PCIe": ("H100 PCIe", 756.5, 1513.0, 51.0, 756.5),
    "NVIDIA H100 NVL": ("H100 NVL", 835.5, 1670.5, 60.0, 835.5),
    "NVIDIA GH200 480GB": ("GH200", 989.4, 1978.9, 66.9, 989.4),
    "NVIDIA H800": ("H800 SXM", 989.4, 1978.9, 66.9, 989.4),
    "NVIDIA B200": ("B200", 2250.0, 4500.0, 75.0, 2250.0),
    "NVIDIA A100-SXM4-80GB": ("A100", 312.0, None, 19.5, 312.0),
    "NVIDIA A100-SXM4-40GB": ("A100", 312.0, None, 19.5, 312.0),
    "NVIDIA A100 80GB PCIe": ("A100", 312.0, None, 19.5, 312.0),
    "NVIDIA A100-PCIE-40GB": ("A100", 312.0, None, 19.5, 312.0),
    "NVIDIA A800-SXM4-80GB": ("A800", 312.0, None, 19.5, 312.0),
    "NVIDIA A10": ("A10", 125.0, None, 31.2, 125.0),
    "NVIDIA A10G": ("A10G", 70.0, None, 35.0, 70.0),
    "NVIDIA L4": ("L4", 121.0, 242.5, 30.3, 121.0),
    "NVIDIA L40": ("L40", 181.05, 362.0, 90.5, 181.05),
    "NVIDIA L40S": ("L40S", 362.05, 733.0, 91.6, 362.05),
    "NVIDIA RTX 6000 Ada Generation": ("RTX 6000 Ada", 364.2, 728.5, 91.1, 364.2),
    "Tesla V100-SXM2-16GB": ("V100 SXM2", None, None, 15.7, 125.0),
    "Tesla V100-SXM2-32GB": ("V100 SXM2", None, None, 15.7, 125.0),
    "Tesla V100-PCIE-16GB": ("V100 PCIe", None, None, 14.0, 112.0),
    "Tesla V100S-PCIE-32GB": ("V100S PCIe", None, None, 16.4, 130.0),
    "AMD Instinct MI300X": ("MI300X", 1307.4, 2614.9, 163.4, 1307.4),
    "AMD Instinct MI325X": ("MI325X", 1307.4, 2614.9, 163.4, 1307.4),
}

# Real or plausible names that are NOT a table variant: each must give (None, "unknown device ...").
UNKNOWN_NAMES = [
    "NVIDIA RTX A1000",  # "A100" is a substring: the old fragment table's bug
    "NVIDIA RTX A100",
    "NVIDIA A100X",  # converged accelerator (A100 + DPU): not in the table, not guessed
    "NVIDIA A1000",
    "NVIDIA A10M",
    "NVIDIA A16",
    "NVIDIA A40",
    "NVIDIA L40G",
    "NVIDIA L20",
    "NVIDIA H20",
    "NVIDIA H100 SXM5 MIG 1g.10gb",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA RTX 6000",
    "Quadro RTX 6000",
    "NVIDIA RTX A6000",
    "Tesla V100",  # form factor unknown: SXM2 125 vs PCIe 112, not guessed
    "Tesla V100-SXM3-32GB",
    "Tesla T4",
    "AMD Instinct MI300A",
    "AMD Instinct MI250X",
    "AMD Instinct MI3000X",
    "cpu",
    "",
]


@pytest.mark.parametrize("name", sorted(REAL_NAMES))
def test_real_device_rows(name):
    row_name, bf16, fp8, fp32, fp16 = REAL_NAMES[name]
    row = lookup(name)
    assert row is not None and row.name == row_name
    for precision, expected in [("bf16", bf16), ("fp8", fp8), ("fp32", fp32), ("fp16", fp16)]:
        peak, source = peak_tflops(name, precision)
        if expected is None:
            assert peak is None and f"no dense {precision} peak for {row_name}" in source
        else:
            assert peak == expected, (name, precision)
            assert source.startswith(f"{row_name}: ") and row.url in source


def test_h200_and_h100_sxm_keep_the_documented_figures():
    assert peak_tflops("NVIDIA H200", "bf16")[0] == 989.4
    assert peak_tflops("NVIDIA H200", "fp8")[0] == 1978.9
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16")[0] == 989.4
    assert peak_tflops("NVIDIA A100-SXM4-80GB", "bf16")[0] == 312.0


def test_fp8_rowwise_is_the_fp8_peak():
    for name in REAL_NAMES:
        assert peak_tflops(name, "fp8-rowwise") == peak_tflops(name, "fp8")


def test_v100_pcie_is_not_given_the_sxm2_figure():
    assert peak_tflops("Tesla V100-PCIE-16GB", "fp16")[0] == 112.0
    assert peak_tflops("Tesla V100-SXM2-16GB", "fp16")[0] == 125.0
    assert peak_tflops("Tesla V100S-PCIE-32GB", "fp16")[0] == 130.0


def test_a10_is_neither_a100_nor_a10g():
    assert lookup("NVIDIA A10").name == "A10"
    assert lookup("NVIDIA A10G").name == "A10G"
    assert lookup("NVIDIA A100-PCIE-40GB").name == "A100"


@pytest.mark.parametrize("name", UNKNOWN_NAMES)
def test_unknown_device_is_none_with_reason(name):
    peak, reason = peak_tflops(name, "bf16")
    assert peak is None
    assert reason.startswith(f"unknown device {name!r}")


def test_unknown_precision_is_none_with_reason():
    peak, reason = peak_tflops("NVIDIA H200", "int8")
    assert peak is None and "unknown precision 'int8'" in reason


def test_every_real_name_maps_only_to_its_own_row():
    """No fragment collisions: for every table row, exactly the expected real names map to it."""
    for row in PEAK_TABLE:
        hits = {
            name for name in [*REAL_NAMES, *UNKNOWN_NAMES] if (r := lookup(name)) is not None and r is row
        }
        expected = {name for name, spec in REAL_NAMES.items() if spec[0] == row.name}
        assert hits == expected, row.name


@pytest.mark.parametrize("row", PEAK_TABLE, ids=lambda r: r.name)
def test_longer_or_prefixed_names_do_not_take_a_row(row):
    """A name that merely contains an alias (a longer model number, another product line's
    prefix, an unknown suffix) must not take the alias's row, whatever the alias."""
    for alias in row.aliases:
        suffixed = [alias + tail for tail in ("x", "0", "g", "s", "a", " foo", " mig 1g.10gb")]
        prefixed = [head + alias for head in ("rtx ", "geforce ", "quadro ", "x", "1", "g")]
        for variant in suffixed + prefixed:
            assert lookup(variant) is not row, (alias, variant)


def test_aliases_are_unique_and_normalised():
    aliases = [a for row in PEAK_TABLE for a in row.aliases]
    assert len(aliases) == len(set(aliases))
    assert all(normalize_device_name(a) == a for a in aliases)


def test_rows_are_dense_and_documented():
    names = [row.name for row in PEAK_TABLE]
    assert len(names) == len(set(names)) >= 12
    for row in PEAK_TABLE:
        assert row.url.startswith("https://") and row.source
        assert set(row.peaks) <= {"bf16", "fp16", "fp32", "fp8"} and "fp32" in row.peaks
        assert all(isinstance(v, float) and 0 < v < 10_000 for v in row.peaks.values())
        if "fp8" in row.peaks:  # fp8 runs at 2x the 16-bit rate here (L40S sheet: 733 vs 2 x 362.05)
            assert row.peaks["fp8"] == pytest.approx(2 * row.peaks["bf16"], rel=0.02), row.name
        # the tensor-core rate is above plain fp32 everywhere: a swapped column would show
        assert row.peaks["fp16"] > row.peaks["fp32"], row.name


@pytest.mark.parametrize(
    "raw, normalised",
    [
        ("NVIDIA A100-SXM4-80GB", "a100 sxm4"),
        ("NVIDIA A100 80GB PCIe", "a100 pcie"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("Tesla V100S-PCIE-32GB", "v100s pcie"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("  nvidia   RTX 6000 Ada Generation ", "rtx 6000 ada generation"),
        ("NVIDIA RTX A1000", "rtx a1000"),
    ],
)
def test_normalize_device_name(raw, normalised):
    assert normalize_device_name(raw) == normalised


def test_measure_matmul_tflops_cpu_float32():
    torch = pytest.importorskip("torch")
    from flopsweep.matmul import measure_matmul_tflops

    tflops = measure_matmul_tflops("cpu", torch.float32, n=64, budget_s=0.02)
    assert isinstance(tflops, float) and math.isfinite(tflops) and tflops > 0


def test_measure_matmul_tflops_rejects_fp8_on_cpu():
    torch = pytest.importorskip("torch")
    from flopsweep.matmul import measure_matmul_tflops

    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("no float8 dtypes in this torch")
    with pytest.raises(RuntimeError, match="CUDA"):
        measure_matmul_tflops("cpu", torch.float8_e4m3fn, n=64, budget_s=0.01)


@pytest.mark.gpu
def test_measure_matmul_tflops_cuda_below_datasheet():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from flopsweep.matmul import measure_matmul_tflops

    name = torch.cuda.get_device_name()
    measured = measure_matmul_tflops("cuda", torch.bfloat16)
    peak, _ = peak_tflops(name, "bf16")
    assert measured > 0
    if peak is not None:
        assert measured < 1.05 * peak


CAPABILITIES = {
    (9, 0): ("H100 SXM", "H100 PCIe", "H100 NVL", "H200 SXM", "H200 NVL", "GH200", "H800 SXM"),
    (10, 0): ("B200", "GB200"),
    (8, 0): ("A100", "A800"),
    (8, 6): ("A10", "A10G"),
    (8, 9): ("L4", "L40", "L40S", "RTX 6000 Ada"),
    (7, 0): ("V100 SXM2", "V100 PCIe", "V100S PCIe"),
    (9, 4): ("MI300X", "MI325X"),  # gfx942, as torch on ROCm reports it
}
"""NVIDIA's "CUDA GPUs - Compute Capability" list (developer.nvidia.com/cuda-gpus); ROCm's gfx942."""


def test_every_row_has_its_vendors_compute_capability_and_bf16_from_8_0():
    """``plan=true plan_gpu=`` plans with a row's capability and bf16 (a trial's A100 was planned as
    9.0, so fp8 was ok there): NVIDIA's list, bf16 tensor cores from 8.0, AMD's CDNA3 as ROCm's torch
    reports it."""
    by_capability = {name: cap for cap, names in CAPABILITIES.items() for name in names}
    assert sorted(by_capability) == sorted(row.name for row in PEAK_TABLE)
    for row in PEAK_TABLE:
        assert row.capability == by_capability[row.name], row.name
        assert row.vendor == ("amd" if row.name.startswith("MI") else "nvidia"), row.name
        assert row.bf16 == (row.capability >= (8, 0)), row.name
    assert not lookup("V100-SXM2-32GB").bf16 and lookup("A100-80GB").bf16
