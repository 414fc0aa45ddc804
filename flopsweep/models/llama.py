"""The Llama-3 family's shape (``model.arch=llama``), torch-free: schema, weights, parameters, FLOPs.

The module itself is :mod:`flopsweep.models.llama_nn` (:data:`TORCH_MODULE`), built from the shared
parts of :mod:`flopsweep.models.layers` and loaded on the rank.

The architecture of the Llama 3 model cards and of Meta's reference ``model.py``
(github.com/meta-llama/llama3; torchtitan's ``models/llama3``): pre-RMSNorm blocks,
rotary position embeddings (RoPE, no learned positions), grouped-query attention
(GQA: ``n_kv_head`` key/value heads shared by ``n_head // n_kv_head`` query heads
each), a SwiGLU MLP ``w2(silu(w1 x) * w3 x)``, no biases anywhere, and an LM head
tied to the token embedding (Llama 3.2 1B/3B) or separate (Llama 3.1 8B/70B).

Differences from the reference, none of which changes a shape or a FLOP count:

- RoPE is the reference's complex multiply of interleaved channel pairs, computed in
  fp32 from angles made in ``forward`` (no ``freqs_cis`` buffer).
- No RoPE frequency scaling (Llama 3.1's ``use_scaled_rope`` long-context scaling).
- Every weight matrix is initialised N(0, 0.02) as in :mod:`flopsweep.models.gpt2`
  (throughput does not depend on the init), in each leaf module's
  ``reset_parameters``, so that construction under ``deepspeed.zero.Init`` gives the
  same weights as plain construction from the same seed. The module holds no buffers:
  RoPE's rotations are computed in ``forward``, so that construction on the meta device
  followed by ``to_empty`` (FSDP2) loses nothing.

Attention kernels get ``q (B, n_head, T, hd)`` and ``k, v (B, n_kv_head, T, hd)``
*unrepeated*: query head ``i`` attends with key/value head ``i // (n_head // n_kv_head)``
(the convention of SDPA's ``enable_gqa`` and of the reference's ``repeat_kv``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from flopsweep import lazy
from flopsweep.config import ConfigError, ModelConfig, require_positive
from flopsweep.models.heads import head_problem


@dataclass(kw_only=True)
class LlamaConfig(ModelConfig):
    """Llama 3 shape: RoPE, pre-RMSNorm, GQA, SwiGLU MLP, optionally tied LM head.

    The defaults are ``llama-tiny`` (``n_layer`` 2, ``n_embd`` 128, ``n_head`` 4,
    ``seq_len`` 128, ``vocab_size`` 512 from :class:`ModelConfig`), seconds on a CPU.
    """

    name: str = "llama-tiny"
    arch: str = "llama"
    n_kv_head: int = 2
    """Key/value heads (GQA); must divide ``n_head``. ``n_head`` is multi-head attention,
    1 is multi-query attention. Key and value projections are ``n_embd x n_kv_head * hd``."""
    ffn_dim: int = 384
    """SwiGLU hidden size ``f`` (``w1``, ``w3``: ``n_embd -> f``; ``w2``: ``f -> n_embd``)."""
    rope_theta: float = 500000.0
    """RoPE base ``theta``: channel pair ``i`` of a head turns by ``pos * theta^(-2i/hd)`` radians."""
    norm_eps: float = 1e-5
    """RMSNorm epsilon, added to the mean square (dimensionless)."""
    tie_embeddings: bool = True
    """Use the token embedding as the LM head (Llama 3.2 1B/3B); false: a separate ``output``
    matrix of ``vocab_size x n_embd`` parameters (Llama 3.1 8B/70B)."""


CONFIG = LlamaConfig
UNSHOWN_KEYS = tuple(
    f"config.model.{k}" for k in ("n_kv_head", "ffn_dim", "rope_theta", "norm_eps", "tie_embeddings")
)
"""The knobs no column shows (the model's name stands for them; :data:`flopsweep.columns.UNSHOWN_KEYS`)."""

TORCH_MODULE = "flopsweep.models.llama_nn"
"""The module (torch) that builds the Llama: ``build``, ``blocks``, ``tied_parameters``, the plan."""
PARALLELIZE = "tensor_parallel_plan"
"""The tensor-parallel plan's name in :data:`TORCH_MODULE` (torchtitan's ``parallelize_fn``)."""


__getattr__ = lazy.attributes_of(TORCH_MODULE, __name__)
"""The torch names (``Llama``, ``RotaryEmbedding``, ``build``, ``blocks``, ...) of :data:`TORCH_MODULE`."""


def inventory(cfg: LlamaConfig) -> dict[str, int]:
    """The weights, by where they sit (elements), ``h_q = n_head hd`` (= ``h``), ``h_kv = n_kv_head hd``:
    ``block_matmul`` (one block's ``wq``, ``wo`` ``h h_q`` each, ``wk``, ``wv`` ``h h_kv`` each, ``w1``,
    ``w2``, ``w3`` ``h f`` each), ``block_other`` (its two RMSNorm weights ``2 h``), ``embedding``
    (``V h``), ``positions`` (0: RoPE), ``final_norm`` (``h``), ``head`` (the untied ``output``, ``V h``;
    0 when tied) and ``head_matmul`` (the LM head's ``V h`` matmul, tied or not)."""
    h, hd, V = cfg.n_embd, cfg.n_embd // cfg.n_head, cfg.vocab_size
    return {
        "block_matmul": 2 * h * cfg.n_head * hd + 2 * h * cfg.n_kv_head * hd + 3 * h * cfg.ffn_dim,
        "block_other": 2 * h,
        "embedding": V * h,
        "positions": 0,
        "final_norm": h,
        "head": 0 if cfg.tie_embeddings else V * h,
        "head_matmul": V * h,
    }


def tensor_parallel_dims(cfg: LlamaConfig) -> dict[str, int]:
    """What the plan splits ``parallel.tp`` ways: query and key/value heads, the MLP width, the
    vocabulary, and ``seq_len`` (the sequence-parallel residual stream)."""
    return {
        "model.n_head": cfg.n_head,
        "model.n_kv_head": cfg.n_kv_head,
        "model.ffn_dim": cfg.ffn_dim,
        "model.vocab_size": cfg.vocab_size,
        "model.seq_len": cfg.seq_len,
    }


POSITIVE_KEYS = ("n_layer", "n_embd", "n_head", "n_kv_head", "ffn_dim", "seq_len", "vocab_size")
"""The sizes that must be at least 1 (:attr:`flopsweep.models.ModelFamily.positive`)."""


def check(cfg: LlamaConfig) -> None:
    """Raise :class:`ConfigError` unless the sizes, ``rope_theta`` and ``norm_eps`` are positive,
    ``n_head`` divides ``n_embd`` into an even head dim (RoPE rotates channel pairs:
    :func:`flopsweep.models.heads.head_problem`) and ``n_kv_head`` divides ``n_head``. Each refusal's fix
    is one ``model.KEY=VALUE`` that this check accepts typed back (the others' values kept)."""
    for key in POSITIVE_KEYS:
        require_positive(f"model.{key}", getattr(cfg, key))
    for key in ("rope_theta", "norm_eps"):
        if not getattr(cfg, key) > 0:
            default = getattr(LlamaConfig, key)  # the schema's: every llama option's own value
            raise ConfigError(
                f"model.{key}",
                getattr(cfg, key),
                "must be positive",
                f"set a positive value, e.g. model.{key}={default!r} (the default)",
            )
    # heads that divide n_embd into an even head dim (RoPE rotates channel pairs); the fix keeps n_kv_head
    if (problem := head_problem(cfg.n_embd, cfg.n_head, "model.n_embd", pairs=True)) is not None:
        raise problem
    if cfg.n_head % cfg.n_kv_head:
        raise ConfigError(
            "model.n_kv_head",
            cfg.n_kv_head,
            f"does not divide model.n_head={cfg.n_head} (each key/value head serves a whole group)",
            f"choose n_kv_head that divides n_head, e.g. model.n_kv_head=1 or model.n_kv_head={cfg.n_head}",
        )


def _block_matmul_params(cfg: LlamaConfig) -> int:
    """Weights of one block's matmuls: ``wq``, ``wo`` ``h * nh * hd`` each, ``wk``, ``wv``
    ``h * n_kv * hd`` each, ``w1``, ``w2``, ``w3`` ``h f`` each."""
    return inventory(cfg)["block_matmul"]


def n_params(cfg: LlamaConfig) -> int:
    """``l (2 h h_q + 2 h h_kv + 3 h f + 2 h) + V h + h`` ``+ V h`` when untied.

    ``h_q = n_head * hd`` (= ``h``), ``h_kv = n_kv_head * hd``; per block the four attention
    matrices, the three SwiGLU matrices and two RMSNorm weights; then the token embedding,
    the final RMSNorm and, untied, the ``output`` matrix. Equals the counts of the Llama 3
    model cards: llama3.2-1b 1,235,814,400; llama3.2-3b 3,212,749,824; llama3.1-8b
    8,030,261,248; llama3.1-70b 70,553,706,496.
    """
    w = inventory(cfg)
    per_block = w["block_matmul"] + w["block_other"]
    return cfg.n_layer * per_block + w["embedding"] + w["final_norm"] + w["head"]


def model_flops(cfg: LlamaConfig, tokens: int, density: float = 1.0) -> float:
    """FLOPs of one optimizer step over ``tokens`` tokens ``T``, with no recompute.

    ``6 T (l (2 h h_q + 2 h h_kv + 3 h f) + V h) + 12 l h_q s T rho``: every weight matmul
    forward (2) and backward (4), the LM head included but not the embedding lookup (tied
    or not), and the attention scores ``Q K^T`` and ``P V`` over the full ``s x s`` square
    scaled by the computed fraction ``rho`` (``density``); GQA shares k/v heads but every
    query head still does the full work, hence ``h_q = n_head * hd``. This is torchtitan's
    ``get_num_flop_per_token`` (``6 N + 12 l h_q s`` per token, ``N`` without the embedding).
    """
    h_q = cfg.n_head * (cfg.n_embd // cfg.n_head)
    weights = cfg.n_layer * _block_matmul_params(cfg) + inventory(cfg)["head_matmul"]
    return 6.0 * weights * tokens + 12.0 * cfg.n_layer * h_q * cfg.seq_len * tokens * density


def _recomputed_params(cfg: LlamaConfig, recompute: str) -> int:
    """Weights of one block's matmuls that run again in backward under ``recompute``.

    ``early_stop`` (non-reentrant checkpoint's default) stops once every tensor saved for
    backward is back. The last one saved is the input of ``w2``, saved before ``w2`` runs;
    ``w2``'s output is saved by nothing (the residual add saves nothing), so ``w2`` never runs
    again: ``_block_matmul_params - h f``. ``full`` recomputes every matmul (a compiled block is
    one graph). ``selective`` (``flopsweep.checkpointing``: the 1st, 3rd, ... matmul of a block
    saved) recomputes the even ones: ``wk`` (``h h_kv``), ``wo`` (``h h_q``, whose output the
    second RMSNorm needs through the residual) and ``w3`` (``h f``, needed by ``w2``'s input).
    Measured with ``FlopCounterMode`` in ``tests/unit/test_llama.py``.
    """
    h, hd = cfg.n_embd, cfg.n_embd // cfg.n_head
    if recompute == "none":
        return 0
    if recompute == "early_stop":
        return _block_matmul_params(cfg) - cfg.n_embd * cfg.ffn_dim
    if recompute == "full":
        return _block_matmul_params(cfg)
    if recompute == "selective":
        return h * cfg.n_kv_head * hd + h * cfg.n_head * hd + h * cfg.ffn_dim
    raise ValueError(f"unknown recompute {recompute!r}; expected none, early_stop, full or selective")


def hardware_flops(cfg: LlamaConfig, tokens: int, density: float = 1.0, recompute: str = "none") -> float:
    """:func:`model_flops` plus the recomputed forward of each block that runs.

    ``recompute``: ``none``; ``early_stop`` (non-reentrant checkpoint's default: every forward
    matmul but the MLP down-projection ``w2``, ``2 T (2 h h_q + 2 h h_kv + 2 h f)`` per block,
    plus the attention forward ``4 h_q s T rho``); ``full`` (``2 T (2 h h_q + 2 h h_kv + 3 h f)``
    per block plus the attention forward); ``selective`` (``2 T (h h_q + h h_kv + h f)`` per block,
    no attention: its output is saved).
    """
    base = model_flops(cfg, tokens, density)
    weights = _recomputed_params(cfg, recompute)
    if recompute == "none":
        return base
    h_q = cfg.n_head * (cfg.n_embd // cfg.n_head)
    attention = 0.0 if recompute == "selective" else 4.0 * h_q * cfg.seq_len * tokens * density
    return base + cfg.n_layer * (2.0 * weights * tokens + attention)


def eq3_flops(cfg: LlamaConfig, global_batch: int, recompute_forward: bool) -> None:
    """None: Narayanan et al. eq. 3 assumes a GPT block (MHA, a 4h GELU MLP, no GQA)."""
    return None


def info(cfg: LlamaConfig) -> dict[str, Any]:
    """The record's ``model`` section: every key of :class:`LlamaConfig` and ``n_params``."""
    return {**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}, "n_params": n_params(cfg)}


def memory(cfg: LlamaConfig) -> dict[str, int]:
    """Shapes for the memory estimate (:mod:`flopsweep.memory`), per token and layer, in elements:
    ``residual`` (the two RMSNorm inputs and their normalised values, which eager ``nn.RMSNorm``
    keeps in the input's dtype for the weight's gradient: 4h) and ``other`` (the two norm outputs
    2h, q h, k and v 2 kv-width, attention out h, and the SwiGLU's w1, w3, SiLU and product outputs
    4 ffn: what backward keeps), and the largest single layer's parameters. Compiled, the block input
    (``residual_compiled``, h) and ``other_compiled``: the two norm outputs (2h), ``q``, ``k`` and ``v``
    after RoPE (q + 2 kv), the attention's output (q), ``wo``'s output (h) and ``w1``'s, ``w3``'s and the
    SwiGLU product's outputs (3 ffn): 3h + 2q + 2 kv + 3 ffn (Inductor recomputes each norm's input from
    the block input and ``wo``'s output, and the SiLU; it keeps the product). Counted on the CPU (the
    compiled block's backward inputs, ``tests/integration/test_saved_tensors.py``). fp8
    (:data:`flopsweep.fp8.FP8_MEMORY_KEYS`): the converted weights of ``wq``, ``wk``, ``wv``, ``wo``, ``w1``,
    ``w2``, ``w3``, and, compiled, the two
    norm outputs and the SwiGLU product, ``2h + ffn``, not kept in bf16; ``fp8_linear_inputs`` and
    ``fp8_linear_outputs`` (:data:`flopsweep.fp8.FP8_CAST_KEYS`): their summed in and out features
    (``5h + q + ffn``, ``2h + q + 2kv + 2 ffn``), what torchao casts a token (:mod:`flopsweep.fp8_cast`).
    ``backward_temporaries``
    (:func:`flopsweep.activation_memory.block_backward_bytes`): the SwiGLU's backward holds the product's
    gradient and makes the SiLU output's and ``w3``'s output gradients from it once the product ``w2``
    saved is freed, ``2 ffn`` beyond what the block keeps (measured on the CPU: ``4 ffn`` bytes a token
    in bf16 as ``ffn`` grows). ``selective_compiled``: what compiled ``selective`` keeps beyond the block
    input and the attention's logsumexp, ``wq``'s, ``wv``'s, the attention's and ``w1``'s outputs
    (:func:`flopsweep.activation_memory.selective_compiled_bytes`); ``selective_eager``: what eager
    ``selective`` keeps beyond them, every output the policy saves, ``w2``'s too (``2q + kv + ffn + h``,
    :func:`flopsweep.activation_memory.selective_eager_bytes`). ``residual_split_compiled``,
    ``other_split_compiled``: what a compiled block keeps when its graph breaks at every submodule's call
    (DeepSpeed ZeRO-3, :meth:`flopsweep.backend_specs.BackendSpec.splits_compiled_blocks`): each piece
    keeps its own inputs, none recomputes another's outputs. The norms keep their inputs (``2h``) and an
    fp32 rstd (not counted); ``wq``/``wk``/``wv`` the first norm's output, ``w1``/``w3`` the second's
    (``2h``); the attention its rotated ``q``, ``k``, ``v`` and its output (``2q + 2kv``, ``wo``'s input a
    view of it); the SiLU piece ``w1``'s output, the product piece the SiLU's and ``w3``'s outputs, ``w2``
    the product (``4 ffn``): ``6h + 2kv + 4 ffn`` (eager's less the norms' normalised values), counted on
    the CPU under a real ZeRO-3 engine (``tests/integration/test_saved_tensors.py``)."""
    from flopsweep.fp8 import fp8_linear_elements, fp8_linear_features

    h, f = cfg.n_embd, cfg.ffn_dim
    kv = cfg.n_kv_head * (h // cfg.n_head)
    q = cfg.n_head * (h // cfg.n_head)
    largest = max(cfg.vocab_size * h, f * h)
    linears = ((h, q), (h, kv), (h, kv), (q, h), (h, f), (h, f), (f, h))  # wq wk wv wo w1 w3 w2
    return {
        "residual": 4 * h,
        "other": 4 * h + 2 * kv + 4 * f,
        "residual_compiled": h,
        "other_compiled": 3 * h + 2 * q + 2 * kv + 3 * f,
        "largest_layer_params": largest,
        "fp8_linear_params": fp8_linear_elements(*linears),
        "fp8_linear_inputs": fp8_linear_features(*linears)[0],
        "fp8_linear_outputs": fp8_linear_features(*linears)[1],
        "fp8_compiled_inputs": 2 * h + f,
        "backward_temporaries": 2 * f,
        "selective_compiled": 2 * q + kv + f,
        "selective_eager": 2 * q + kv + f + h,
        "residual_split_compiled": 2 * h,
        "other_split_compiled": 2 * h + 2 * q + 2 * kv + 4 * f,
    }
