"""Published formulas: GPT parameter count, Narayanan et al. eq. 3, TFLOPs, datasheet peaks.

These keep their signatures because published numbers are checked through them
(the seed run's 124.45 TFLOPs). Each model family's own FLOPs (model and hardware)
live in :mod:`flopsweep.models`; the record stores them, so the analysis never
recomputes a formula.
"""

from __future__ import annotations

from flopsweep import peaks


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
    attention_density: float = 1.0,
) -> float:
    """FLOPs of one optimizer step (forward and backward) of the GPT.

    ``F = 24 * f * B * s * l * h^2 * (1 + rho * s / (6 h) + V / (16 l h))``, eq. 3 of
    Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU
    Clusters Using Megatron-LM"), as used by BigScience, where ``rho = 1``. ``f`` is 3
    (forward plus a backward of twice the forward) or 4 when activation checkpointing
    recomputes the forward pass.

    The three terms, per layer and forward pass, in multiply-adds x 2:
    ``24 B s h^2`` are the weight matmuls (QKV ``6 B s h^2``, projection ``2 B s h^2``,
    MLP ``16 B s h^2``); ``24 B s h^2 * s / (6 h) = 4 B s^2 h`` is the attention-score
    part, ``Q K^T`` (``2 B s^2 h``) and ``softmax(.) V`` (``2 B s^2 h``); the last term
    is the LM head, ``2 B s h V``, spread over ``l`` layers. Only the score part depends
    on which (query, key) pairs are computed, so a block-sparse layout that computes a
    fraction ``rho`` of the (query block, key block) pairs (``attention_density``)
    scales that term alone. The published convention counts the full ``s^2`` (``rho = 1``),
    causal or not. flopsweep's own model and hardware FLOPs (:mod:`flopsweep.models`)
    count the LM head at ``6 B s h V`` and only the recompute that runs; this function
    stays as published, for comparison with published numbers.

    Args:
        n_layer, n_embd, seq_len, vocab_size: ``l``, ``h``, ``s``, ``V``.
        global_batch: ``B``, sequences per optimizer step over all data-parallel
            ranks: micro batch x grad accumulation x data-parallel world size.
        activation_checkpointing: count the recomputed forward (``f = 4``).
        attention_density: ``rho`` in [0, 1]; 1.0 gives the published formula.

    Returns:
        FLOPs (not FLOP/s) of one iteration.

    Raises:
        ValueError: when ``attention_density`` is outside [0, 1].
    """
    if not 0.0 <= attention_density <= 1.0:
        raise ValueError(f"attention_density must be in [0, 1], got {attention_density}")
    f = 4 if activation_checkpointing else 3
    h, s, layers, v = n_embd, seq_len, n_layer, vocab_size
    return (
        24.0
        * f
        * global_batch
        * s
        * layers
        * h
        * h
        * (1.0 + attention_density * s / (6.0 * h) + v / (16.0 * layers * h))
    )


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


def peak_tflops(device_name: str, precision: str) -> tuple[float | None, str]:
    """Dense datasheet peak TFLOP/s of one device at a precision, with its source.

    The table and its exact name matching live in :mod:`flopsweep.peaks`.

    Args:
        device_name: ``torch.cuda.get_device_name()``, e.g. ``"NVIDIA H200"``, or ``"cpu"``.
        precision: ``"bf16"``, ``"fp16"``, ``"fp32"``, ``"fp8"`` or ``"fp8-rowwise"``.

    Returns:
        ``(peak, source)``; ``(None, reason)`` when the device or precision is not in the
        table (CPUs never are), so that MFU is reported as null rather than guessed.
    """
    return peaks.peak_tflops(device_name, precision)
