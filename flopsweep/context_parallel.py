"""Context parallelism: the sequence split over the ``cp`` ranks, attention by all-to-all over heads.

Each micro batch's sequence of ``T`` tokens is cut into ``2 cp`` equal chunks and rank ``i`` of the
``cp`` group holds chunks ``i`` and ``2 cp - 1 - i`` (:func:`shard_positions`), the load-balanced
causal split of torchtitan and Megatron-LM: under a causal mask an early chunk attends to few keys
and a late one to many, and the pair gives every rank the same work (:func:`causal_pairs`). The
rank embeds its ``T / cp`` tokens at their own positions (GPT-2's learned positions, Llama's RoPE
rotations: the model takes the positions, :class:`flopsweep.models.layers.CausalLM`), so no family
changes.

Attention is DeepSpeed-Ulysses' (Jacobs et al. 2023, arXiv:2309.14509; DeepSpeed's ALST uses it): the
queries, keys and values of the local tokens are exchanged by one all-to-all each, which leaves
every rank the whole sequence for ``n_head / cp`` of the heads; the rank puts the tokens in sequence
order, runs the run's own kernel (any kernel that takes whole causal sequences), puts them back in
the order the ranks hold them and returns them by one more all-to-all (:class:`UlyssesAttention`).
Grouped-query attention: the key/value heads are split over ``cp`` when ``cp`` divides them (per
tensor-parallel rank), else repeated up to the query heads first (as ALST does), which sends more.

The loss of a rank is the mean over its local tokens; the ranks' shards are equal, so the mean of
the ``cp`` ranks' losses is the sequence's. The model's output is that mean (a forward hook, the
value only: each rank's backward is its own loss's), and FSDP2, which shards the model states over
``dp_shard x cp`` (torchtitan's ``dp_shard_cp``, :mod:`flopsweep.mesh`) and averages the gradients
over that mesh, makes the gradient of the mean loss over the data-parallel and context ranks.

It is the ``cp`` degree's module (:data:`flopsweep.degrees.DEGREE_SPECS`): its applier
:func:`apply_degree`, its micro-batch hook :func:`micro_context`, its step-time term :func:`transfers`,
and its rules before launch :func:`check` (in :data:`flopsweep.rules.RULES`). Torch is imported
inside the functions that use it: validation and the step-time model stay torch-free.

Ring attention (``torch.distributed.tensor.experimental.context_parallel``) is not built: torch 2.13
dispatches it for the CUDA SDPA kernels only (flash, efficient, cuDNN), not for the CPU's.
"""

from __future__ import annotations

import math
from typing import Any

from flopsweep.attention import KERNELS
from flopsweep.config import ConfigError, RunConfig

FAMILIES = ("gpt2", "llama")
"""Families whose attention context parallel wraps (:class:`flopsweep.models.layers.SelfAttention`);
``model=hf`` runs ``transformers``' own attention modules."""


def chunks(cp: int, rank: int) -> tuple[int, int]:
    """The two of the ``2 cp`` equal chunks of a sequence that context-parallel ``rank`` holds:
    ``(rank, 2 cp - 1 - rank)`` (torchtitan's and Megatron-LM's load-balanced causal split).

    Raises:
        ValueError: ``cp < 1`` or ``rank`` not in ``[0, cp)``.
    """
    if cp < 1 or not 0 <= rank < cp:
        raise ValueError(f"context-parallel rank {rank} is not in [0, {cp})")
    return rank, 2 * cp - 1 - rank


def shard_positions(seq_len: int, cp: int, rank: int) -> list[int]:
    """The positions in the whole sequence of the ``seq_len / cp`` tokens that ``rank`` holds, in the
    order it holds them: chunk ``rank``, then chunk ``2 cp - 1 - rank`` (:func:`chunks`).

    Raises:
        ValueError: ``seq_len`` not a multiple of ``2 cp`` (validation refuses it first, :func:`check`).
    """
    if seq_len % (2 * cp):
        raise ValueError(f"a sequence of {seq_len} tokens does not split into {2 * cp} equal chunks")
    size = seq_len // (2 * cp)
    return [p for c in chunks(cp, rank) for p in range(c * size, (c + 1) * size)]


def gathered_order(seq_len: int, cp: int) -> list[int]:
    """The positions of the ``seq_len`` tokens as the all-to-all gathers them: rank 0's shard, then
    rank 1's, ... (:func:`shard_positions`). A permutation of ``0 .. seq_len - 1``."""
    return [p for rank in range(cp) for p in shard_positions(seq_len, cp, rank)]


def causal_pairs(positions: list[int]) -> int:
    """The (query, key) pairs a causal mask keeps for queries at ``positions``: ``sum(p + 1)``, the
    attention work of a rank that computes those queries against the keys before them."""
    return sum(p + 1 for p in positions)


