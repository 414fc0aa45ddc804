"""The Llama-3 family (``model.arch=llama``): its schema, module, parameter count and FLOPs.

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
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flopsweep.attention import build_attention_fn
from flopsweep.config import AttentionConfig, ConfigError, require_positive
from flopsweep.options import LlamaConfig

CONFIG = LlamaConfig

INIT_STD = 0.02  # N(0, 0.02) for every weight matrix and the embedding, as in gpt2.py


class Linear(nn.Linear):
    """Bias-free ``nn.Linear`` with weights N(0, 0.02)."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__(in_features, out_features, bias=False)

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, mean=0.0, std=INIT_STD)


class Embedding(nn.Embedding):
    """``nn.Embedding`` with weights N(0, 0.02)."""

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, mean=0.0, std=INIT_STD)


class RotaryEmbedding(nn.Module):
    """RoPE rotations (Su et al. 2021, "RoFormer"), no parameters and no buffers.

    ``forward(seq_len, device) -> freqs_cis``: complex64 ``(seq_len, hd/2)``, the unit
    rotation ``exp(i t theta^(-2j/hd))`` of position ``t`` for the channel pair
    ``(2j, 2j + 1)``, as Meta's reference and torchtitan compute it.
    """

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.head_dim, self.theta = head_dim, theta

    def forward(self, seq_len: int, device: torch.device) -> torch.Tensor:
        exponent = torch.arange(0, self.head_dim, 2, device=device, dtype=torch.float32) / self.head_dim
        inv_freq = 1.0 / (self.theta**exponent)  # (hd/2,)
        pos = torch.arange(seq_len, device=device, dtype=torch.float32)
        angles = torch.outer(pos, inv_freq)  # (T, hd/2)
        return torch.polar(torch.ones_like(angles), angles)


