"""Shared decoder parts of the built-in families (torch): what ``gpt2_nn`` and ``llama_nn`` build from.

torchtitan's ``models/common/`` in small: an initialised ``Linear`` and ``Embedding``, the two MLPs
(GELU and SwiGLU), the norm, a self-attention base that owns the kernel call, a pre-norm block and
a causal-LM base that owns ``forward``, the LM head's loss and the pipeline parts. A family keeps
only what differs: its projections (fused QKV or GQA with RoPE), its submodule names (which its
tensor-parallel plan, fp8's LM-head exclusion and checkpoints key on) and its embeddings.

Weights are initialised inside each leaf module's ``reset_parameters`` (N(0, 0.02), biases 0), so
that construction under ``deepspeed.zero.Init`` (which partitions each module right after its
``__init__``) gives the same weights as plain construction from the same seed. Parts are built in
the order the family passes them, which is the order of the random draws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

INIT_STD = 0.02  # GPT-2's N(0, 0.02) for every weight matrix and embedding (Llama's too, here)


class Linear(nn.Linear):
    """``nn.Linear`` with weights N(0, 0.02) and a zero bias (``bias=False``: none)."""

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, mean=0.0, std=INIT_STD)
        if self.bias is not None:
            nn.init.zeros_(self.bias)


class Embedding(nn.Embedding):
    """``nn.Embedding`` with weights N(0, 0.02)."""

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, mean=0.0, std=INIT_STD)


def norm(kind: str, dim: int, eps: float | None = None) -> nn.Module:
    """``layernorm`` (``nn.LayerNorm(dim)``, weight and bias) or ``rmsnorm`` (``nn.RMSNorm(dim, eps)``,
    weight only).

    Raises:
        ValueError: for another kind.
    """
    if kind == "layernorm":
        return nn.LayerNorm(dim)
    if kind == "rmsnorm":
        return nn.RMSNorm(dim, eps=eps)
    raise ValueError(f"unknown norm {kind!r}; expected layernorm or rmsnorm")


class GeluMLP(nn.Module):
    """GPT-2's MLP ``c_proj(gelu_tanh(c_fc x))``: ``dim -> hidden -> dim``, biased."""

    def __init__(self, dim: int, hidden: int, *, bias: bool = True) -> None:
        super().__init__()
        self.c_fc = Linear(dim, hidden, bias=bias)
        self.c_proj = Linear(hidden, dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class SwiGLU(nn.Module):
    """SwiGLU MLP (Shazeer 2020), Llama's: ``w2(silu(w1 x) * w3 x)``; no biases."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = Linear(dim, hidden, bias=False)  # gate
        self.w3 = Linear(dim, hidden, bias=False)  # up
        self.w2 = Linear(hidden, dim, bias=False)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class SelfAttention(nn.Module):
    """Causal self-attention around a kernel of :mod:`flopsweep.attention_kernels`.

    A family's subclass builds its projections and ``attn_fn`` and implements :meth:`project`;
    :attr:`OUTPUT` names its output projection. Head counts are read from the projections'
    outputs (``-1`` in the views), so the same code runs the local heads (``n_head / tp``) under
    tensor parallelism.
    """

    OUTPUT = "c_proj"
    """The output projection's attribute name."""
    attn_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

    def project(self, x: torch.Tensor, *args: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``q (B, T, nh, hd)``, ``k, v (B, T, n_kv, hd)`` of ``x (B, T, C)``."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, *args: Any) -> torch.Tensor:
        B, T, _ = x.shape  # (batch, seq, n_embd)
        q, k, v = (t.transpose(1, 2) for t in self.project(x, *args))  # (B, heads, T, hd)
        y = self.attn_fn(q, k, v)  # (B, nh, T, hd); a GQA kernel shares each k/v head
        return getattr(self, self.OUTPUT)(y.transpose(1, 2).reshape(B, T, -1))


class PreNormBlock(nn.Module):
    """Pre-norm transformer block: ``x + attention(norm_1(x), *args)``, then ``x + mlp(norm_2(x))``.

    :attr:`NAMES` gives the four parts' attribute names (the family's: its tensor-parallel plan and
    checkpoints use them), registered in that order.
    """

    NAMES: tuple[str, str, str, str] = ("ln_1", "attn", "ln_2", "mlp")

    def __init__(self, norm_1: nn.Module, attention: nn.Module, norm_2: nn.Module, mlp: nn.Module) -> None:
        super().__init__()
        for name, part in zip(self.NAMES, (norm_1, attention, norm_2, mlp), strict=True):
            setattr(self, name, part)

    def forward(self, x: torch.Tensor, *args: Any) -> torch.Tensor:
        norm_1, attention, norm_2, mlp = (getattr(self, n) for n in self.NAMES)
        x = x + attention(norm_1(x), *args)
        return x + mlp(norm_2(x))


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits (B, T, V)`` against LongTensor ``targets (B, T)``, in fp32.

    Compiled with the blocks when ``compile=true``, which lets Inductor fuse the fp32 upcast into
    the log-softmax instead of materialising fp32 logits ``(B, T, V)``.
    """
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    """The LM head and its mean cross-entropy over chunks of tokens, gradients made in the forward
    (see :func:`chunked_linear_cross_entropy`)."""

    @staticmethod
    def forward(
        ctx: Any, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int
    ) -> torch.Tensor:
        device = h.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype
        n = h.size(0)
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        with torch.autocast(device, enabled=False):
            w = weight.to(dtype)
            for start in range(0, n, chunk):
                hc = h[start : start + chunk].to(dtype)
                tc = targets[start : start + chunk]
                logits = (hc @ w.t()).float()  # (c, V) fp32: the chunk's only copy
                lse = torch.logsumexp(logits, dim=-1)
                total += (lse - logits.gather(1, tc[:, None]).squeeze(1)).sum()
                grad = logits.sub_(lse[:, None]).exp_()  # softmax, in place: d(sum of losses)/d logits
                grad[torch.arange(tc.numel(), device=h.device), tc] -= 1
                grad = grad.to(dtype)
                grad_h[start : start + chunk] = grad @ w
                grad_w += grad.t() @ hc  # each chunk's product in the compute dtype, summed in fp32
        ctx.save_for_backward(grad_h, grad_w)
        ctx.n, ctx.weight_dtype = n, weight.dtype
        return total / n

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None]:
        grad_h, grad_w = ctx.saved_tensors
        scale = grad_out / ctx.n
        return (grad_h * scale).to(grad_h.dtype), (grad_w * scale).to(ctx.weight_dtype), None, None


@torch.compiler.disable
def chunked_linear_cross_entropy(
    h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk: int
) -> torch.Tensor:
    """Mean cross-entropy of the logits ``h @ weight.T`` against ``targets``, ``chunk`` tokens at a
    time, without the whole logits (``loss.chunk_tokens``; the technique of Liger Kernel's fused
    linear cross-entropy, Hsu et al. 2024, arXiv:2410.10989).

    Each chunk's logits ``(chunk, V)`` are made in the autocast dtype (fp32 without autocast),
    upcast to fp32 for the log-sum-exp, turned into the chunk's loss and into the gradients of its
    hidden states and of the weight (``softmax - onehot``), and freed. The gradients are kept for
    the backward, which scales them by the incoming gradient: ``6 x tokens x V x C`` FLOPs as the
    unfused head (forward ``2``, input gradient ``2``, weight gradient ``2``), none recomputed. Live
    at once: one chunk's fp32 logits, the hidden states' gradient (``h``'s shape and dtype) and the
    weight's (``V x C``, fp32). Eager: ``compile=true`` compiles the blocks, not this head
    (:func:`flopsweep.parallelize.apply_compile`), and ``compile_scope=model``'s whole-model compile
    leaves it out (``torch.compiler.disable``: a graph break), so its memory is the same under both.

    Args:
        h: the final norm's output ``(N, C)``; weight: the LM head ``(V, C)``; targets: LongTensor
            ``(N,)`` in ``[0, V)``; chunk: tokens per chunk, > 0.

    Returns:
        Scalar fp32 mean loss over the ``N`` tokens.
    """
    return _ChunkedLinearCrossEntropy.apply(h, weight, targets, chunk)


class CausalLM(nn.Module):
    """A decoder-only LM: ``forward(tokens)`` returns the mean next-token cross-entropy.

    Subclasses set :attr:`BLOCKS` (the attribute holding the ``nn.ModuleList`` of blocks),
    ``embedding_children`` and ``head_children`` (what the first and last pipeline stages keep,
    :mod:`flopsweep.pipeline`), and implement :meth:`embed`, :meth:`block_args` and :meth:`logits`.
    Positions (learned or RoPE) come from the position tensor ``forward`` is given, so a rank that
    holds a part of the sequence (context parallel's shard) passes that part's positions and
    targets, and no family changes. Activation checkpointing is applied from outside, to the
    blocks (:mod:`flopsweep.checkpointing`).
    """

    BLOCKS = "h"
    embedding_children: tuple[str, ...] = ()
    loss_chunk_tokens = 0
    """``loss.chunk_tokens``, set on the built module (:func:`flopsweep.parallelize.make_model`):
    > 0 fuses the head with the loss in chunks (:func:`chunked_linear_cross_entropy`)."""

    @property
    def head_children(self) -> tuple[str, ...]:
        """Children the LM head uses (the last pipeline stage keeps them)."""
        raise NotImplementedError

    def forward(
        self, tokens: torch.Tensor, targets: torch.Tensor | None = None, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Loss of one micro batch (or of this rank's part of its sequence).

        Args:
            tokens: LongTensor ``[batch, seq_len + 1]``, whose inputs are ``tokens[:, :-1]`` and
                targets ``tokens[:, 1:]``; or, with ``targets``, the inputs ``[batch, T]`` themselves.
            targets: LongTensor ``[batch, T]``, the next token of each input; None: cut from ``tokens``.
            positions: LongTensor ``[T]``, each input's position in the whole sequence; None:
                ``0 .. T-1`` (:meth:`positions`).

        Returns:
            Scalar mean cross-entropy (computed in fp32).
        """
        idx = tokens
        if targets is None:
            idx, targets = tokens[:, :-1], tokens[:, 1:]
        if positions is None:
            positions = self.positions(idx.size(1), idx.device)
        x = self.embed(idx, positions)  # (B, T, C); (B, T / tp, C) local under sequence parallelism
        args = self.block_args(positions)
        for block in self.block_list():
            x = block(x, *args)
        return self.head_loss(x, targets)

    def block_list(self) -> Sequence[nn.Module]:
        """The transformer blocks, in order."""
        return getattr(self, self.BLOCKS)

    @staticmethod
    def positions(seq_len: int, device: torch.device) -> torch.Tensor:
        """The positions of a whole sequence of ``seq_len``: LongTensor ``0 .. seq_len - 1``."""
        return torch.arange(seq_len, device=device)

    def embed(self, idx: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """idx LongTensor ``(B, T)`` at ``positions`` ``(T,)`` -> hidden states ``(B, T, C)``."""
        raise NotImplementedError

    def block_args(self, positions: torch.Tensor) -> tuple:
        """Arguments every block takes after the hidden states, for inputs at ``positions`` ``(T,)``
        (the whole sequence's under sequence parallelism: attention gathers it before it rotates)."""
        return ()

    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        """The norm before the LM head: ``(B, T, C)`` -> ``(B, T, C)``."""
        raise NotImplementedError

    def head_weight(self) -> torch.Tensor:
        """The LM head's weight ``(V, C)`` (the token embedding's when tied), read outside the head's
        own forward (ZeRO-3 gathers it as an external parameter: the family's ``tied_parameters``)."""
        raise NotImplementedError

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Final norm and LM head: ``(B, T, C)`` -> logits ``(B, T, V)`` (through the head module's
        forward, so tensor parallelism's and fp8's hooks on it run)."""
        raise NotImplementedError

    def head_loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Final norm, LM head and cross-entropy in fp32 (:func:`next_token_loss`), or, with
        :attr:`loss_chunk_tokens`, the head and loss fused in chunks (:func:`chunked_linear_cross_entropy`).

        Args:
            x: hidden states ``(B, T, C)``; targets: LongTensor ``(B, T)``.

        Returns:
            Scalar mean loss.
        """
        if self.loss_chunk_tokens > 0:
            h = self.final_norm(x)
            return chunked_linear_cross_entropy(
                h.reshape(-1, h.size(-1)), self.head_weight(), targets.reshape(-1), self.loss_chunk_tokens
            )
        return next_token_loss(self.logits(x), targets)
