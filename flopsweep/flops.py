"""FLOPs, parameter count and peak throughput: the one place these formulas live.

Everything that reports TFLOPs (the worker, the analysis consistency check, the
notebooks) calls these functions, so that one convention holds everywhere.
"""

from __future__ import annotations


def n_params(n_layer: int, n_embd: int, seq_len: int, vocab_size: int) -> int:
    """Parameter count of the flopsweep GPT (LM head tied to the token embedding).

    ``N = l * (12 h^2 + 13 h) + V * h + s * h + 2 h``

    Per block: attention qkv ``3h^2 + 3h`` and projection ``h^2 + h``, MLP
    ``4h^2 + 4h`` and ``4h^2 + h``, two LayerNorms ``4h``: ``12 h^2 + 13 h``.
    Then the token embedding ``V h``, the learned positions ``s h`` and the
    final LayerNorm ``2 h``.

    Args:
        n_layer: transformer blocks ``l``.
        n_embd: hidden size ``h``.
        seq_len: context length ``s`` (one learned position per token).
        vocab_size: vocabulary ``V``.

    Returns:
        Number of parameters, e.g. 1,315,819,520 for gpt-1.3b.
    """
    h = n_embd
    return n_layer * (12 * h * h + 13 * h) + vocab_size * h + seq_len * h + 2 * h


def flops_per_iteration(
    n_layer: int,
    n_embd: int,
    seq_len: int,
    vocab_size: int,
    global_batch: int,
    activation_checkpointing: bool = False,
) -> float:
    """FLOPs of one optimizer step (forward and backward) of the GPT.

    ``F = 24 * f * B * s * l * h^2 * (1 + s / (6 h) + V / (16 l h))``, eq. 3 of
    Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU
    Clusters Using Megatron-LM"), as used by BigScience. ``f`` is 3 (forward plus
    a backward of twice the forward) or 4 when activation checkpointing recomputes
    the forward pass.

    Args:
        n_layer, n_embd, seq_len, vocab_size: ``l``, ``h``, ``s``, ``V``.
        global_batch: ``B``, sequences per optimizer step over all data-parallel
            ranks: micro batch x grad accumulation x data-parallel world size.
        activation_checkpointing: count the recomputed forward (``f = 4``).

    Returns:
        FLOPs (not FLOP/s) of one iteration.
    """
    f = 4 if activation_checkpointing else 3
    h, s, layers, v = n_embd, seq_len, n_layer, vocab_size
    return 24.0 * f * global_batch * s * layers * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * layers * h))


def tflops_per_device(flops: float, iteration_time_s: float, world_size: int) -> float:
    """Achieved TFLOPs per device: ``flops / (iteration_time_s * world_size * 1e12)``.

    Args:
        flops: FLOPs of one iteration over all devices (``flops_per_iteration``).
        iteration_time_s: wall time of that iteration in seconds.
        world_size: devices that shared the work.

    Raises:
        ValueError: when the time is not positive or the world size is below 1.
    """
    if iteration_time_s <= 0:
        raise ValueError(f"iteration_time_s must be > 0, got {iteration_time_s}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return flops / (iteration_time_s * world_size * 1e12)


# Dense peak TFLOP/s by device-name fragment and precision. Vendor datasheets,
# tensor-core numbers without 2:4 structured sparsity (the datasheets print the
# sparse figure first, at twice these). fp32 is plain FP32 (non-tensor-core):
# flopsweep does not enable TF32 matmuls. Order matters: the first fragment found
# in the device name wins, so the more specific names come first.
_H100_SXM = "NVIDIA H100/H200 SXM datasheet, dense"
_PEAK_TABLE: list[tuple[str, dict[str, float], str]] = [
    ("H200", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9}, _H100_SXM),
    ("H100 PCIe", {"bf16": 756.0, "fp16": 756.0, "fp32": 51.2}, "NVIDIA H100 PCIe datasheet, dense"),
    ("H100 NVL", {"bf16": 835.0, "fp16": 835.0, "fp32": 60.0}, "NVIDIA H100 NVL datasheet, dense"),
    ("H100", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9}, _H100_SXM),
    ("A100", {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5}, "NVIDIA A100 datasheet, dense"),
    ("L40S", {"bf16": 362.05, "fp16": 362.05, "fp32": 91.6}, "NVIDIA L40S datasheet, dense"),
    ("A10G", {"bf16": 70.0, "fp16": 70.0, "fp32": 31.2}, "NVIDIA A10G datasheet, dense"),
    ("V100", {"fp16": 125.0, "fp32": 15.7}, "NVIDIA V100 SXM2 datasheet, dense"),
]


def peak_tflops(device_name: str, precision: str) -> tuple[float | None, str]:
    """Dense peak TFLOP/s of one device at a precision, with its source.

    Args:
        device_name: ``torch.cuda.get_device_name()``, e.g. ``"NVIDIA H200"``, or
            ``"cpu"``.
        precision: ``"bf16"``, ``"fp16"`` or ``"fp32"``.

    Returns:
        ``(peak, source)``; ``(None, reason)`` when the device or precision is not
        in the table (CPUs always are not), so that MFU is reported as null
        rather than guessed.
    """
    for fragment, peaks, source in _PEAK_TABLE:
        if fragment.lower() in device_name.lower():
            if precision in peaks:
                return peaks[precision], source
            return None, f"no {precision} peak for {device_name} in flopsweep.flops"
    return None, f"unknown device {device_name!r}: not in flopsweep.flops peak table"
