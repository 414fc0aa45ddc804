"""The GPT-2 family's shape (``model.arch=gpt2``), torch-free: schema, weights, parameters, FLOPs.

Learned positions, pre-LayerNorm blocks, a GELU MLP of 4h, and an LM head tied
to the token embedding. The module itself is :mod:`flopsweep.models.gpt2_nn`
(:data:`TORCH_MODULE`), built from the shared parts of :mod:`flopsweep.models.layers`
and loaded on the rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopsweep import flops, lazy
from flopsweep.config import ModelConfig, require_positive
from flopsweep.models.heads import head_problem


@dataclass(kw_only=True)
class GPT2Config(ModelConfig):
    """GPT-2 shape (DESIGN.md): learned positions, pre-LayerNorm, GELU MLP of 4h, tied LM head."""

    arch: str = "gpt2"


CONFIG = GPT2Config

TORCH_MODULE = "flopsweep.models.gpt2_nn"
"""The module (torch) that builds the GPT: ``build``, ``blocks``, ``tied_parameters``, the plan."""
PARALLELIZE = "tensor_parallel_plan"
"""The tensor-parallel plan's name in :data:`TORCH_MODULE` (torchtitan's ``parallelize_fn``)."""


__getattr__ = lazy.attributes_of(TORCH_MODULE, __name__)
"""The torch names (``GPT``, ``build``, ``blocks``, ``TENSOR_PARALLEL_PLAN``, ...) of :data:`TORCH_MODULE`."""


def inventory(cfg: GPT2Config) -> dict[str, int]:
    """The weights, by where they sit (elements): ``block_matmul`` (one block's QKV ``3 h^2``,
    projection ``h^2`` and MLP ``8 h^2``), ``block_other`` (its biases ``9 h`` and LayerNorms ``4 h``),
    ``embedding`` (token ``V h``, also the tied head), ``positions`` (``s h``), ``final_norm`` (``2 h``)
    and ``head_matmul`` (the tied LM head's ``V h`` matmul, no parameters of its own)."""
    h = cfg.n_embd
    return {
        "block_matmul": 12 * h * h,
        "block_other": 13 * h,
        "embedding": cfg.vocab_size * h,
        "positions": cfg.seq_len * h,
        "final_norm": 2 * h,
        "head_matmul": cfg.vocab_size * h,
    }


def tensor_parallel_dims(cfg: GPT2Config) -> dict[str, int]:
    """What the plan splits ``parallel.tp`` ways: heads, the MLP width ``4 h`` and the vocabulary
    (the embedding's rows); ``seq_len`` too (the position embedding's rows and the sequence-parallel
    residual stream)."""
    return {
        "model.n_head": cfg.n_head,
        "model.n_embd (MLP width 4 x n_embd)": 4 * cfg.n_embd,
        "model.vocab_size": cfg.vocab_size,
        "model.seq_len": cfg.seq_len,
    }


POSITIVE_KEYS = ("n_layer", "n_embd", "n_head", "seq_len", "vocab_size")
"""The sizes that must be at least 1 (:attr:`flopsweep.models.ModelFamily.positive`)."""


def check(cfg: GPT2Config) -> None:
    """Raise :class:`ConfigError` unless every size is positive and ``n_head`` divides ``n_embd``."""
    for key in POSITIVE_KEYS:
        require_positive(f"model.{key}", getattr(cfg, key))
    if (problem := head_problem(cfg.n_embd, cfg.n_head, "model.n_embd")) is not None:
        raise problem


def n_params(cfg: GPT2Config) -> int:
    """``l (12 h^2 + 13 h) + V h + s h + 2 h`` (:func:`flopsweep.flops.n_params`)."""
    return flops.n_params(cfg.n_layer, cfg.n_embd, cfg.seq_len, cfg.vocab_size)


def _block_matmul_params(cfg: GPT2Config) -> int:
    """Weights of one block's matmuls: QKV ``3 h^2``, projection ``h^2``, MLP ``8 h^2``."""
    return inventory(cfg)["block_matmul"]


# Forward matmul weights that non-reentrant torch.utils.checkpoint recomputes per block.
# "early_stop" (torch's default) stops once every tensor saved for backward is back, so the
# MLP out-projection, whose output nothing saves, never runs again: 12 h^2 - 4 h^2.
# "full" recomputes everything (what records before session 30 counted for a compiled block). "selective"
# (flopsweep.checkpointing: the 1st and 3rd addmm saved, attention saved) recomputes only the
# attention out-projection, whose output ln_2 needs through the residual: h^2.
_RECOMPUTED = {"none": 0, "early_stop": 8, "full": 12, "selective": 1}


def model_flops(cfg: GPT2Config, tokens: int, density: float = 1.0) -> float:
    """FLOPs of one optimizer step over ``tokens`` tokens, with no recompute.

    ``6 T (12 l h^2 + V h) + 12 l h s T rho``: every weight matmul forward (2) and
    backward (4), the LM head ``V h`` included, and the attention scores over the full
    ``s x s`` square scaled by the computed fraction ``rho`` (``density``).
    gpt-tiny (l 2, h 128, s 128, V 512) at 512 tokens: 1,610,612,736.
    """
    h, s, layers = cfg.n_embd, cfg.seq_len, cfg.n_layer
    weights = layers * _block_matmul_params(cfg) + inventory(cfg)["head_matmul"]
    return 6.0 * weights * tokens + 12.0 * layers * h * s * tokens * density


def hardware_flops(cfg: GPT2Config, tokens: int, density: float = 1.0, recompute: str = "none") -> float:
    """:func:`model_flops` plus the recomputed forward of each block that runs.

    ``recompute``: ``none``; ``early_stop`` (non-reentrant checkpoint's default: every
    forward matmul but the MLP out-projection, ``2 T 8 h^2`` per block, plus the attention
    forward ``4 h s T rho``); ``full`` (``2 T 12 h^2`` per block plus the attention forward);
    ``selective`` (``2 T h^2`` per block: the attention out-projection; attention is saved).
    """
    if recompute == "none":
        return model_flops(cfg, tokens, density)
    if recompute not in _RECOMPUTED:
        raise ValueError(f"unknown recompute {recompute!r}; expected one of {', '.join(_RECOMPUTED)}")
    h, s, layers = cfg.n_embd, cfg.seq_len, cfg.n_layer
    attention = 0.0 if recompute == "selective" else 4.0 * h * s * tokens * density
    extra = layers * (2.0 * _RECOMPUTED[recompute] * h * h * tokens + attention)
    return model_flops(cfg, tokens, density) + extra


def eq3_flops(cfg: GPT2Config, global_batch: int, recompute_forward: bool) -> float:
    """Narayanan et al. 2021 eq. 3 as published (:func:`flopsweep.flops.flops_per_iteration`);
    ``recompute_forward``: count a recomputed forward (``f = 4``)."""
    return flops.flops_per_iteration(
        cfg.n_layer, cfg.n_embd, cfg.seq_len, cfg.vocab_size, global_batch, recompute_forward
    )


def info(cfg: GPT2Config) -> dict[str, Any]:
    """The record's ``model`` section: the shape and ``n_params``."""
    keys = ("name", "arch", "n_layer", "n_embd", "n_head", "seq_len", "vocab_size")
    return {**{k: getattr(cfg, k) for k in keys}, "n_params": n_params(cfg)}


def memory(cfg: GPT2Config) -> dict[str, int]:
    """Shapes for the memory estimate (:mod:`flopsweep.memory`), per token and layer, in elements:
    ``residual`` (the two LayerNorm inputs, fp32 under autocast) and ``other`` (ln_1 out h, QKV 3h,
    attention out h, ln_2 out h, c_fc out 4h, GELU out 4h: what backward keeps), and the largest
    single layer's parameters, as DeepSpeed's ``model_to_params`` counts a module's own (the token
    embedding at these vocabularies; else the position embedding or ``c_fc`` with its bias). Compiled
    (``residual_compiled``, ``other_compiled``): Inductor keeps the block input (h) and 15h in the
    compute dtype: ln_1 out h, ``c_attn``'s output 3h, the attention's output h, ``c_proj``'s output h
    (ln_2's input is rebuilt from it and the block input), ln_2 out h, ``c_fc``'s output 4h and the
    GELU's 4h. Counted on the CPU (the compiled block's backward inputs, two shapes alike). fp8
    (:data:`flopsweep.fp8.FP8_MEMORY_KEYS`): the converted weights of ``c_attn``, ``c_proj``, ``c_fc`` and
    the MLP's ``c_proj``, and, compiled, the two LayerNorm outputs and the GELU output, ``6h``, not kept
    in bf16; ``fp8_linear_inputs`` and ``fp8_linear_outputs`` (:data:`flopsweep.fp8.FP8_CAST_KEYS`): their
    summed in and out features, ``7h`` and ``9h``, what torchao casts a token (:mod:`flopsweep.fp8_cast`).
    ``backward_temporaries`` (:func:`flopsweep.activation_memory.block_backward_bytes`): the MLP's
    backward holds the ``4h`` hidden's gradient beside the GELU output ``c_proj`` saved, then ``c_fc``'s
    output gradient in its place. ``selective_compiled``: ``c_attn``'s, the attention's and ``c_fc``'s
    outputs, ``8h`` (:func:`flopsweep.activation_memory.selective_compiled_bytes`); ``selective_eager``
    the same ``8h``: the outputs eager ``selective`` caches are those backward reads
    (:func:`flopsweep.activation_memory.selective_eager_bytes`)."""
    from flopsweep.fp8 import fp8_linear_elements, fp8_linear_features

    h = cfg.n_embd
    linears = ((h, 3 * h), (h, h), (h, 4 * h), (4 * h, h))  # c_attn, attention c_proj, c_fc, MLP c_proj
    return {
        "residual": 2 * h,
        "other": 14 * h,
        "residual_compiled": h,
        "other_compiled": 15 * h,
        "largest_layer_params": max(cfg.vocab_size * h, cfg.seq_len * h, 4 * h * h + 4 * h),
        "fp8_linear_params": fp8_linear_elements(*linears),
        "fp8_linear_inputs": fp8_linear_features(*linears)[0],
        "fp8_linear_outputs": fp8_linear_features(*linears)[1],
        "fp8_compiled_inputs": 6 * h,
        "backward_temporaries": 4 * h,
        "selective_compiled": 8 * h,
        "selective_eager": 8 * h,
    }