def check(cfg: RunConfig) -> None:
    """``parallel.cp > 1``: a gpt2 or llama model (:data:`FAMILIES`), a kernel whose spec takes
    context parallel (:attr:`flopsweep.attention.KernelSpec.context_parallel`), no pipeline, query
    heads that divide over ``tp x cp`` (each rank's all-to-all gives ``n_head / (tp cp)`` heads), a
    sequence of ``2 cp`` equal chunks whose ``cp`` shards split over ``tp`` (sequence parallelism).
    The backend (FSDP2) is :func:`flopsweep.layout.check_built`'s.

    Raises:
        ConfigError: naming the key, the value and the fix.
    """
    cp = cfg.parallel.cp
    if cp <= 1:
        return
    one = "set parallel.cp=1"
    if cfg.model.arch not in FAMILIES:
        raise ConfigError(
            "parallel.cp",
            cp,
            f"model.arch={cfg.model.arch} runs transformers' attention, which context parallel does not wrap",
            f"{one}, or pick a gpt2 or llama model (model=gpt-tiny, llama-tiny, llama3.1-8b, ...)",
        )
    spec = KERNELS[cfg.attention.name]
    if not spec.context_parallel:
        takes = sorted((n for n, k in KERNELS.items() if k.context_parallel), key=lambda n: n != "sdpa")
        raise ConfigError(
            "attention",
            cfg.attention.name,
            f"does not take context parallel (parallel.cp={cp}): {spec.why_not_cp}",
            f"pick {' or '.join(f'attention={n}' for n in takes[:3])}, or {one}",
        )
    if cfg.parallel.pp > 1:
        raise ConfigError(
            "parallel.cp",
            cp,
            f"the pipeline's stages take whole sequences (parallel.pp={cfg.parallel.pp})",
            f"{one}, or parallel.pp=1",
        )
    _check_shapes(cfg)