def apply_rotary(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Rotate each channel pair ``(2j, 2j + 1)`` of every head by its position's angle, in fp32.

    One complex multiply (torchtitan's form): fewer passes over ``x`` than the rotate-half
    form, which matters in eager mode, where every pass is its own kernel.

    Args:
        x: ``(B, T, nh, hd)``; freqs_cis: ``(T, hd/2)`` complex from :class:`RotaryEmbedding`.

    Returns:
        ``x`` rotated, in ``x``'s dtype, same shape.
    """
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (B, T, nh, hd/2)
    out = torch.view_as_real(xc * freqs_cis[None, :, None, :]).flatten(3)
    return out.type_as(x)


class Attention(nn.Module):
    """Causal grouped-query self-attention with RoPE on queries and keys; no biases."""

    def __init__(self, cfg: LlamaConfig, attention: str | AttentionConfig) -> None:
        super().__init__()
        self.n_head, self.n_kv_head = cfg.n_head, cfg.n_kv_head
        self.head_dim = cfg.n_embd // cfg.n_head
        self.wq = Linear(cfg.n_embd, cfg.n_head * self.head_dim)
        self.wk = Linear(cfg.n_embd, cfg.n_kv_head * self.head_dim)
        self.wv = Linear(cfg.n_embd, cfg.n_kv_head * self.head_dim)
        self.wo = Linear(cfg.n_head * self.head_dim, cfg.n_embd)
        self.attn_fn = build_attention_fn(attention)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape  # (batch, seq, n_embd)
        hd = self.head_dim
        # -1: the local head counts (n_head / tp, n_kv_head / tp) under tensor parallelism.
        q = apply_rotary(self.wq(x).view(B, T, -1, hd), freqs_cis)  # (B, T, nh, hd)
        k = apply_rotary(self.wk(x).view(B, T, -1, hd), freqs_cis)  # (B, T, n_kv, hd)
        v = self.wv(x).view(B, T, -1, hd)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, heads, T, hd)
        y = self.attn_fn(q, k, v)  # (B, nh, T, hd); the kernel shares each k/v head (GQA)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class FeedForward(nn.Module):
    """SwiGLU MLP (Shazeer 2020): ``w2(silu(w1 x) * w3 x)``; no biases."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.w1 = Linear(cfg.n_embd, cfg.ffn_dim)  # gate
        self.w3 = Linear(cfg.n_embd, cfg.ffn_dim)  # up
        self.w2 = Linear(cfg.ffn_dim, cfg.n_embd)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-RMSNorm block: ``x + attention(norm(x))``, then ``x + feed_forward(norm(x))``."""

    def __init__(self, cfg: LlamaConfig, attention: str | AttentionConfig) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.attention = Attention(cfg, attention)
        self.ffn_norm = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), freqs_cis)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """Llama 3; ``forward(tokens)`` returns the mean next-token cross-entropy.

    Parameter names follow Meta's reference and torchtitan (``tok_embeddings``,
    ``layers.i.attention.wq``, ``layers.i.feed_forward.w1``, ``norm``, ``output``).

    Args:
        cfg: the shape (:class:`LlamaConfig`).
        attention: attention option, a name or an ``AttentionConfig`` (``flopsweep.attention``);
            the kernel must accept fewer key/value heads than query heads.

    Activation checkpointing is applied from outside, to :func:`blocks`
    (:mod:`flopsweep.checkpointing`).
    """

    def __init__(
        self,
        cfg: LlamaConfig,
        attention: str | AttentionConfig = "sdpa",
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = Embedding(cfg.vocab_size, cfg.n_embd)
        self.rope = RotaryEmbedding(cfg.n_embd // cfg.n_head, cfg.rope_theta)
        self.layers = nn.ModuleList(TransformerBlock(cfg, attention) for _ in range(cfg.n_layer))
        self.norm = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.output = None if cfg.tie_embeddings else Linear(cfg.n_embd, cfg.vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Loss of one micro batch.

        Args:
            tokens: LongTensor ``[batch, seq_len + 1]``; inputs are ``tokens[:, :-1]``
                and targets ``tokens[:, 1:]``.

        Returns:
            Scalar mean cross-entropy (computed in fp32).
        """
        idx, targets = tokens[:, :-1], tokens[:, 1:]
        x = self.embed(idx)  # (B, T, C); (B, T / tp, C) local under sequence parallelism
        (freqs_cis,) = self.block_args(idx.size(1), idx.device)  # (T, hd/2) complex
        for block in self.layers:
            x = block(x, freqs_cis)
        return self.head_loss(x, targets)

    # The parts of forward, for pipeline stages (flopsweep.pipeline): the first stage embeds, every
    # stage runs its blocks with ``block_args``, the last stage computes the logits.
    embedding_children: tuple[str, ...] = ("tok_embeddings",)
    """Children the embedding uses (the first pipeline stage keeps them)."""

    @property
    def head_children(self) -> tuple[str, ...]:
        """Children the LM head uses (the last pipeline stage keeps them): ``norm`` and ``output``,
        or the token embedding when tied."""
        return ("norm", "output") if self.output is not None else ("norm", "tok_embeddings")

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        """Token embeddings: idx LongTensor ``(B, T)`` -> ``(B, T, C)`` (RoPE acts in attention)."""
        return self.tok_embeddings(idx)

    def block_args(self, seq_len: int, device: torch.device) -> tuple[torch.Tensor]:
        """Arguments every block takes after the hidden states: ``freqs_cis``, complex
        ``(seq_len, hd/2)``, made here (the module holds no buffers). ``seq_len`` is the whole
        sequence, not the hidden states' local shard under sequence parallelism (attention gathers
        the sequence before it rotates)."""
        return (self.rope(seq_len, device),)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Final RMSNorm and LM head (tied or ``output``): ``(B, T, C)`` -> logits ``(B, T, V)``."""
        x = self.norm(x)
        return self.output(x) if self.output is not None else F.linear(x, self.tok_embeddings.weight)

    def head_loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Final RMSNorm, LM head (tied or ``output``) and cross-entropy in fp32.

        Args:
            x: hidden states ``(B, T, C)``; targets: LongTensor ``(B, T)``.

        Returns:
            Scalar mean loss (see :meth:`flopsweep.models.gpt2.GPT.head_loss` on compiling it).
        """
        logits = self.logits(x)  # (B, T, V)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def build(cfg: LlamaConfig, attention: AttentionConfig) -> Llama:
    """The Llama in fp32 on the current default device (see :class:`Llama`)."""
    return Llama(cfg, attention)


def blocks(model: Llama) -> nn.ModuleList:
    """The transformer blocks, in order; each is called as ``block(x, freqs_cis)``."""
    return model.layers


def tied_parameters(model: Llama) -> list[nn.Parameter]:
    """The token embedding when the LM head is tied (used outside ``tok_embeddings``'s forward)."""
    return [model.tok_embeddings.weight] if model.cfg.tie_embeddings else []


def tensor_parallel_plan(model: Llama) -> dict[str, Any]:
    """The tensor- and sequence-parallel plan (:mod:`flopsweep.tensor_parallel`), torchtitan's
    for Llama 3: ``wq``, ``wk``, ``wv``, ``w1``, ``w3`` column-wise (each rank ``n_head / tp`` query
    and ``n_kv_head / tp`` key/value heads, whole GQA groups), ``wo`` and ``w2`` row-wise,
    reduce-scattered to the sequence-sharded residual stream; RMSNorms sequence-parallel; the token
    embedding vocabulary-parallel; the separate ``output`` head column-wise over the vocabulary
    (vocabulary-sharded logits for loss parallelism), or, when tied, ``norm``'s output gathered
    for the head that reads the vocabulary-sharded embedding weight."""
    from flopsweep.tensor_parallel import Sublayer, sequence_parallel_plan

    return sequence_parallel_plan(
        embedding="tok_embeddings",
        blocks="layers.*",
        sublayers=[
            Sublayer(
                norm="attention_norm",
                module="attention",
                colwise=("wq", "wk", "wv"),
                rowwise=("wo",),
                extra_inputs=1,  # freqs_cis
            ),
            Sublayer(norm="ffn_norm", module="feed_forward", colwise=("w1", "w3"), rowwise=("w2",)),
        ],
        norm="norm",
        head=None if model.output is None else "output",  # tied: F.linear(norm(x), tok_embeddings.weight)
    )


TENSOR_PARALLEL_PLAN = tensor_parallel_plan


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


_POSITIVE = ("n_layer", "n_embd", "n_head", "n_kv_head", "ffn_dim", "seq_len", "vocab_size")


def check(cfg: LlamaConfig) -> None:
    """Raise :class:`ConfigError` unless the sizes are positive, ``n_head`` divides ``n_embd``,
    ``n_kv_head`` divides ``n_head`` and the head dim is even (RoPE rotates channel pairs)."""
    for key in _POSITIVE:
        require_positive(f"model.{key}", getattr(cfg, key))
    for key in ("rope_theta", "norm_eps"):
        if not getattr(cfg, key) > 0:
            raise ConfigError(
                f"model.{key}", getattr(cfg, key), "must be positive", f"set model.{key} > 0 or leave it out"
            )
    if cfg.n_embd % cfg.n_head:
        raise ConfigError(
            "model.n_embd",
            cfg.n_embd,
            f"is not divisible by model.n_head={cfg.n_head}",
            "choose n_head that divides n_embd",
        )
    if cfg.n_head % cfg.n_kv_head:
        raise ConfigError(
            "model.n_kv_head",
            cfg.n_kv_head,
            f"does not divide model.n_head={cfg.n_head} (each key/value head serves a whole group)",
            f"choose n_kv_head that divides n_head, e.g. model.n_kv_head=1 or model.n_kv_head={cfg.n_head}",
        )
    head_dim = cfg.n_embd // cfg.n_head
    if head_dim % 2:
        raise ConfigError(
            "model.n_head",
            cfg.n_head,
            f"gives an odd head dim n_embd/n_head={head_dim}, and RoPE rotates pairs of channels",
            "choose n_head so that n_embd/n_head is even",
        )


def _block_matmul_params(cfg: LlamaConfig) -> int:
    """Weights of one block's matmuls: ``wq``, ``wo`` ``h * nh * hd`` each, ``wk``, ``wv``
    ``h * n_kv * hd`` each, ``w1``, ``w2``, ``w3`` ``h f`` each."""
    h, hd = cfg.n_embd, cfg.n_embd // cfg.n_head
    return 2 * h * cfg.n_head * hd + 2 * h * cfg.n_kv_head * hd + 3 * h * cfg.ffn_dim


def n_params(cfg: LlamaConfig) -> int:
    """``l (2 h h_q + 2 h h_kv + 3 h f + 2 h) + V h + h`` ``+ V h`` when untied.

    ``h_q = n_head * hd`` (= ``h``), ``h_kv = n_kv_head * hd``; per block the four attention
    matrices, the three SwiGLU matrices and two RMSNorm weights; then the token embedding,
    the final RMSNorm and, untied, the ``output`` matrix. Equals the counts of the Llama 3
    model cards: llama3.2-1b 1,235,814,400; llama3.2-3b 3,212,749,824; llama3.1-8b
    8,030,261,248; llama3.1-70b 70,553,706,496.
    """
    h, V = cfg.n_embd, cfg.vocab_size
    per_block = _block_matmul_params(cfg) + 2 * h
    head = 0 if cfg.tie_embeddings else V * h
    return cfg.n_layer * per_block + V * h + h + head


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
    weights = cfg.n_layer * _block_matmul_params(cfg) + cfg.vocab_size * cfg.n_embd
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
    Measured with ``FlopCounterMode`` in ``tests/test_llama.py``.
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
    4 ffn: what backward keeps), and the largest single layer's parameters. Compiled: the two norm
    inputs (2h) and 4h + 2 kv + 2 ffn (Inductor recomputes the normalisation, the SiLU and the
    product; within 2% of the H200 Llama 3.2 1B and 3B records)."""
    h = cfg.n_embd
    kv = cfg.n_kv_head * (h // cfg.n_head)
    largest = max(cfg.vocab_size * h, cfg.ffn_dim * h)
    return {
        "residual": 4 * h,
        "other": 4 * h + 2 * kv + 4 * cfg.ffn_dim,
        "residual_compiled": 2 * h,
        "other_compiled": 4 * h + 2 * kv + 2 * cfg.ffn_dim,
        "largest_layer_params": largest,
    }