def _check_shapes(cfg: RunConfig) -> None:
    """The heads and sequence part of :func:`check`."""
    cp, tp, m = cfg.parallel.cp, cfg.parallel.tp, cfg.model
    if m.n_head % (tp * cp):
        over = f"parallel.tp x parallel.cp = {tp} x {cp}" if tp > 1 else f"{cp} ranks"
        raise ConfigError(
            "parallel.cp",
            cp,
            f"does not divide the query heads model.n_head={m.n_head} over {over} (the all-to-all over "
            "heads gives each rank whole heads)",
            f"set parallel.cp to a divisor of {m.n_head // tp}, or 1",
        )
    if m.seq_len % (2 * cp) or (m.seq_len // cp) % tp:
        need = cp * math.lcm(2, tp)
        raise ConfigError(
            "parallel.cp",
            cp,
            f"model.seq_len={m.seq_len} does not split into {2 * cp} equal chunks"
            + (f" whose {cp} shards each split over parallel.tp={tp}" if tp > 1 else "")
            + " (the load-balanced causal split)",
            f"set model.seq_len to a multiple of {need}, or parallel.cp=1",
        )


def transfers(w: Any, *, gpus_per_node: int) -> list[Any]:
    """The ``cp`` degree's communication per optimizer step (:func:`flopsweep.steptime.transfers`),
    none at ``cp`` 1: Ulysses' all-to-alls, per layer and micro batch, of the rank's ``s / cp``
    tokens of the queries, keys and values and of the attention output (``4 x micro x s / cp x h x b``
    bytes in forward; keys and values are the query's size: the kernel-side repeat of grouped
    key/value heads is not counted), the same again in backward, and again for a recomputed forward
    (:attr:`~flopsweep.steptime.Workload.recompute_share`); over the ``cp`` group, never overlapped
    (attention waits for them). Over ``tp`` each rank sends its local heads only."""
    from flopsweep.degrees import span
    from flopsweep.workload import Transfer

    cp = w.degree("cp")
    if cp == 1:
        return []
    per_layer = 2 + w.recompute_share  # forward, backward, recomputed forward
    return [
        Transfer(
            what="context-parallel all-to-all of q, k, v and the attention output",
            collective="all_to_all",
            bytes=4 * w.micro_batch_size * w.seq_len / cp * w.n_embd / w.degree("tp") * w.param_bytes,
            count=round(per_layer * (w.n_layer // w.degree("pp")) * w.grad_accum),
            group=cp,
            across_nodes=span(w.degrees, "cp") > gpus_per_node,
            overlappable=False,
        )
    ]


def apply_degree(model: Any, step: Any) -> Any:
    """The ``cp`` degree's applier (:class:`flopsweep.parallelize.DegreeStep` ``step``): every
    attention module's kernel wrapped in :class:`UlyssesAttention` over the mesh's ``cp`` group, and
    the model's loss made the mean over the ``cp`` ranks (value only: :func:`_mean_loss`);
    ``model`` as it is at ``cp`` 1."""
    if step.size == 1:
        return model
    from flopsweep.models.layers import SelfAttention

    group = step.mesh[step.spec.name].get_group()
    for module in model.modules():
        if isinstance(module, SelfAttention):
            module.attn_fn = UlyssesAttention(module.attn_fn, group=group, cp=step.size)
    model.register_forward_hook(_mean_loss(group, step.size))
    return model


def _mean_loss(group: Any, cp: int) -> Any:
    """A forward hook whose output has the value of the mean of the ``cp`` ranks' losses and the
    gradient of this rank's own (each rank's backward then makes its share of the sequence's
    gradient; FSDP2 averages them)."""
    import torch.distributed as dist

    def hook(module: Any, args: Any, loss: Any) -> Any:
        mean = loss.detach().clone()
        dist.all_reduce(mean, group=group)
        return loss + (mean / cp - loss.detach())

    return hook


def micro_context(layout: Any, mesh: Any) -> Any:
    """The ``cp`` degree's micro-batch hook: in each micro batch, the model called with this rank's
    shard of the inputs, targets and positions (:func:`shard_positions`), else None (``cp`` 1)."""
    if layout.cp == 1:
        return None
    import contextlib

    import torch

    rank = mesh["cp"].get_local_rank()

    @contextlib.contextmanager
    def shard(batch: Any) -> Any:
        inputs, targets, positions = batch.whole()
        index = torch.tensor(shard_positions(inputs.size(1), layout.cp, rank), device=inputs.device)
        batch.args = (inputs[:, index], targets[:, index], positions[index])
        yield

    return shard


class UlyssesAttention:
    """A kernel ``(q, k, v) -> y`` run on the whole sequence and ``1 / cp`` of the heads.

    Called with this rank's ``T / cp`` tokens: ``q (B, nh, T / cp, hd)``, ``k, v (B, n_kv, T / cp, hd)``
    (``nh`` and ``n_kv`` the heads of the rank, ``/ tp`` under tensor parallelism); returns
    ``y (B, nh, T / cp, hd)`` as the kernel returns it on one rank. ``nh`` must divide by ``cp``;
    ``n_kv`` is split when ``cp`` divides it, else repeated to ``nh`` first.
    """

    def __init__(self, kernel: Any, *, group: Any, cp: int) -> None:
        self.kernel, self.group, self.cp = kernel, group, cp
        self._orders: dict[tuple[int, Any], tuple[Any, Any]] = {}

    def __call__(self, q: Any, k: Any, v: Any) -> Any:
        from flopsweep.attention_kernels import repeat_kv

        if k.size(1) % self.cp:  # GQA with fewer key/value heads than ranks: send them repeated
            k, v = repeat_kv(q, k, v)
        gathered, natural = self._order(q.size(2) * self.cp, q.device)
        q, k, v = (self._to_heads(t, natural) for t in (q, k, v))  # (B, nh / cp, T, hd)
        y = self.kernel(q, k, v)
        return self._to_sequence(y.index_select(2, gathered))

    def _order(self, seq_len: int, device: Any) -> tuple[Any, Any]:
        """``(gathered, natural)``: the positions of the gathered tokens, and its inverse (the index
        of each position among them)."""
        key = (seq_len, device)
        if key not in self._orders:
            import torch

            gathered = torch.tensor(gathered_order(seq_len, self.cp), device=device)
            self._orders[key] = gathered, torch.argsort(gathered)
        return self._orders[key]

    def _all_to_all(self, x: Any) -> Any:
        """``x (cp, ...)``: part ``j`` sent to rank ``j``; returns ``(cp, ...)``, part ``j`` from
        rank ``j`` (differentiable: the backward is the reverse all-to-all)."""
        from torch.distributed._functional_collectives import all_to_all_single_autograd, wait_tensor

        return wait_tensor(all_to_all_single_autograd(x.contiguous(), None, None, self.group))

    def _to_heads(self, x: Any, natural: Any) -> Any:
        """``(B, H, T / cp, hd)`` of the local tokens -> ``(B, H / cp, T, hd)`` in sequence order."""
        B, H, t, hd = x.shape
        parts = x.reshape(B, self.cp, H // self.cp, t, hd).transpose(0, 1)  # (cp, B, H / cp, t, hd)
        got = self._all_to_all(parts)  # got[j]: rank j's tokens of this rank's heads
        whole = got.permute(1, 2, 0, 3, 4).reshape(B, H // self.cp, self.cp * t, hd)
        return whole.index_select(2, natural)

    def _to_sequence(self, y: Any) -> Any:
        """``(B, H / cp, T, hd)`` in gathered order -> ``(B, H, T / cp, hd)`` of the local tokens."""
        B, h, T, hd = y.shape
        parts = y.reshape(B, h, self.cp, T // self.cp, hd).permute(2, 0, 1, 3, 4)  # (cp, B, h, t, hd)
        got = self._all_to_all(parts)  # got[j]: this rank's tokens of rank j's heads
        return got.transpose(0, 1).reshape(B, h * self.cp, T // self.cp, hd)
